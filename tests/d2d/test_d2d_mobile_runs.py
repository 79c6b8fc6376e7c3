"""D2D runs on Ray whose nodes move (issue 48, rayfl.d2d.motion).

- same seed, same metrics whatever the packing (clients per actor), with the
  nodes moving and the policy re-selecting every round;
- with ``selection_via: once`` M_n stays the t = 0 selection while the
  engine's bernoulli links draw against round t's P^err;
- the engine's observation of round t shows round t's distances;
- ``d2d-small-mobile`` builds and one short episode runs (emulate and
  surrogate), its nodes moving between steps;
- with every device model on too (``DEVICES``: correlated fading, nodes that
  come and go, log-normal CPUs under a deadline, rayfl.d2d.devices) the
  packing does not change the metrics, and each round's rows report exactly
  the neighbours the devices stopped, with the devices' reason.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from envs.d2d import D2DNeighborEnv, make_selection_policies, policy_action
from rayfl.config import load_config
from rayfl.d2d.scenarios import scenarios
from rayfl.engine import build_system
from rayfl.seeding import rng_for
from tests.configs import TINY_D2D

pytestmark = pytest.mark.usefixtures("ray_session")

MOVING = [
    "topology.mobility=random_waypoint",
    "topology.round_duration_s=5",
    "topology.mobility_speed_min_mps=1",
    "topology.mobility_speed_max_mps=3",
    "topology.link_model=bernoulli",
]


#: Every device model of issue 48 on the D2D topology (rayfl.d2d.devices).
DEVICES = [
    "topology.fading_dynamics=gauss_markov",
    "topology.fading_correlation=0.8",
    "topology.availability=markov",
    "topology.mean_on_rounds=2",
    "topology.mean_off_rounds=2",
    "topology.cpu_frequency_distribution=lognormal",
    "topology.cpu_frequency_sigma=0.6",
    "topology.round_deadline_s=0.02",
]


def _rows(cfg, rounds):
    with build_system(cfg) as system:
        rows = [system.run_round(t, system.decision()).rows for t in range(rounds)]
    return pd.DataFrame([r for round_rows in rows for r in round_rows])


def test_same_metrics_whatever_the_packing_with_moving_nodes():
    # Arrange
    base = [*MOVING, "rounds=3", "topology.epsilon=0.3"]
    one = load_config(TINY_D2D, [*base, "ray.clients_per_actor=1"])
    packed = load_config(TINY_D2D, [*base, "ray.clients_per_actor=3"])
    # Act
    a, b = _rows(one, 3), _rows(packed, 3)
    # Assert
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert a["delivered"].any()


def test_same_metrics_whatever_the_packing_with_every_device_model():
    # Arrange
    base = [*MOVING, *DEVICES, "rounds=4", "topology.epsilon=0.5"]
    one = load_config(TINY_D2D, [*base, "ray.clients_per_actor=1"])
    packed = load_config(TINY_D2D, [*base, "ray.clients_per_actor=4"])
    # Act
    a, b = _rows(one, 4), _rows(packed, 4)
    # Assert
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert a["delivered"].any()


def test_the_rows_report_the_neighbours_the_devices_stopped():
    # Arrange
    deadline = "topology.round_deadline_s=0.012"  # some neighbours miss it
    cfg = load_config(TINY_D2D, [*MOVING, *DEVICES, deadline, "topology.epsilon=0.5"])
    reasons = set()
    with build_system(cfg) as system:
        neighbors = list(system.selections[0].neighbors)
        assert len(neighbors) >= 2, "the test needs selected neighbors"
        for t in range(6):
            state = system.motion.link_state(t, 0)
            want = {m: state.reason(m) for m in neighbors}
            # Act
            rows = system.run_round(t, system.decision()).rows
            # Assert
            got = {r["client"]: r for r in rows if r["client"] in neighbors}
            for m, why in want.items():
                if why is not None:
                    assert got[m]["rejected"] == why and not got[m]["delivered"]
                else:
                    assert got[m]["rejected"] is None
            reasons |= {why for why in want.values() if why}
    assert reasons == {"unavailable", "straggler"}, reasons


def test_once_keeps_the_selection_and_links_follow_round_t():
    # Arrange
    cfg = load_config(TINY_D2D, [*MOVING, "topology.epsilon=0.3"])
    with build_system(cfg) as system:
        neighbors = list(system.selections[0].neighbors)
        assert neighbors, "the test needs selected neighbors"
        changed = 0
        for t in range(1, 12):
            layout = system.motion.layout(t)
            error = system.motion.error(t, 0)
            draws = rng_for(cfg.seed, "d2d_link", round=t + 1, client=0).random(6)
            # Act
            got = system.deliveries(t, 0, neighbors)
            # Assert
            assert got == {m: bool(draws[m] >= error[m]) for m in neighbors}
            frozen = system.selections[0].error_probability
            changed += got != {m: bool(draws[m] >= frozen[m]) for m in neighbors}
            assert not np.array_equal(layout.distances_m, system.layout.distances_m)
        assert system.decision()[0].clients.tolist() == neighbors  # M_n stays
        assert changed > 0, "moving nodes should change some round's deliveries"


def test_the_engines_observation_shows_round_t_distances():
    cfg = load_config(TINY_D2D, [*MOVING, "topology.selection_via=env"])
    with build_system(cfg) as system:
        for t in range(4):
            obs = system.observe(t)[0]
            x = system.motion.layout(t).positions_m
            want = np.hypot(*(x - x[0]).T).astype(np.float32)
            np.testing.assert_allclose(obs["distance_m"], want, rtol=1e-6)
        assert not np.allclose(
            system.observe(3)[0]["distance_m"], system.observe(0)[0]["distance_m"]
        )


@pytest.mark.parametrize("mode", ["surrogate", "emulate"])
def test_the_mobile_scenario_builds_and_one_short_episode_runs(mode):
    # Arrange
    config = load_config(scenarios()["d2d-small-mobile"][1], ["rounds=2"])
    assert config.topology.mobility == "random_waypoint"
    env = D2DNeighborEnv(config=config, mode=mode)
    try:
        obs, _ = env.reset(seed=5)
        policies = make_selection_policies(env)
        seen, ended = [obs["distance_m"]], False
        # Act
        while not ended:
            obs, reward, terminated, truncated, info = env.step(
                policy_action(env, policies, obs)
            )
            seen.append(obs["distance_m"])
            ended = terminated or truncated
            # Assert
            assert np.isfinite(reward)
            (target,) = env.targets
            assert set(info["delivered"][target]) <= set(info["neighbors"][target])
    finally:
        env.close()
    assert len(seen) == 3 and truncated
    assert not np.array_equal(seen[0], seen[1])
