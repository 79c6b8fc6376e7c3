"""Server-free D2D runs (pFedWN, Local, federated baselines) on Ray actors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rayfl.config import ConfigError, load_config
from rayfl.data.federated import build_federated
from rayfl.engine import build_system
from rayfl.learning.models import FlatModel, build_model
from rayfl.learning.train import evaluate, local_sgd
from rayfl.seeding import rng_for
from rayfl.system import initial_vector
from tests.configs import TINY_D2D

BASE = {**TINY_D2D, "algorithm": {**TINY_D2D["algorithm"], "trainer": "autograd"}}


def config(**topology):
    overrides = {f"topology.{k}": v for k, v in topology.items()}
    return load_config(BASE, overrides)


def run_rounds(cfg, rounds=2):
    with build_system(cfg) as system:
        rows = [system.run_round(t, system.decision()).rows for t in range(rounds)]
        report = system.selection_report()
    return rows, report


def target_row(rows, t, target=0):
    return next(r for r in rows[t] if r["client"] == target)


def test_alpha_one_is_pure_local_training(ray_session):
    # Arrange: pFedWN with α = 1 must equal SGD on the target's data alone.
    cfg = config(alpha=1.0)
    data = build_federated(cfg.data, seed=cfg.seed)
    model = FlatModel(
        build_model("mlp", input_shape=data.input_shape, num_classes=10, hidden=(16,))
    )
    vector = initial_vector(cfg, tuple(data.input_shape), data.num_classes)
    x, y = data.train(0)
    x_te, y_te = data.test(0)
    expected = []
    for t in range(2):
        rng = rng_for(cfg.seed, "d2d_personal_batch", round=t, client=0)
        vector = local_sgd(model, vector, x, y, lr=0.1, batch_size=16, rng=rng).vector
        expected.append(evaluate(model, vector, x_te, y_te)[1])
    # Act
    rows, report = run_rounds(cfg)
    # Assert
    assert report["targets"]["0"]["neighbors"], "the test needs selected neighbors"
    got = [target_row(rows, t)["post_train_acc"] for t in range(2)]
    np.testing.assert_allclose(got, expected, rtol=0, atol=0)
    assert any(r["role"] == "neighbor" for r in rows[0])


@pytest.mark.slow
def test_same_seed_same_metrics_whatever_the_packing(ray_session):
    # Arrange
    packed = load_config(config(), ["ray.clients_per_actor=auto"])
    single = load_config(config(), ["ray.clients_per_actor=1"])
    # Act
    rows_a, report_a = run_rounds(packed)
    rows_b, report_b = run_rounds(single)
    # Assert
    pd.testing.assert_frame_equal(
        pd.DataFrame([r for rows in rows_a for r in rows]),
        pd.DataFrame([r for rows in rows_b for r in rows]),
        check_exact=True,
    )
    assert (
        report_a["targets"]["0"]["em_weights"] == report_b["targets"]["0"]["em_weights"]
    )


def test_em_weights_stay_on_the_simplex_and_pfedwn_mixes(ray_session):
    rows, report = run_rounds(config(alpha=0.5))
    history = np.asarray(report["targets"]["0"]["em_weights"])
    assert history.shape[0] == 3  # π⁰ and one E/M step per round
    np.testing.assert_allclose(history.sum(axis=1), 1.0, rtol=1e-9)
    assert np.all(history >= 0)
    row = target_row(rows, 1)
    assert row["post_agg_acc"] != row["post_train_acc"]


@pytest.mark.parametrize("method", ["local", "federated"])
def test_baselines_run_over_the_target_group(ray_session, method):
    rows, report = run_rounds(config(method=method, link_model="bernoulli"))
    members = report["targets"]["0"]["members"]
    row = target_row(rows, 1)
    assert 0.0 <= row["test_acc"] <= 1.0
    roles = {r["client"]: r["role"] for r in rows[1]}
    if method == "local":
        assert [c for c, r in roles.items() if r == "neighbor"] == []
    else:
        assert sorted(c for c, r in roles.items() if r != "idle") == members


@pytest.mark.slow
def test_all_targets_with_personalized_neighbors_and_sinr_links(ray_session):
    cfg = config(target="all", neighbor_model="personalized", link_model="mc_sinr")
    rows, report = run_rounds(cfg)
    assert sorted(report["targets"]) == [str(c) for c in range(6)]
    assert all(r["role"] == "target" for r in rows[1])
    assert all(np.isfinite(r["test_acc"]) for r in rows[1])


def test_bad_topology_values_are_named():
    with pytest.raises(ConfigError, match="topology"):
        load_config(BASE, ["topology.alpha=1.5"])
    with pytest.raises(ConfigError, match="topology"):
        load_config(BASE, ["topology.target=-2"])
