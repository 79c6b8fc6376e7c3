"""A topology defined here, registered at run time, is benchmarked (issue 46).

``rayfl bench policies`` asks the topology plug-ins for its scenarios, its
env, what ``constant_tuned`` tunes and how a policy is built: a fourth
topology written outside rayfl brings its own scenarios and runs with no
project file edited.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from rayfl import registry
from rayfl.benchmarks.policies import main
from rayfl.benchmarks.policies.scenarios import scenarios, scenarios_for
from rayfl.star.plugin import Star

TINY: dict[str, Any] = {
    "rounds": 2,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"kind": "mlr"},
    "wireless": {"num_subchannels": 2},
    "output": {"progress": False, "plots": False},
}


class StarLike(Star):
    """A star under another name: its scenarios run as star configs."""

    name = "starlike"
    aliases = ()

    def scenarios(self) -> dict[str, tuple[Any, ...]]:
        return {"starlike-tiny": ("small", {"name": "starlike-tiny", **TINY}, "a toy")}


class Inherits(Star):
    """A subclass that lists no scenarios of its own."""

    name = "inherits"
    aliases = ()


@pytest.fixture
def registered(monkeypatch):
    """Register the toy topologies for one test, then forget them."""
    monkeypatch.setattr(registry, "TOPOLOGIES", dict(registry.TOPOLOGIES))
    monkeypatch.setattr(registry, "_PLUGINS", dict(registry._PLUGINS))
    for cls in (StarLike, Inherits):
        registry.register_topology(cls.name, f"{__name__}:{cls.__name__}")


def test_a_registered_topology_lists_its_scenarios_once(registered):
    every = scenarios()

    assert every["starlike-tiny"].topology == "starlike"
    assert every["starlike-tiny"].breaks == "a toy"
    assert [s.name for s in scenarios_for("starlike")] == ["starlike-tiny"]
    # the star's scenarios are listed once, under the star, not again under
    # a subclass that inherits its hook
    assert every["star-small"].topology == "star"
    assert scenarios_for("inherits") == []
    with pytest.raises(ValueError, match="--topology must be one of .*starlike"):
        scenarios_for("hexagon")


def test_the_benchmark_runs_a_registered_topologys_scenario(registered, tmp_path):
    main(
        [
            "--topology",
            "starlike",
            "--policies",
            "round_robin,random,constant_tuned",
            "--seeds",
            "1000",
            "--train-seeds",
            "0",
            "--out",
            str(tmp_path),
        ]
    )

    episodes = pd.read_csv(tmp_path / "episodes.csv")
    assert set(episodes["scenario"]) == {"starlike-tiny"}
    assert set(episodes["topology"]) == {"starlike"}
    assert set(episodes["policy"]) == {"round_robin", "random", "constant_tuned"}
    assert episodes["return"].notna().all()
