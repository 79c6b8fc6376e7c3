"""End-to-end hierarchy runs on a 2-CPU Ray session (shared by this module)."""

import sys

import numpy as np
import pandas as pd
import pytest
import ray

import rayfl
from rayfl.config import load_config
from rayfl.engine import build_system
from tests.configs import DIGITS_8

FLAT = {
    "name": "flat",
    "rounds": 3,
    "data": DIGITS_8,
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": {"kind": "fedavg", "local_steps": 3, "batch_size": 16, "lr": 0.1},
    "output": {"progress": False, "plots": False},
}

ONE_EDGE = {
    "kind": "hierarchical",
    "num_edges": 1,
    "tau": 3,
    "local_period": 3,
    "weighting": "data_size",
    "edge_eval": False,
    "dp": {"enabled": False, "grad_bound": None},
    "lr": {"mode": "constant"},
}


def test_one_edge_without_noise_is_fedavg(ray_session, tmp_path):
    # Arrange / Act: the flat engine and a one-edge hierarchy, same seed
    flat = rayfl.run(FLAT, {"output.dir": str(tmp_path)})
    hier = rayfl.run(
        {**FLAT, "name": "hier", "topology": ONE_EDGE}, {"output.dir": str(tmp_path)}
    )
    # Assert: identical per-client metrics and global accuracy (bit for bit)
    cols = ["round", "client", "scheduled", "train_loss", "test_loss", "test_acc"]
    pd.testing.assert_frame_equal(flat.metrics[cols], hier.metrics[cols])
    pd.testing.assert_series_equal(flat.rounds["global_acc"], hier.rounds["global_acc"])
    assert (hier.run_dir / "edges.parquet").exists()
    assert hier.rounds["energy_j"].gt(0).all() and hier.rounds["latency_s"].gt(0).all()


def test_trusted_edges_cut_the_noise_variance_by_s_c(ray_session):
    # Arrange: one system (4 subnets of 5, d = 4874); same seed, data and update
    base = {
        **FLAT,
        "rounds": 1,
        "data": {"dataset": "digits", "num_clients": 20, "partition": "iid"},
        "model": {"kind": "mlp", "hidden": [64]},
        "topology": {
            "kind": "hierarchical",
            "num_edges": 4,
            "tau": 2,
            "local_period": 2,  # τ = m: only the global release (exact noise)
            "edge_eval": False,
            "dp": {"epsilon": 1.0},
        },
    }
    system = build_system(load_config(base))
    try:
        finals = {}
        for name, trusted, dp in (
            ("clean", np.zeros(4, bool), False),
            ("trusted", np.ones(4, bool), True),
            ("untrusted", np.zeros(4, bool), True),
        ):
            system.reset(trusted=trusted, dp_enabled=dp)
            system.run_global_round(0)
            finals[name] = system.global_vector().astype(np.float64)
        eta, q = system.learning_rate(0), system.sample_rate
    finally:
        system.close()
    # Act: noise on the global model = w̄(noisy) − w̄(no DP)
    var_t = float(np.var(finals["trusted"] - finals["clean"]))
    var_u = float(np.var(finals["untrusted"] - finals["clean"]))
    # Assert: ratio ≈ 1/s_c = 1/5 (spec §2.3, c_2 = v_2)
    assert var_t / var_u == pytest.approx(1 / 5, rel=0.1)
    # and the trusted variance is the closed form σ̄²/N, σ̄ = c q 2ητG √(ln 1/δ)/(ε s)
    sigma_bar = 1.5 * q * 2 * eta * 2 * 1.0 * np.sqrt(np.log(1e5)) / 1.0 / 5
    assert var_t == pytest.approx(sigma_bar**2 / 4, rel=0.1)


def test_edges_are_light_and_placed_with_their_devices(ray_session, tmp_path):
    cfg = load_config(
        {
            **FLAT,
            "rounds": 2,
            "topology": {
                "kind": "hierarchical",
                "num_edges": 2,
                "tau": 4,
                "local_period": 2,
                "control": {"enabled": True, "tau_max": 6},
            },
        },
        {"output.dir": str(tmp_path)},
    )
    system = build_system(cfg)
    try:
        result, extras = system.run_global_round(0)
        torch_in_edge = ray.get(
            system.edges[0].__ray_call__.remote(lambda self: "torch" in sys.modules)
        )
        placement = system.placement()
        # the controller picked the next interval within its grid
        assert (
            1 <= system.interval.tau <= 6 and (system.interval.participants >= 1).all()
        )
        assert extras["energy_j"] > 0 and len(result.rows) == 8
    finally:
        system.close()
    assert placement["edges_on_home_node"] == 2
    assert not torch_in_edge
