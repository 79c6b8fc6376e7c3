"""A toy fourth topology, defined in this file, gets its envs through its plug-in.

(Its episodes, with ``rayfl.run`` and the benchmark, are in
tests/test_plugin_topology.py.)

``Ring`` derives from the star's plug-in with another name and config section and
is registered at run time by one line (issue 46): no project file names it. Its
env is found by role (``topology_of(cfg).envs["single"]``, the RL stack's roles),
never by comparing a topology's name.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest

from rayfl import registry
from rayfl.registry import (
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


def test_the_ring_has_the_stars_env_roles_and_every_undeclared_policy(ring):
    # Assert: roles are inherited data, found by role, not by name
    assert ring.name == "ring" and isinstance(ring, Ring)
    assert ring.env_entry("single") == topology_of("star").envs["single"]
    assert ring.env_entry("rl_base") == ring.envs["single"]
    assert "lanes" in ring.envs and ring.rl_features == {"controls"}
    # a policy without a `topologies` declaration runs on every registered topology
    assert "ring" in policy_class("random").topologies
    assert "ring" not in policy_class("uniform").topologies  # declared: hierarchy only


def test_an_unknown_env_role_is_a_one_line_error(ring):
    with pytest.raises(
        ValueError, match=r"^topology.kind=ring has no 'multiagent' env"
    ):
        ring.env_entry("multiagent")
