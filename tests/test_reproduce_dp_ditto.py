"""examples/reproduce_dp_ditto.py: same DP noise for every method, and a smoke run."""

from __future__ import annotations

import csv
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from rayfl.config import load_config
from rayfl.uplink import UplinkModel

SCRIPT = Path(__file__).parents[1] / "examples" / "reproduce_dp_ditto.py"


def load_script():
    """Import examples/reproduce_dp_ditto.py as a module."""
    spec = importlib.util.spec_from_file_location("reproduce_dp_ditto", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def eq8_sigma(clip, size, rounds, clients, epsilon, delta):
    """σ_n of the paper's eq. 8, written out: (2C/|D_n|)·√(2TN ln(1/δ))/(εN)."""
    return (
        (2 * clip / size)
        * math.sqrt(2 * rounds * clients * math.log(1 / delta))
        / (epsilon * clients)
    )


def test_every_method_gets_the_paper_noise_for_its_clients():
    module = load_script()
    args = module.parse_args(["--clients", "4", "--rounds", "7", "--epsilon", "3"])
    sizes = np.array([90, 150, 150, 300])
    want = [eq8_sigma(20.0, s, 7, 4, 3.0, 0.01) for s in sizes]
    for kind in module.ALGORITHMS:
        config = load_config(module.run_config(args, kind, seed=0))
        assert config.algorithm.kind == kind
        uplink = UplinkModel(config, num_train=sizes)
        np.testing.assert_allclose(uplink.client_noise_std, want, rtol=1e-9)
        # the ledger accounts the same noise at Δ = 2C
        np.testing.assert_allclose(
            uplink.client_noise_multiplier, np.array(want) / 40.0, rtol=1e-9
        )
        assert config.privacy.clip_norm == 20.0
        assert not config.privacy.clip_per_layer
    assert load_config(module.run_config(args, "ditto", 0)).algorithm.lam == 0.005


def test_unknown_algorithm_is_refused_with_the_allowed_names(capsys):
    module = load_script()
    with pytest.raises(SystemExit):
        module.parse_args(["--algorithms", "ditto,fedavgg"])
    err = capsys.readouterr().err
    assert "fedavgg" in err and "pfedme" in err


@pytest.mark.slow
def test_smoke_run_on_digits_writes_one_row_per_method_and_seed(ray_session, tmp_path):
    module = load_script()
    argv = [
        "--algorithms",
        "ditto,fedamp",
        "--seeds",
        "0",
        "--dataset",
        "digits",
        "--model",
        "mlr",
        "--clients",
        "6",
        "--samples",
        "100",
        "--rounds",
        "1",
        "--epsilon",
        "5",
        "--out",
        str(tmp_path),
        "--runs-dir",
        str(tmp_path / "runs"),
    ]
    module.main(argv)
    rows = list(csv.DictReader((tmp_path / "baselines.csv").open()))
    assert [r["algorithm"] for r in rows] == ["ditto", "fedamp"]
    for row in rows:
        assert 0.0 <= float(row["acc"]) <= 1.0
        assert float(row["worst10_acc"]) <= float(row["mean_acc"]) + 1e-12
        assert float(row["var_train_loss"]) >= 0.0
        assert 0.0 < float(row["jain_acc"]) <= 1.0
        assert float(row["epsilon_nominal"]) == pytest.approx(5.0)
        # the accountant at Δ = 2C, no subsampling: far above the nominal ε
        assert float(row["epsilon_accountant"]) > 5.0
        assert float(row["wall_s"]) > 0.0
    # the same σ_u for both methods (same data, same config)
    assert rows[0]["sigma_u"] == rows[1]["sigma_u"]
    module.main(argv)  # finished runs are skipped, not repeated
    assert len(list(csv.DictReader((tmp_path / "baselines.csv").open()))) == 2
    with pytest.raises(SystemExit, match="another setting"):
        module.main([*argv, "--lam", "0.1"])
