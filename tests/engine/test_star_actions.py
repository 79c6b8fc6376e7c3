"""StarActions turns actions into the schedules the scheduling env made of them.

Oracle: the scheduling env's former ``WirelessFLEnv._to_schedule``, copied below
as it was before the env delegated to ``StarActions``, on sampled actions with
power levels and controls and random eligibility. No Ray: the env is built for
its spaces only.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from envs.star.scheduling import WirelessFLEnv
from rayfl.schedule import Schedule
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


def _old_env_rules(env, action, eligible):
    """``WirelessFLEnv._to_schedule`` before the change (validation omitted)."""
    n = env.num_clients
    if isinstance(action, Mapping):
        assignment = np.asarray(action["assignment"])
        power = action.get("power")
        controls = action.get("controls")
    else:
        assignment, power, controls = np.asarray(action), None, None
    assignment = assignment.reshape(-1)
    levels = (
        np.full(env.num_subchannels, len(env.power_w) - 1)
        if power is None
        else np.asarray(power, dtype=np.int64).reshape(-1)
    )
    clients, subchannels, power_w, ignored = [], [], [], []
    seen: set[int] = set()
    for s, c in enumerate(assignment.tolist()):
        if c == n or c in seen:
            continue
        seen.add(c)
        if not eligible[c]:
            ignored.append(c)
            continue
        clients.append(c)
        subchannels.append(s)
        power_w.append(env.power_w[levels[s]])
    ctrl, all_ctrl = {}, {}
    if env.control_names:
        table = env.default_controls if controls is None else np.asarray(controls)
        idx = np.asarray(clients, dtype=np.int64)
        ctrl = {
            name: table[idx, j].astype(np.float64)
            for j, name in enumerate(env.control_names)
        }
        all_ctrl = {
            name: table[:, j].astype(np.float64)
            for j, name in enumerate(env.control_names)
        }
    schedule = Schedule(
        np.asarray(clients, dtype=np.int64),
        subchannel=np.asarray(subchannels, dtype=np.int64),
        tx_power_w=np.asarray(power_w, dtype=np.float64),
        controls=ctrl,
        all_controls=all_ctrl,
    )
    return schedule, ignored


@pytest.mark.parametrize("controls", [False, True])
def test_schedules_equal_the_envs_for_sampled_actions(controls):
    env, actions = _pair(controls)
    rng = np.random.default_rng(3)
    env.action_space.seed(11)
    for _ in range(200):
        eligible = rng.random(env.num_clients) < 0.7
        action = env.action_space.sample()
        if rng.random() < 0.3:  # a bare assignment: maximum power, defaults
            action = action["assignment"]
        want, want_ignored = _old_env_rules(env, action, eligible)
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
    assert controls == bool(actions.control_names)  # the controls case is covered


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
