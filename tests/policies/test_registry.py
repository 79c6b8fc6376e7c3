"""Registry: names, lazy imports, make_policy inputs and errors, duplicates."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

import policies
from policies import POLICIES, Policy, make_policy, register_policy
from policies.proportional_fair import ProportionalFairPolicy
from tests.policies.helpers import make_spaces

NAMES = [
    "all",
    "uniform",
    "random",
    "round_robin",
    "proportional_fair",
    "best_channel",
    "age_based",
    "deadline_max_weight",
    "data_weighted",
    "delay_min",
    "minmax",
    "non_adjustment",
    "channel_threshold",
    "lyapunov",
    "learned",
    "random_neighbors",
]


@pytest.fixture
def clean_registry():
    """The one registry dict, restored (in place: it is shared) after the test."""
    saved = dict(POLICIES)
    yield POLICIES
    POLICIES.clear()
    POLICIES.update(saved)


def test_registered_names_and_public_api():
    assert sorted(POLICIES) == sorted(NAMES)
    assert sorted(policies.__all__) == [
        "POLICIES",
        "Policy",
        "make_policy",
        "register_policy",
    ]


def test_registry_imports_policies_lazily():
    code = (
        "import sys, policies; "
        "print(sorted(m for m in sys.modules if m.startswith('policies.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert (
        out.strip() == "['policies.assignment', 'policies.base', 'policies.registry']"
    )


@pytest.mark.parametrize(
    "how", ["env", "tuple", "keywords"], ids=["env", "tuple", "keywords"]
)
def test_make_policy_accepts_env_tuple_or_keywords(how):
    # Arrange
    observation_space, action_space = make_spaces(6, 2)
    env = SimpleNamespace(
        observation_space=observation_space, action_space=action_space
    )
    # Act
    if how == "env":
        policy = make_policy("proportional_fair", env, window=5)
    elif how == "tuple":
        policy = make_policy(
            "proportional_fair", (observation_space, action_space), window=5
        )
    else:
        policy = make_policy(
            "proportional_fair",
            observation_space=observation_space,
            action_space=action_space,
            window=5,
        )
    # Assert
    assert isinstance(policy, ProportionalFairPolicy) and isinstance(policy, Policy)
    assert policy.window == 5 and policy.num_clients == 6


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown policy 'fifo'") as error:
        make_policy("fifo", make_spaces(2, 1))
    for name in NAMES:
        assert name in str(error.value)


def test_missing_spaces_raise():
    with pytest.raises(ValueError, match="needs an env"):
        make_policy("random")
    with pytest.raises(ValueError, match="got 3 items"):
        make_policy("random", (*make_spaces(2, 1), None))


def test_unknown_parameter_names_itself():
    with pytest.raises(TypeError, match="windw"):
        make_policy("proportional_fair", make_spaces(2, 1), windw=3)


def test_register_duplicate_raises_and_force_replaces(clean_registry):
    entry_point = "policies.best_channel:BestChannelPolicy"
    with pytest.raises(ValueError, match="'random' is already registered"):
        register_policy("random", entry_point)
    register_policy("random", entry_point, force=True)
    assert clean_registry["random"] == entry_point


def test_register_then_make(clean_registry):
    register_policy("greedy", "policies.best_channel:BestChannelPolicy")
    policy = make_policy("greedy", make_spaces(3, 2))
    assert type(policy).__name__ == "BestChannelPolicy"


@pytest.mark.parametrize("entry_point", ["policies.best_channel", ":Cls", "mod:"])
def test_register_bad_entry_point_raises(clean_registry, entry_point):
    with pytest.raises(ValueError, match="module:Class"):
        register_policy("x", entry_point)


def test_one_registry_shared_by_policies_names_and_rayfl(clean_registry):
    import rayfl.registry
    from rayfl.names import policy_names

    assert POLICIES is rayfl.registry.POLICIES is policies.registry.POLICIES
    rayfl.registry.register_policy("greedy", "policies.best_channel:BestChannelPolicy")
    assert "greedy" in POLICIES and "greedy" in policy_names()
    register_policy("greedy2", "policies.best_channel:BestChannelPolicy")
    assert "greedy2" in rayfl.registry.POLICIES


def test_client_set_only_is_read_from_the_declaration():
    from rayfl.registry import client_set_only, policy_class

    only_participants = {
        name
        for name in POLICIES
        if policy_class(name).action_parts == frozenset({"participants"})
    }
    assert {n for n in POLICIES if client_set_only(n)} == only_participants
    assert only_participants == {"all", "uniform"}


def test_make_policy_hands_the_context_to_the_policy():
    from rayfl.observation import SystemContext

    context = SystemContext(topology="star", seed=1, rounds=2, model_dim=10)
    policy = make_policy("best_channel", make_spaces(3, 2), context=context)
    assert policy.context is context
    assert make_policy("best_channel", make_spaces(3, 2)).context is None


def test_load_resolves_entry_points_and_rejects_bad_ones():
    from rayfl.registry import RL_ENV, load, topology_names, topology_of

    assert load("policies.random:RandomPolicy") is policies.random.RandomPolicy
    assert callable(load(RL_ENV))
    for name in topology_names():  # every topology's env, by role
        assert isinstance(load(topology_of(name).envs["single"]), type)
    with pytest.raises(ValueError, match="module:Class"):
        load("policies.random")
    with pytest.raises(AttributeError):
        load("policies.random:NoSuchPolicy")
