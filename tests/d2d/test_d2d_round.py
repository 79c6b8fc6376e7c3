"""D2DRound as an engine strategy: observations, decisions and restart."""

from __future__ import annotations

import numpy as np
import pytest

from envs.d2d import D2DNeighborEnv, make_selection_policies, policy_action
from rayfl.config import load_config
from rayfl.d2d.deciders import selection_deciders, to_schedule
from rayfl.engine import build_system
from rayfl.engine.deciders import PolicyDecider
from rayfl.engine.loop import decide
from tests.configs import TINY_D2D

# All tests here use the shared Ray session (tests/conftest.py): the module then runs
# with the other Ray modules instead of starting Ray again at its first Ray test.
pytestmark = pytest.mark.usefixtures("ray_session")

BASE = {**TINY_D2D, "rounds": 3}


def _assert_same_rows(got_rows, want_rows):
    """Every row equal, key by key (NaN where both are NaN)."""
    assert len(got_rows) == len(want_rows)
    for got, want in zip(got_rows, want_rows, strict=True):
        assert list(got) == list(want)
        for key, value in want.items():
            if isinstance(value, float) and np.isnan(value):
                assert np.isnan(got[key]), key
            else:
                assert got[key] == value, key


def test_to_schedule_repairs_actions_like_the_env():
    # Arrange: the surrogate env's decoding, all targets, 6 nodes, 3 sub-channels
    env = D2DNeighborEnv(
        load_config(BASE, ["topology.target=all", "topology.num_subchannels=3"])
    )
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(50):
        action = rng.integers(0, 7, size=(6, 3))
        # Act
        want, _ = env.decode(action)
        for i, target in enumerate(env.targets):
            eligible = np.arange(6) != target
            schedule, ignored = to_schedule(action[i], eligible)
            # Assert
            assert tuple(schedule.clients.tolist()) == want[target][0]
            assert tuple(schedule.subchannel.tolist()) == want[target][1]
            named = [s for s in action[i].tolist() if s < 6]
            assert len(ignored) == len(named) - len(schedule.clients)
    with pytest.raises(ValueError, match="0..6"):
        to_schedule(np.array([7, 0, 0]), np.ones(6, bool))


class _History:
    """Oracle of a target's history rows, from the rows a D2D round returns."""

    def __init__(self, n):
        self.loss, self.uploads, self.staleness = np.zeros(n), np.zeros(n), np.zeros(n)

    def add(self, rows, target):
        arrived = [r["client"] for r in rows if r["delivered"]]  # one target
        for r in rows:
            if r["client"] in (target, *arrived) and np.isfinite(r["train_loss"]):
                self.loss[r["client"]] = r["train_loss"]
        self.staleness += 1
        self.staleness[arrived] = 0
        self.uploads[arrived] += 1
        return arrived


def test_observation_and_decisions_equal_the_env_path(ray_session):
    # Arrange: the env path (policies stepping D2DNeighbor-v0 on one engine)...
    cfg = load_config(
        BASE,
        [
            "topology.selection_via=env",
            "scheduler.policy=random_neighbors",
            "topology.link_model=bernoulli",
            "rounds=4",
        ],
    )
    observations, chosen, env_rows = [], [], []
    with build_system(cfg) as other:
        env = D2DNeighborEnv(mode="emulate", system=other)
        obs, _ = env.reset(seed=cfg.seed)
        policies = make_selection_policies(env)
        for _ in range(cfg.rounds):
            observations.append(obs)
            obs, _, _, _, info = env.step(policy_action(env, policies, obs))
            chosen.append(info["neighbors"][0])
            env_rows.append(env.backend.rows)
    assert any(chosen), "random_neighbors should select someone"
    # ...and the engine's own deciders on a fresh engine (one at a time: 2 CPUs)
    with build_system(cfg) as system:
        deciders = selection_deciders(system, PolicyDecider)
        history, arrivals = _History(6), 0
        for t in range(cfg.rounds):
            # Act
            mine = system.observe(t)[0]
            # Assert: the history rows are the records of the rounds before t
            np.testing.assert_array_equal(mine["loss"], history.loss.astype(np.float32))
            np.testing.assert_array_equal(mine["upload_count"], history.uploads)
            np.testing.assert_array_equal(mine["staleness"], history.staleness)
            np.testing.assert_array_equal(mine["data_size"], system.data.num_train)
            assert not mine["privacy_spent"].any()
            decision = decide(system, deciders, t)
            result = system.run_round(t, decision)
            # Assert: same observation, same M_n, same rows
            assert mine.keys() == observations[t].keys()
            for key, value in observations[t].items():
                np.testing.assert_array_equal(mine[key], value, err_msg=key)
            assert decision[0].clients.tolist() == chosen[t]
            _assert_same_rows(result.rows, env_rows[t])
            arrivals += len(history.add(result.rows, target=0))
    assert 0 < arrivals < sum(len(c) for c in chosen), "some models lost, some not"


def test_restart_equals_a_fresh_engine_of_that_seed(ray_session):
    # Arrange: restart keeps the data partition, so the fresh engine gets it too
    cfg = load_config(BASE, ["topology.link_model=bernoulli"])
    with build_system(cfg) as system:
        system.run_round(0, system.decision())
        data = system.data
        # Act
        system.restart(5)
        rows = [system.run_round(t, system.decision()).rows for t in range(2)]
        layout = system.layout.positions_m
    cfg5 = load_config(BASE, ["seed=5", "topology.link_model=bernoulli"])
    with build_system(cfg5, data=data) as fresh:
        want = [fresh.run_round(t, fresh.decision()).rows for t in range(2)]
        want_layout = fresh.layout.positions_m
    # Assert: same layout and every row equal
    np.testing.assert_array_equal(layout, want_layout)
    for got_round, want_round in zip(rows, want, strict=True):
        _assert_same_rows(got_round, want_round)


def test_client_states_of_a_d2d_engine_are_per_client(ray_session):
    """The engine's client-state API reads and writes the D2D hosts' clients as
    the star's (the hosts' own state layout also holds group servers)."""
    cfg = load_config(BASE, ["topology.method=federated"])
    with build_system(cfg) as system:
        system.run_round(0, system.decision())
        states = system.client_states()
        assert sorted(states) == list(range(6))
        trained = [c for c, s in states.items() if s.get("local_updates")]
        assert trained, states
        counts = system.local_updates()
        assert [counts[c] for c in trained] == [1] * len(trained)
        # Act: write one counter back through the engine
        states[trained[0]]["local_updates"] = 7
        system.set_client_states(states)
        # Assert: it reached its client; the hosts still run a round
        assert system.local_updates()[trained[0]] == 7
        system.run_round(1, system.decision())
