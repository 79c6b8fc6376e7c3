"""Pure parts of examples/reproduce_pfedwn.py and examples/reproduce_sparse_dp.py.

No Ray: method names → config overrides (which the D2D runner must accept),
the selected-neighbor counts, and the accuracy-at-equal-delay table computed
from hand-made per-round rows.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rayfl.config import load_config

EXAMPLES = Path(__file__).parents[1] / "examples"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pfedwn_method_overrides_load_as_valid_d2d_configs():
    mod = _script("reproduce_pfedwn")
    assert mod.method_overrides("pfedwn@0.7") == {
        "topology.method": "pfedwn",
        "topology.alpha": 0.7,
    }
    assert mod.method_overrides("local") == {"topology.method": "local"}
    perfedavg = mod.method_overrides("perfedavg@beta=0.01")
    assert perfedavg["algorithm.beta"] == 0.01
    assert "topology.participants" not in perfedavg  # federates M_n, as FedAvg
    # FedAMP keeps every upload for per-client downloads: all nodes federate.
    assert mod.method_overrides("fedamp")["topology.participants"] == "all"
    for method in mod.METHODS + ("perfedavg@beta=0.01", "apple"):
        cfg = load_config(mod.BASE, mod.method_overrides(method))
        assert cfg.topology.kind == "d2d"
    # Without participants=all the D2D config refuses FedAMP (what the script avoids).
    with pytest.raises(ValueError, match="participants=all"):
        load_config(
            mod.BASE, {"topology.method": "federated", "algorithm.kind": "fedamp"}
        )
    with pytest.raises(ValueError, match="key=value"):
        mod.method_overrides("perfedavg@0.01")


def test_pfedwn_counts_are_long_and_grow_with_epsilon():
    mod = _script("reproduce_pfedwn")
    counts = mod.count_selected(6, [5.0, 15.0], [0.01, 0.1])
    assert len(counts) == 2 * 2 * 6
    assert set(counts["layout"]) == set(range(6))
    mean = counts.groupby(["sinr_threshold", "epsilon"])["selected"].mean()
    # A looser error target selects at least as many neighbors, per drop too.
    for gamma in ("5", "15"):
        assert mean[(gamma, "0.1")] >= mean[(gamma, "0.01")]
        tight = counts[(counts.sinr_threshold == gamma) & (counts.epsilon == "0.01")]
        loose = counts[(counts.sinr_threshold == gamma) & (counts.epsilon == "0.1")]
        assert (loose["selected"].to_numpy() >= tight["selected"].to_numpy()).all()
    # A higher SINR threshold never selects more.
    assert mean[("15", "0.1")] <= mean[("5", "0.1")]


def _rounds(policy: str, seed: int, delays: list[float], accs: list[float]):
    return pd.DataFrame(
        {
            "policy": policy,
            "seed": seed,
            "round": np.arange(len(delays)),
            "global_acc": accs,
            "latency_s": delays,
            "cum_delay_s": np.cumsum(delays),
            "mean_bits": 100.0,
            "max_eps_ratio": 0.5,
            "wall_s": 3.0,
        }
    )


def test_sparse_dp_runs_table_accuracy_at_equal_delay():
    mod = _script("reproduce_sparse_dp")
    runs = pd.concat(
        [
            # cumulative delay 1, 2, 3, 4 s; total 4 s = the budget B
            _rounds("fast", 0, [1, 1, 1, 1], [0.1, 0.5, 0.4, 0.6]),
            # cumulative delay 3, 6, 9 s
            _rounds("slow", 0, [3, 3, 3], [0.7, 0.8, 0.9]),
        ],
        ignore_index=True,
    )
    table = mod.runs_table(runs, dim=10).set_index("policy")
    assert table.loc["fast", "budget_s"] == table.loc["slow", "budget_s"] == 4.0
    # fast: best accuracy within 1 / 2 / 3 / 4 s
    assert table.loc[
        "fast", ["acc_b25", "acc_b50", "acc_b75", "acc_b100"]
    ].tolist() == [
        0.1,
        0.5,
        0.5,
        0.6,
    ]
    # slow: nothing before 3 s, then its first round only
    assert np.isnan(table.loc["slow", "acc_b25"])
    assert np.isnan(table.loc["slow", "acc_b50"])
    assert table.loc["slow", "acc_b75"] == table.loc["slow", "acc_b100"] == 0.7
    assert table.loc["slow", "final_acc"] == 0.9
    assert table.loc["slow", "cum_delay_s"] == 9.0
    assert table.loc["fast", "dense_bits"] == 320


def test_sparse_dp_budget_ratio_and_bad_policy():
    mod = _script("reproduce_sparse_dp")
    privacy = {
        "epsilon_per_client": [1.0, 3.0],
        "epsilon_budget_per_client": [2.0, 4.0],
    }
    assert mod.max_budget_ratio(privacy) == 0.75
    assert np.isnan(mod.max_budget_ratio({"mechanism": "none"}))
    with pytest.raises(SystemExit):
        mod.main(["--policies", "lyapunov,greedy"])
