"""A policy is a plug-in (issue 46): two toy policies written here run everywhere they say.

The issue's Done-when: "A test defines a toy client-set policy and a toy
subchannel policy inside the test file. Each is registered by one line and runs
on every topology it declares; no project file is edited."

- :class:`ToyClientSet` chooses a client set only (action part
  ``participants``): k (default 2) eligible clients from id
  ``round mod #eligible`` on, cyclically. It declares the star and the hierarchy (the topologies that
  offer a client set).
- :class:`ToySubchannels` assigns subchannels (action part ``assignment``): the
  K eligible clients from id ``round mod #eligible`` on, cyclically, the i-th on
  subchannel K - 1 - i (the reverse of any index rule). It declares every
  shipped topology.

Each is registered by one ``register_policy`` line (in the module fixture,
unregistered after) and run for 2 rounds on each topology it declares, in one
shared Ray session. Both log every decision they make (a run's policies live in
the driver), and each test asserts that the run scheduled exactly what the
policy chose: the scheduled clients of each round (and their subchannels), or
for D2D the target's neighbors and their subchannels.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest

from policies.base import Observation, Policy
from rayfl import registry
from tests.configs import DIGITS_8, TINY_D2D

pytestmark = pytest.mark.usefixtures("ray_session")

# ------------------------------------------------------------------ the toys


def _rotated(policy: Policy, obs: Observation, count: int) -> npt.NDArray[np.int64]:
    """``count`` eligible ids from ``round mod #eligible`` on, cyclically."""
    eligible = np.flatnonzero(policy.eligible_mask(obs))
    if not eligible.size:
        return eligible
    start = int(policy.field(obs, "round")[0]) % eligible.size
    return np.roll(eligible, -start)[: min(count, eligible.size)]


class ToyClientSet(Policy):
    """k eligible clients, rotating with the round; the engine gives subchannels.

    Like every client-set rule (``policies/all_clients.py``) it takes k as
    ``clients_per_round`` (the star passes ``scheduler.clients_per_round``);
    default 2.
    """

    topologies: ClassVar[frozenset[str]] = frozenset({"star", "hierarchical"})
    required_keys: ClassVar[tuple[str, ...]] = ("eligible", "round")
    action_parts: ClassVar[frozenset[str]] = frozenset({"participants"})
    optional_parts: ClassVar[frozenset[str]] = frozenset()
    #: Every decision: (round, unit, chosen ids), unit from the context (or 0).
    log: ClassVar[list[tuple[int, int, tuple[int, ...]]]] = []

    def __init__(
        self,
        observation_space: Any,
        action_space: Any,
        *,
        clients_per_round: int | None = None,
        context: Any = None,
    ) -> None:
        super().__init__(observation_space, action_space, context=context)
        self.k = 2 if clients_per_round is None else clients_per_round

    def participants(self, obs: Observation) -> npt.NDArray[np.int64]:
        """The k eligible clients from id ``round mod #eligible`` on, sorted."""
        chosen = np.sort(_rotated(self, obs, self.k))
        unit = getattr(self.context, "unit", None) or 0
        self.log.append((int(obs["round"][0]), unit, tuple(int(c) for c in chosen)))
        return chosen


