"""A toy fourth topology, defined in this file, gets its envs through its plug-in.

``Ring`` derives from the star's plug-in with another name and config section and
is registered at run time by one line (issue 46): no project file names it. Its
env is found by role (``topology_of(cfg).envs["single"]``, the RL stack's roles),
never by comparing a topology's name.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

import pytest

from envs.star.scheduling import DEFAULT_CONFIG
from rayfl import registry
from rayfl.config import load_config
from rayfl.registry import (
    build_policy,
    load,
    policy_class,
    register_topology,
    topology_of,
)
from rayfl.star.config import StarTopologyConfig
from rayfl.star.plugin import Star


class RingTopologyConfig(StarTopologyConfig):
    """The toy's ``topology:`` section: the star's fields, its own kind."""

    kind: Literal["ring"] = "ring"  # type: ignore[assignment]  # the toy's own kind


class Ring(Star):
    """A toy topology: the star's dynamics under another name."""

    name = "ring"
    aliases = ()
    config = RingTopologyConfig


@pytest.fixture
def ring() -> Any:
    register_topology("ring", f"{__name__}:Ring")
    yield topology_of("ring")
    registry.TOPOLOGIES.pop("ring", None)
    registry._PLUGINS.pop("ring", None)


def _ring_config(rounds: int = 3) -> Any:
    """A ring run config (the config takes a registered topology's section)."""
    tree = {
        **copy.deepcopy(DEFAULT_CONFIG),
        "rounds": rounds,
        "topology": {"kind": "ring"},
    }
    return load_config(tree)


def test_the_ring_has_the_stars_env_roles_and_every_undeclared_policy(ring):
    # Assert: roles are inherited data, found by role, not by name
    assert ring.name == "ring" and isinstance(ring, Ring)
    assert ring.env_entry("single") == topology_of("star").envs["single"]
    assert ring.env_entry("rl_base") == ring.envs["single"]
    assert "lanes" in ring.envs and ring.rl_options == {"controls"}
    # a policy without a `topologies` declaration runs on every registered topology
    assert "ring" in policy_class("random").topologies
    assert "ring" not in policy_class("uniform").topologies  # declared: hierarchy only


def test_an_unknown_env_role_is_a_one_line_error(ring):
    with pytest.raises(
        ValueError, match=r"^topology.kind=ring has no 'multiagent' env"
    ):
        ring.env_entry("multiagent")


def test_the_ring_runs_an_env_episode_through_its_plugin(ring):
    # Arrange
    cfg = _ring_config(rounds=3)
    plugin = topology_of(cfg)
    env = load(plugin.envs["single"])(cfg, mode="surrogate")
    policy = build_policy("random", env, seed=0)
    # Act
    obs, info = env.reset(seed=1)
    steps, truncated = 0, False
    while not truncated:
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        steps += 1
        assert not terminated and info["round"] == steps
    env.close()
    # Assert
    assert plugin is ring and env.config.topology.kind == "ring"
    assert steps == 3


def test_the_ring_runs_an_rl_episode_through_its_plugin(ring):
    # Arrange
    from envs.rl import make_rl_env

    cfg = _ring_config(rounds=2)
    env = make_rl_env(cfg, mode="surrogate")
    # Act
    obs, _ = env.reset(seed=0)
    rewards = []
    truncated = False
    while not truncated:
        obs, reward, _, truncated, _ = env.step(env.action_space.sample())
        rewards.append(float(reward))
    env.close()
    # Assert: the star's decoding (top K, per-client features) on the ring's config
    assert len(rewards) == 2
    assert obs.shape == (cfg.data.num_clients, env.observation_space.shape[1])
