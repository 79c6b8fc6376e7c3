"""A topology registered at run time is a config section like the shipped ones.

``Ring`` is a toy topology defined here only: the star's plug-in with its own
``topology:`` section (``kind: ring``) and one rule of its own. It is
registered by one line (``register_topology``); no project file names it.
"""

from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from policies.round_robin import RoundRobinPolicy
from rayfl.config import ConfigError, RunConfig, load_config
from rayfl.privacy.sensitivity import NO_DP, adjacency
from rayfl.registry import (
    POLICIES,
    TOPOLOGIES,
    register_policy,
    register_topology,
    topology_of,
)
from rayfl.star.plugin import Star


class RingConfig(BaseModel):
    """The ``topology:`` section of the toy ring."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["ring"] = "ring"
    hops: int = Field(1, ge=1, description="Neighbors each way on the ring.")


class RingRobin(RoundRobinPolicy):
    """Round robin, declared for the ring (a policy says where it runs)."""

    topologies = frozenset({"ring"})


class Ring(Star):
    """Clients on a ring; runs as the star, with one rule of its own."""

    name = "ring"
    aliases = ()
    config = RingConfig
    default_policy = "ring_robin"
    rewards = frozenset({"loss", "loss_decrease", "min_max_loss"})

    def check_run(self, cfg):
        if cfg.topology.hops >= cfg.data.num_clients:
            raise ValueError(
                f"topology.hops ({cfg.topology.hops}) must be < data.num_clients "
                f"({cfg.data.num_clients})"
            )


RING = {"data": {"num_clients": 6}, "topology": {"kind": "ring", "hops": 2}}


@pytest.fixture
def ring():
    from rayfl import registry

    register_topology("ring", "tests.test_config_plugins:Ring")
    register_policy("ring_robin", "tests.test_config_plugins:RingRobin")
    yield
    TOPOLOGIES.pop("ring")
    POLICIES.pop("ring_robin")
    registry._PLUGINS.pop("ring", None)


def test_a_registered_topology_is_accepted_by_load_config(ring):
    cfg = load_config(RING)
    assert isinstance(cfg.topology, RingConfig) and cfg.topology.hops == 2
    assert topology_of(cfg).name == "ring"
    assert cfg.scheduler.policy == "ring_robin"  # its plug-in's default_policy
    # RunConfig itself takes it too, and the shipped kinds still load
    assert RunConfig(**RING).topology.kind == "ring"
    assert RunConfig.model_validate(RING).topology == cfg.topology
    assert load_config({"topology": {"kind": "d2d"}}).topology.kind == "d2d"
    assert load_config({}).topology.kind == "star"  # the default is still the star
    assert adjacency(cfg).relation == NO_DP  # the star's DP rules (no DP here)


def test_a_registered_topology_gets_the_same_one_line_errors(ring):
    with pytest.raises(ConfigError) as error:
        load_config(RING, ["topology.kind=rng"])
    lines = str(error.value).splitlines()
    assert lines[1].strip() == (
        "topology.kind: unknown name 'rng'; did you mean 'ring'?"
    ), lines
    assert "'ring'" in lines[2] and "'flat'" in lines[2]
    with pytest.raises(
        ConfigError, match=r"topology.hop: unknown key; allowed keys: hops, kind"
    ):
        load_config({"topology": {"kind": "ring", "hop": 1}})
    with pytest.raises(ConfigError, match=r"topology.hops: Input should be greater"):
        load_config(RING, ["topology.hops=0"])
    # a policy meant for other topologies is refused as on the shipped ones;
    # the star's policies run on it (Ring derives from the star's plug-in)
    with pytest.raises(ConfigError, match="is meant for topology.kind=d2d; got ring"):
        load_config(RING, ["scheduler.policy=random_neighbors"])
    assert load_config(RING, ["scheduler.policy=random"]).scheduler.policy == "random"
    # its own cross-section rule (check_run), one line
    with pytest.raises(ConfigError) as error:
        load_config(RING, ["topology.hops=6"])
    assert str(error.value).splitlines()[1:] == [
        "  topology.hops (6) must be < data.num_clients (6)"
    ]


def test_a_typo_of_a_shipped_kind_gives_todays_error_and_the_union_forgets_on_removal(
    ring,
):
    with pytest.raises(ConfigError) as error:
        load_config({"topology": {"kind": "hierarchichal"}})
    assert (
        "topology.kind: unknown name 'hierarchichal'; did you mean 'hierarchical'?"
        in (str(error.value))
    )
    load_config(RING)
    TOPOLOGIES.pop("ring")
    try:
        with pytest.raises(ConfigError, match="topology.kind: unknown name 'ring'"):
            load_config(RING)
    finally:
        register_topology("ring", "tests.test_config_plugins:Ring")


def test_a_registered_topology_declares_its_rewards_and_rl_features(ring):
    rl = {"reward": "loss", "baselines": ["ring_robin"]}
    assert load_config({**RING, "rl": rl}).rl.reward == "loss"
    with pytest.raises(ConfigError) as error:
        load_config({**RING, "rl": {**rl, "reward": "latency"}})
    assert str(error.value).splitlines()[1].strip() == (
        "rl.reward=latency has no form on topology.kind=ring (it has no latency "
        "or energy model); use one of min_max_loss, loss, loss_decrease"
    )
    # rl.controls is the star's (its rl_features), so the ring inherits it ...
    with pytest.raises(ConfigError, match="rl.controls learns the star's"):
        load_config({**RING, "rl": {**rl, "controls": True}})  # ... with a channel
    # ... and rl.neighbor_cost is D2D's only
    with pytest.raises(ConfigError, match="rl.neighbor_cost prices D2D"):
        load_config({**RING, "rl": {**rl, "neighbor_cost": 1.0}})
