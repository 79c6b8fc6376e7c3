"""StarActions turns actions into the schedules the scheduling env makes of them.

Oracle: ``envs.scheduling.WirelessFLEnv._to_schedule`` (the env's own rules),
on sampled actions with power levels and controls and random eligibility. No
Ray: the env is built for its spaces and rules only.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from envs.scheduling import WirelessFLEnv
from rayfl.star.actions import StarActions

CFG = {
    "name": "actions",
    "data": {"dataset": "digits", "num_clients": 7},
    "algorithm": {"kind": "ditto", "batch_size": 16, "lr": 0.1},
    "wireless": {"num_subchannels": 4, "power_levels": 3},
}


def _pair(controls: bool):
    env = WirelessFLEnv(CFG, controls=controls)
    actions = StarActions(
        num_clients=env.num_clients,
        num_subchannels=env.num_subchannels,
        power_w=env.power_w,
        control_names=env.control_names,
        default_controls=env.default_controls,
    )
    return env, actions


@pytest.mark.parametrize("controls", [False, True])
def test_schedules_equal_the_envs_for_sampled_actions(controls):
    env, actions = _pair(controls)
    rng = np.random.default_rng(3)
    env.action_space.seed(11)
    try:
        for _ in range(200):
            eligible = rng.random(env.num_clients) < 0.7
            env._backend = SimpleNamespace(
                uplink=SimpleNamespace(eligible=lambda e=eligible: e)
            )
            action = env.action_space.sample()
            if rng.random() < 0.3:  # a bare assignment: maximum power, defaults
                action = action["assignment"]
            want, want_ignored = env._to_schedule(action)
            got, ignored = actions.to_schedule(action, eligible)
            assert ignored == want_ignored
            np.testing.assert_array_equal(got.clients, want.clients)
            np.testing.assert_array_equal(got.subchannel, want.subchannel)
            np.testing.assert_array_equal(got.tx_power_w, want.tx_power_w)
            assert got.controls.keys() == want.controls.keys()
            for name in want.controls:
                np.testing.assert_array_equal(got.controls[name], want.controls[name])
                np.testing.assert_array_equal(
                    got.all_controls[name], want.all_controls[name]
                )
    finally:
        env._backend = None


def test_duplicates_keep_the_lowest_subchannel_and_idle_is_n():
    _, actions = _pair(False)
    schedule, ignored = actions.to_schedule(
        np.array([5, 7, 5, 2]), eligible=np.array([True] * 7)
    )
    assert schedule.clients.tolist() == [5, 2]
    assert schedule.subchannel.tolist() == [0, 3]
    assert ignored == []


@pytest.mark.parametrize(
    ("action", "match"),
    [
        (np.array([0, 1, 2]), "4 integers"),
        (np.array([0, 1, 2, 9]), "subchannel 3: client 9 is not in 0..7"),
        (
            {"assignment": np.array([0, 1, 2, 3]), "power": [0, 0, 0, 3]},
            "levels in 0..2",
        ),
    ],
)
def test_malformed_actions_are_refused_with_the_field(action, match):
    _, actions = _pair(False)
    with pytest.raises(ValueError, match=match):
        actions.to_schedule(action, eligible=np.ones(7, dtype=bool))
