"""A fourth topology written in a test runs through ``rayfl.run`` (issue 46).

``Ring`` is the star under another name, with its own ``topology:`` section,
registered in the test by one line (``register_topology``); no project file
knows it. The runner, the engine and the warm session ask its plug-in, so a
2-round run completes and equals the star's on the same config.

The config side (a ``topology.kind: ring`` section in ``RunConfig``) belongs
to the config plug-in work: until it lands, the run config is made by swapping
the validated star config's section (``model_copy``) and ``rayfl.runner``'s
config resolution is bypassed for it.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest

import rayfl
import rayfl.registry as registry
import rayfl.runner as runner
from rayfl.config import load_config
from rayfl.registry import register_topology, topology_of
from rayfl.star.config import StarTopologyConfig
from rayfl.star.plugin import Star

#: The config union cannot serialize a section it does not list (config work).
pytestmark = pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")


class RingSection(StarTopologyConfig):
    """The toy's ``topology:`` section."""

    kind: Literal["ring"] = "ring"  # type: ignore[assignment]


class Ring(Star):
    """The toy topology: the star's engine, deciders and loop, named ``ring``."""

    name = "ring"
    aliases = ()
    config = RingSection
    capabilities = frozenset()


CFG = {
    "name": "toy-ring",
    "rounds": 2,
    "data": {"dataset": "digits", "num_clients": 4, "min_partition_size": 20},
    "model": {"kind": "mlp", "hidden": [8]},
    "algorithm": {"kind": "fedavg", "local_steps": 1, "batch_size": 16, "lr": 0.1},
    "output": {"progress": False, "plots": False},
}


@pytest.fixture
def ring(monkeypatch):
    """Register ``ring`` for one test (the registry is restored afterwards)."""
    monkeypatch.setattr(registry, "TOPOLOGIES", dict(registry.TOPOLOGIES))
    monkeypatch.setattr(registry, "_PLUGINS", dict(registry._PLUGINS))
    register_topology("ring", f"{__name__}:Ring")
    resolve = runner.resolve_config

    def resolve_ring(config, overrides, kw_overrides):
        if getattr(getattr(config, "topology", None), "kind", None) == "ring":
            return config  # built below: the config union does not know ring yet
        return resolve(config, overrides, kw_overrides)

    monkeypatch.setattr(runner, "resolve_config", resolve_ring)


def _configs(tmp_path):
    star = load_config(CFG, {"output.dir": str(tmp_path / "star")})
    ring = load_config(CFG, {"output.dir": str(tmp_path / "ring")}).model_copy(
        update={"topology": RingSection()}
    )
    return star, ring


def test_the_registered_toy_is_its_own_plug_in(ring):
    plugin = topology_of("ring")
    assert isinstance(plugin, Ring) and plugin.name == "ring"
    assert topology_of(RingSection()) is plugin
    assert "ring" in registry.topology_names()


def test_a_toy_topology_runs_two_rounds_like_the_star(ray_session, ring, tmp_path):
    # Arrange
    star_cfg, ring_cfg = _configs(tmp_path)
    # Act
    star = rayfl.run(star_cfg)
    toy = rayfl.run(ring_cfg)
    # Assert: the toy's run completed, 2 rounds, the star's numbers
    assert toy.summary["status"] == "completed"
    assert toy.rounds["round"].tolist() == [0, 1]
    np.testing.assert_array_equal(
        toy.rounds["global_acc"].to_numpy(), star.rounds["global_acc"].to_numpy()
    )


def test_a_toy_without_keeps_warm_rebuilds_a_warm_session(ring, tmp_path):
    from rayfl.notebook import Session

    class _Live:
        topology = "ring"

        def __init__(self, config):
            self.config = config

    _, ring_cfg = _configs(tmp_path)
    session = Session()
    session._engine = _Live(ring_cfg)
    session._completed = True
    assert session.reuse_blocker(ring_cfg) == (
        "topology ring does not keep its actors warm"
    )