class ToySubchannels(Policy):
    """K eligible clients rotating with the round; the i-th on subchannel K - 1 - i."""

    topologies: ClassVar[frozenset[str]] = frozenset({"star", "hierarchical", "d2d"})
    required_keys: ClassVar[tuple[str, ...]] = ("channel_gain", "eligible", "round")
    action_parts: ClassVar[frozenset[str]] = frozenset({"assignment"})
    optional_parts: ClassVar[frozenset[str]] = frozenset({"power"})
    #: Every decision: (round, unit, {client: subchannel}).
    log: ClassVar[list[tuple[int, int, dict[int, int]]]] = []

    def schedule(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Assignment: subchannel K - 1 - i carries the i-th chosen client."""
        k = self.num_subchannels
        chosen = _rotated(self, obs, k)
        assignment = np.full(k, self.num_clients, dtype=np.int64)
        assignment[k - 1 - np.arange(chosen.size)] = chosen
        unit = getattr(self.context, "unit", None) or 0
        self.log.append(
            (
                int(obs["round"][0]),
                unit,
                {int(c): k - 1 - i for i, c in enumerate(chosen)},
            )
        )
        return assignment


@pytest.fixture(scope="module", autouse=True)
def toys():
    """Register the two toys (one line each) for this module; unregister after."""
    registry.register_policy("toy_client_set", f"{__name__}:ToyClientSet")
    registry.register_policy("toy_subchannels", f"{__name__}:ToySubchannels")
    yield
    for name in ("toy_client_set", "toy_subchannels"):
        registry.POLICIES.pop(name, None)


@pytest.fixture(autouse=True)
def _fresh_logs():
    ToyClientSet.log.clear()
    ToySubchannels.log.clear()


# ------------------------------------------------------------ tiny runs


_COMMON: dict[str, Any] = {
    "seed": 1,
    "rounds": 2,
    "eval_every": 1,
    "model": {"kind": "mlr"},
    "algorithm": {"local_steps": 2, "batch_size": 16, "lr": 0.1},
    "ray": {"num_cpus": 2, "clients_per_actor": 3},
    "output": {"progress": False, "plots": False},
}
STAR_IDEAL: dict[str, Any] = {
    **_COMMON,
    "name": "toy_star_ideal",
    "data": {"dataset": "digits", "num_clients": 5, "partition": "iid"},
}
STAR_WIRELESS: dict[str, Any] = {
    **STAR_IDEAL,
    "name": "toy_star_wireless",
    "wireless": {"num_subchannels": 3, "distance_min_m": 10, "distance_max_m": 100},
}
HIERARCHY: dict[str, Any] = {
    **_COMMON,
    "name": "toy_hierarchy",
    "data": DIGITS_8,
    "topology": {
        "kind": "hierarchical",
        "num_edges": 1,
        "tau": 2,
        "local_period": 2,
        "edge_eval": False,
        "dp": {"enabled": False, "grad_bound": None},
        "lr": {"mode": "constant"},
    },
}
D2D: dict[str, Any] = {**TINY_D2D, "name": "toy_d2d"}

#: The runs of each toy: (the topology it exercises, its config).
RUNS = {
    "toy_client_set": [
        ("star", STAR_IDEAL),
        ("star", STAR_WIRELESS),
        ("hierarchical", HIERARCHY),
    ],
    "toy_subchannels": [
        ("star", STAR_WIRELESS),
        ("hierarchical", HIERARCHY),
        ("d2d", D2D),
    ],
}
CASES = [
    pytest.param(policy, config, id=f"{policy}-{config['name']}")
    for policy, runs in RUNS.items()
    for _, config in runs
]


def test_each_toy_runs_on_every_topology_it_declares():
    for name, cls in (
        ("toy_client_set", ToyClientSet),
        ("toy_subchannels", ToySubchannels),
    ):
        assert registry.policy_class(name) is cls  # the one-line registration
        assert {topology for topology, _ in RUNS[name]} == set(cls.topologies)
        for topology in cls.topologies:  # the registry agrees with the declaration
            registry.check_policy(name, topology=topology)
    assert registry.client_set_only("toy_client_set")
    assert not registry.client_set_only("toy_subchannels")


def _run(policy: str, config: dict[str, Any], out) -> Any:
    import rayfl

    return rayfl.run(
        {**config, "scheduler": {"policy": policy}}, {"output.dir": str(out)}
    )


def _scheduled(result: Any) -> dict[int, dict[int, int]]:
    """round → {client: subchannel (-1 without one)} of the run's scheduled rows."""
    rows = result.metrics[result.metrics["scheduled"]]
    subchannel = rows["subchannel"] if "subchannel" in rows else [-1] * len(rows)
    out: dict[int, dict[int, int]] = {}
    for t, client, k in zip(rows["round"], rows["client"], subchannel, strict=True):
        out.setdefault(int(t), {})[int(client)] = int(k)
    return out


@pytest.mark.parametrize(("policy", "config"), CASES)
def test_toy_policy_decides_the_run(policy, config, tmp_path):
    # Act
    result = _run(policy, config, tmp_path)
    # Assert
    assert result.summary["status"] == "completed"
    if config is D2D:
        _assert_d2d_selection(result)
        return
    scheduled = _scheduled(result)
    assert sorted(scheduled) == [0, 1]  # the run's rounds, each with clients
    if policy == "toy_client_set":
        chosen: dict[int, set[int]] = {}
        for t, _, ids in ToyClientSet.log:
            chosen.setdefault(t, set()).update(ids)
        assert chosen == {t: set(clients) for t, clients in scheduled.items()}
        assert chosen[0] != chosen[1]  # it rotated: the rule, not a default
    else:
        assignments: dict[int, dict[int, int]] = {}
        for t, _, assigned in ToySubchannels.log:
            assignments.setdefault(t, {}).update(assigned)
        assert assignments == scheduled
        assert assignments[0] != assignments[1]


def _assert_d2d_selection(result: Any) -> None:
    """The target's neighbors and subchannels are the toy's first decision."""
    ((t, _, assigned), *_) = ToySubchannels.log
    target = result.summary["d2d"]["targets"]["0"]
    assert t == 0 and assigned
    assert target["neighbors"] == sorted(assigned)
    assert target["subchannel"] == [assigned[n] for n in sorted(assigned)]
