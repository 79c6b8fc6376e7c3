"""Every registered policy × every topology: declared ones run, the others are refused.

For a declared topology the policy is built on that topology's observation
table (rayfl.observation) and its actions on sampled observations lie in its
action space (STYLE §34); for an undeclared one ``check_policy`` refuses it in
one line naming the field, the policy and the topology.
"""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from policies import POLICIES, make_policy
from rayfl.observation import SystemContext, observation_space
from rayfl.registry import check_policy, policy_class, topology_names, topology_of

TOPOLOGIES = topology_names()
TOPOLOGY_KEYS = {t: topology_of(t).observation_keys for t in TOPOLOGIES}
TOPOLOGY_PARTS = {t: topology_of(t).action_parts for t in TOPOLOGIES}

PAIRS = [(name, topology) for name in sorted(POLICIES) for topology in TOPOLOGIES]
#: Lyapunov solves a mixed-integer program per call: fewer observations.
STEPS = {"lyapunov": 5}


def _sample(space: spaces.Dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A sampled observation with finite gains, 0/1 flags and an integer round."""
    obs = dict(space.sample())
    n, k = space["channel_gain"].shape
    obs["channel_gain"] = rng.normal(-100.0, 8.0, (n, k)).astype(np.float32)
    obs["eligible"] = (rng.random(n) < rng.uniform()).astype(np.float32)
    obs["round"] = np.array([rng.integers(0, 100)], np.float32)
    for key in ("loss", "upload_count", "privacy_spent", "staleness", "data_size"):
        if key in obs:
            obs[key] = rng.uniform(0.0, 50.0, n).astype(np.float32) + (
                key == "data_size"
            )
    return obs


@pytest.mark.parametrize(
    ("name", "topology"), PAIRS, ids=[f"{n}-{t}" for n, t in PAIRS]
)
def test_declared_topologies_run_and_the_others_are_refused_in_one_line(name, topology):
    cls = policy_class(name)
    if topology not in cls.topologies:
        with pytest.raises(ValueError) as error:
            check_policy(name, topology=topology)
        message = str(error.value)
        assert "\n" not in message and len(message) < 160, message
        assert message.startswith(f"scheduler.policy={name} ")
        assert f"topology.kind={topology}" in message or f"got {topology}" in message
        return
    check_policy(name, topology=topology)  # passes
    assert set(cls.required_keys) <= set(TOPOLOGY_KEYS[topology])
    n, k = 6, 3
    observation_space_ = observation_space(TOPOLOGY_KEYS[topology], n, k)
    observation_space_.seed(0)
    if "assignment" in cls.action_parts:
        action_space = spaces.MultiDiscrete([n + 1] * k)
    else:
        assert "participants" in TOPOLOGY_PARTS[topology]
        action_space = spaces.MultiBinary(n)
    context = SystemContext(topology=topology, seed=3, rounds=10, model_dim=1000)
    params = {"num_params": 1000} if name in ("minmax", "non_adjustment") else {}
    policy = make_policy(
        name, (observation_space_, action_space), context=context, **params
    )
    policy.reset(seed=1)
    rng = np.random.default_rng(2)
    for _ in range(STEPS.get(name, 30)):
        action = policy(_sample(observation_space_, rng))
        assert action_space.contains(action), (name, topology, action)


def test_messages_name_the_missing_key_or_part():
    with pytest.raises(ValueError) as error:
        check_policy("minmax", topology="d2d")
    assert str(error.value) == (
        "scheduler.policy=minmax is meant for topology.kind=star; got d2d"
    )
    with pytest.raises(ValueError) as error:
        check_policy("uniform", topology="d2d")
    assert str(error.value) == (
        "scheduler.policy=uniform needs action part 'participants'; "
        "topology.kind=d2d offers 'assignment'"
    )
    # a run that offers fewer keys than its topology (the D2D selection at t = 0)
    with pytest.raises(ValueError, match="reads 'loss', which this topology.kind=star"):
        check_policy("learned", topology="star", keys=["channel_gain", "eligible"])
    # the star without a channel model offers a client set only
    with pytest.raises(ValueError) as error:
        check_policy("best_channel", topology="star", parts=["participants"])
    assert str(error.value) == (
        "scheduler.policy=best_channel needs action part 'assignment'; "
        "topology.kind=star offers 'participants'"
    )
    check_policy("random", topology="star", parts=["participants"])
    check_policy("best_channel", topology="d2d", field="topology.policy")
    with pytest.raises(ValueError, match="^topology.policy=minmax is meant for"):
        check_policy("minmax", topology="d2d", field="topology.policy")


def test_a_required_part_missing_is_named(monkeypatch):
    from policies.best_channel import BestChannelPolicy

    class NeedsControls(BestChannelPolicy):
        action_parts = frozenset({"assignment", "controls"})

    monkeypatch.setitem(POLICIES, "needs_controls", "x:y")
    monkeypatch.setattr(
        "rayfl.registry.load", lambda entry: NeedsControls if entry == "x:y" else None
    )
    with pytest.raises(ValueError) as error:
        check_policy("needs_controls", topology="hierarchical")
    assert str(error.value) == (
        "scheduler.policy=needs_controls needs action part 'controls'; "
        "topology.kind=hierarchical offers 'participants', 'assignment'"
    )


def test_unknown_names_and_topologies_are_refused():
    with pytest.raises(ValueError, match="unknown policy 'fifo'"):
        check_policy("fifo", topology="star")
    with pytest.raises(ValueError, match="topology.kind must be one of"):
        check_policy("random", topology="ring")


def test_every_declaration_is_a_known_topology_key_and_part():
    from rayfl.observation import ACTION_PARTS, FIELDS

    for name in POLICIES:
        cls = policy_class(name)
        assert cls.topologies and cls.topologies <= set(TOPOLOGIES), name
        assert set(cls.required_keys) <= set(FIELDS), name
        assert cls.action_parts & {"participants", "assignment"}, name
        assert (cls.action_parts | cls.optional_parts) <= set(ACTION_PARTS), name
