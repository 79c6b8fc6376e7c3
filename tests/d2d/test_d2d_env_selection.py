"""Neighbor selection through D2DNeighbor-v0 on the real D2D system (Ray)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import rayfl
from envs.d2d import D2DNeighborEnv, make_selection_policies, policy_action
from rayfl.config import load_config
from rayfl.engine import build_system
from rayfl.learning.models import FlatModel, build_model
from rayfl.learning.train import evaluate
from rayfl.system import initial_vector
from tests.configs import TINY_D2D

BASE = {**TINY_D2D, "algorithm": {**TINY_D2D["algorithm"], "trainer": "autograd"}}


@pytest.mark.slow
def test_runner_with_channel_threshold_through_the_env_equals_once(
    ray_session, tmp_path
):
    # Arrange: P^err is fixed by the layout, so re-selecting every round with
    # channel_threshold picks the t = 0 neighbors again (ideal links).
    once = load_config(BASE)
    via_env = load_config(BASE, ["topology.selection_via=env"])
    # Act
    a = rayfl.run(once, {"output.dir": str(tmp_path / "once")})
    b = rayfl.run(via_env, {"output.dir": str(tmp_path / "env")})
    # Assert
    pd.testing.assert_frame_equal(a.metrics, b.metrics, check_exact=True)
    drop = ["round_time_s"]
    pd.testing.assert_frame_equal(
        a.rounds.drop(columns=drop), b.rounds.drop(columns=drop), check_exact=True
    )
    report_a, report_b = (r.summary["d2d"]["targets"]["0"] for r in (a, b))
    assert report_a["neighbors"]
    for key in ("neighbors", "em_weights", "em_loglik", "members"):
        assert report_a[key] == report_b[key]


def test_emulated_env_with_changing_neighbors(ray_session):
    # Arrange
    cfg = load_config(BASE, ["rounds=3"])
    env = D2DNeighborEnv(cfg, mode="emulate", reward="accuracy_gain")
    try:
        obs, _ = env.reset()
        policies = make_selection_policies(env, "random_neighbors")
        system = env.backend.system
        data = system.data
        model = FlatModel(
            build_model(
                "mlp", input_shape=data.input_shape, num_classes=10, hidden=(16,)
            )
        )
        x, y = data.test(0)
        previous = evaluate(model, initial_vector(cfg, data.input_shape, 10), x, y)[1]
        chosen = []
        for _ in range(3):
            # Act
            action = policy_action(env, policies, obs)
            obs, reward, _, truncated, info = env.step(action)
            # Assert: the round used exactly the selected neighbors
            neighbors = info["neighbors"][0]
            chosen.append(tuple(neighbors))
            rows = env.backend.rows
            selected = sorted(r["client"] for r in rows if r["selected"])
            assert selected == neighbors
            acc = info["test_acc"][0]
            assert reward == pytest.approx(acc - previous, abs=1e-12)
            previous = acc
            pi = obs["em_weight"]
            assert np.all(pi[obs["selected"] == 0] == 0)
            if neighbors:
                np.testing.assert_allclose(pi.sum(), 1.0, rtol=1e-6)
        assert truncated
        assert len(set(chosen)) > 1, "random_neighbors should change M_n"
    finally:
        env.close()


def test_set_selection_keeps_pi_of_kept_neighbors(ray_session):
    cfg = load_config(BASE, ["topology.epsilon=0.9"])
    with build_system(cfg) as system:
        old = system.selections[0].neighbors
        assert len(old) >= 3, "the test needs three selected neighbors"
        system.run_round(0, system.decision())
        pi = dict(zip(old, system.em_weights(0), strict=True))
        keep = old[:2]
        new = next(m for m in range(1, 6) if m not in old) if len(old) < 5 else None
        members = keep + ((new,) if new is not None else ())
        system.set_selection(0, members, tuple(range(len(members))))
        got = dict(
            zip(system.selections[0].neighbors, system.em_weights(0), strict=True)
        )
        assert got[keep[0]] / got[keep[1]] == pytest.approx(pi[keep[0]] / pi[keep[1]])
        assert sum(got.values()) == pytest.approx(1.0)
        if new is not None:
            scale = got[keep[0]] / pi[keep[0]]
            assert got[new] == pytest.approx(scale / len(members))
        rows = system.run_round(1, system.decision()).rows
        assert sorted(r["client"] for r in rows if r["selected"]) == sorted(members)
        with pytest.raises(ValueError, match="distinct other clients"):
            system.set_selection(0, (0, 1), (0, 1))
        with pytest.raises(ValueError, match="not a target"):
            system.set_selection(3, (1,), (0,))
