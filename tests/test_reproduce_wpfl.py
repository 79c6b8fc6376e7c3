"""Smoke run of examples/reproduce_wpfl.py on digits (slow: real Ray runs)."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "examples" / "reproduce_wpfl.py"


def load_script(name: str):
    """Import examples/reproduce_wpfl.py as a module called ``name``."""
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiny_args(out, *extra: str) -> list[str]:
    """Flags of a seconds-long run: digits, T0 = 1, 60 samples, one step."""
    return [
        "--pairs",
        "mlr-digits",
        "--t0",
        "1",
        "--samples-per-client",
        "60",
        "--steps",
        "1",
        *extra,
        "--out",
        str(out),
    ]


@pytest.mark.slow
def test_reproduce_wpfl_writes_table_and_plots(ray_session, tmp_path):
    module = load_script("reproduce_wpfl")
    args = tiny_args(tmp_path, "--seeds", "0", "--policies", "round_robin", "random")
    module.main(args)
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    assert {r["policy"] for r in rows} == {"round_robin", "random"}
    # T0 = 1: 20 clients, 10 subchannels → 2 rounds, then every client is done
    assert all(int(r["rounds"]) == 2 for r in rows)
    assert (tmp_path / "table.md").read_text().startswith("| pair |")
    for name in ("accuracy_vs_t0.png", "jain_vs_t0.png", "max_loss_vs_t0.png"):
        assert (tmp_path / name).stat().st_size > 0
    module.main(args)  # finished runs are skipped, not repeated
    assert len(list(csv.DictReader((tmp_path / "results.csv").open()))) == 2
    # another setting in the same --out would reuse those rows: refused
    with pytest.raises(SystemExit, match="another --out"):
        module.main([*args[:-2], "--steps", "2", *args[-2:]])
    with pytest.raises(SystemExit, match="another --out"):
        module.main([*args[:-2], "--pl-scheduled-only", *args[-2:]])


def test_pl_scheduled_only_switches_the_config():
    module = load_script("reproduce_wpfl_cfg")
    parser_args = lambda *extra: module.parse_args(tiny_args("out", *extra))  # noqa: E731
    default = module.overrides_for("mlr-digits", "minmax", 1, 0, parser_args())
    alg1 = module.overrides_for(
        "mlr-digits", "minmax", 1, 0, parser_args("--pl-scheduled-only")
    )
    assert default["algorithm.personal_all_clients"] is True
    assert alg1["algorithm.personal_all_clients"] is False


@pytest.mark.slow
def test_reproduce_wpfl_parallel_runs_finish(ray_session, tmp_path):
    """--parallel 2 shares the CPUs between the runs (it used to deadlock)."""
    module = load_script("reproduce_wpfl_par")
    extra = ("--seeds", "0", "1", "--policies", "round_robin", "--parallel", "2")
    module.main(tiny_args(tmp_path, *extra))
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    assert sorted(int(r["seed"]) for r in rows) == [0, 1]
