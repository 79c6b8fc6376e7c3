"""Smoke run of examples/dp_ditto_u_shape.py on a tiny budget (slow: Ray, real data)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "examples" / "dp_ditto_u_shape.py"


@pytest.mark.slow
def test_u_shape_script_writes_table_and_plot(ray_session, tmp_path):
    if not Path("/usr/share/datasets/fashion-mnist").is_dir():
        pytest.skip("dataset-fashion-mnist not installed")
    spec = importlib.util.spec_from_file_location("dp_ditto_u_shape", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    argv = [
        "--rounds", "1,2",
        "--epsilons", "1,inf",
        "--seeds", "0",
        "--clients", "4",
        "--samples", "60",
        "--bound",
        "--out", str(tmp_path),
        "--runs-dir", str(tmp_path / "runs"),
    ]  # fmt: skip
    table = module.main(argv)
    assert len(table) == 4 and table["pl_train_loss"].gt(0).all()
    assert (tmp_path / "u_shape.png").stat().st_size > 0
    assert (tmp_path / "u_shape.csv").is_file()
    dp = table[table["epsilon"] == 1.0]
    assert (dp["epsilon_nominal"] == 1.0).all()
    # the ledger (Δ = 2C, no subsampling) reports more than the paper's ε
    assert (dp["epsilon_accountant"] > 1.0).all()
    assert (table[table["epsilon"] == float("inf")]["sigma_u"] == 0.0).all()
    again = module.main(argv)  # finished runs are skipped, not repeated
    assert again["wall_s"].tolist() == table["wall_s"].tolist()
