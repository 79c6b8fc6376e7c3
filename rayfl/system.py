"""The contract every topology implements: ``System``, ``RoundStrategy``, ``Decider``, records.

One run is one :class:`System` — the engine (``rayfl.engine.Engine``) — whose
round is delegated to a topology strategy (:class:`RoundStrategy`: star, hierarchical,
D2D) running on one :class:`rayfl.actors.pool.ActorPool`. One loop,
``rayfl.engine.loop.run_rounds``, drives every run::

    for t in range(start, rounds):
        obs = system.observe(t)                              # one per unit
        decision = tuple(d.decide(t, o) for d, o in zip(deciders, obs))
        result = system.run_round(t, decision)               # a RoundResult
        stop = system.exhausted()                            # T0 / budgets spent
        evals = system.evaluate() if due or stop else None   # one row per client
        ...log, checkpoint (system.state_dict() + deciders)...

Units and decisions:
    A *unit* is what one policy instance decides for: the star has one (all
    clients), the hierarchy one per edge, D2D one per target. A
    :data:`Decision` holds one :class:`rayfl.schedule.Schedule` per unit, in unit
    order, with global client ids and the subchannel inside the unit's band
    (-1: no subchannel). The star reads ``decision[0]``; a hierarchy reads one
    schedule per edge (the chosen devices and their subchannels); D2D one per
    target (the selected neighbours).

Writing a strategy (what a new topology implements):
    A class with the methods of :class:`RoundStrategy`, returned by its
    plug-in's ``strategy()`` (:class:`rayfl.topology.TopologyPlugin`). ``build(engine)`` starts its
    actors — client-hosting actors through ``ActorPool.start`` (packing,
    memory check, CPU reservation, names, restarts and the data holder are then
    the same for every topology) plus any servers it owns (cloud, edges) — and
    sets the engine's ``pool``. ``round`` runs one round and returns a
    :class:`RoundResult`; collect actor results with ``engine.pool.gather`` so a
    dead actor becomes lost updates (packet-loss semantics) and call
    ``engine.pool.restore_failed()`` before the next call to the actors.
    ``state_dict`` returns plain data only (numpy arrays, numbers, strings,
    lists, dicts: ``rayfl.rundir.checkpoint``); pull ObjectRefs into arrays there.
    Per-round columns beyond the shared ones go in ``RoundResult.extras``; the
    loop merges them into the ``rounds.parquet`` row. Extra files (e.g.
    ``edges.parquet``) are written by ``write_extra``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
import torch

from rayfl.actors.pool import pack_clients
from rayfl.learning.models import FlatModel, build_model, init_parameters
from rayfl.schedule import Schedule
from rayfl.seeding import torch_seed_for

__all__ = [
    "Decider",
    "Decision",
    "EvalRow",
    "Observation",
    "RoundResult",
    "RoundStrategy",
    "System",
    "initial_vector",
    "pack_clients",
]

#: One schedule per decision unit, in unit order (the star has one unit).
Decision = tuple[Schedule, ...]
#: One client's evaluation record: ``client``, ``test_loss``, ``test_acc``...
EvalRow = dict[str, Any]
#: One unit's observation: key → float32 array (the scheduling env's keys).
Observation = dict[str, npt.NDArray[np.float32]]


def initial_vector(config: Any, input_shape: tuple[int, ...], num_classes: int):
    """Return ω⁰, the seeded initial model as a flat float32 vector.

    Args:
        config: The run config (reads ``model`` and ``seed``).
        input_shape: Shape of one sample.
        num_classes: Number of labels.
    """
    key = (
        config.model.kind,
        tuple(input_shape),
        int(num_classes),
        tuple(config.model.hidden or ()),
    )
    if key not in _INIT_MODELS:  # every parameter is overwritten below: reuse it
        # torch's default init draws from the global generator: only on this
        # process's first call per architecture, which shifted the global stream
        # RLlib samples actions from (a second same-seed train-policy in the
        # process got other returns); the generator is restored afterwards
        with torch.random.fork_rng(devices=[]):
            module = build_model(
                config.model.kind,
                input_shape=input_shape,
                num_classes=num_classes,
                hidden=config.model.hidden,
            )
        _INIT_MODELS[key] = (module, FlatModel(module))
    module, flat = _INIT_MODELS[key]
    generator = torch.Generator().manual_seed(torch_seed_for(config.seed, "init"))
    init_parameters(module, generator)
    return flat.vector()


#: One module per architecture for :func:`initial_vector` (lanes restart often).
_INIT_MODELS: dict[tuple[Any, ...], tuple[torch.nn.Module, FlatModel]] = {}


@dataclass(frozen=True)
class RoundResult:
    """What one round produced (small records only).

    Attributes:
        round: Round index t.
        rows: One dict per scheduled client (train_loss, bits, delivered, snr_db...).
        delivered: Ids of clients whose update was aggregated.
        extras: Topology columns of this round's ``rounds.parquet`` row (the
            hierarchy's τ_k, energy, delay; D2D's target accuracies); empty for
            the star.
    """

    round: int
    rows: list[dict[str, Any]]
    delivered: list[int]
    extras: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Decider(Protocol):
    """One unit's decision rule: an observation in, that unit's schedule out.

    Attributes:
        observes: Whether :meth:`decide` reads the observation. When no decider
            of a run does, the loop passes None and the system computes nothing.
    """

    observes: bool

    def decide(self, t: int, observation: Observation | None) -> Schedule:
        """Return round ``t``'s schedule for this unit."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Return the evolving plain-data state (cursors, queues, generators)."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        ...


class System(Protocol):
    """The actors of one run and one round at a time, for any topology.

    ``rayfl.engine.Engine`` is the one implementation; the runner, the envs and
    the benchmarks use only these members (plus ``config``).
    """

    topology: ClassVar[str]  # "star" | "hierarchical" | "d2d"
    num_clients: int
    num_test: npt.NDArray[np.int64]
    dim: int

    @property
    def num_units(self) -> int:
        """Decision units: 1 (star), C edges, T targets."""
        ...

    def observe(self, t: int) -> tuple[Observation, ...]:
        """Return round ``t``'s observation of each unit (before deciding)."""
        ...

    def exhausted(self) -> bool:
        """Return True when no client may upload any more (T0, budgets)."""
        ...

    def run_round(self, t: int, decision: Decision | Schedule) -> RoundResult:
        """Run round ``t`` with one schedule per unit."""
        ...

    def evaluate(self) -> list[EvalRow] | None:
        """Evaluate every client; None when the round already evaluated (D2D)."""
        ...

    def restart(self, seed: int) -> None:
        """Start a new run with ``seed`` on the same actors and data (env reset)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Return the run state as plain data (``rayfl.rundir.checkpoint``)."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the actor packing may differ)."""
        ...

    def placement(self) -> dict[str, Any]:
        """Return where the actors run (node ids)."""
        ...

    def summary(self) -> dict[str, Any]:
        """Return the topology's block of ``summary.json``."""
        ...

    def write_extra(self, run_dir: Path) -> None:
        """Write the topology's extra files (``edges.parquet``...) into ``run_dir``."""
        ...

    def close(self) -> None:
        """Kill the actors and stop Ray if this system started it."""
        ...


class RoundStrategy(Protocol):
    """A topology strategy: what ``Engine`` delegates a round (and its state) to.

    The engine owns the Ray session, the federated data, ω⁰ and the pool; a
    strategy owns everything topology-specific (servers, uplink model, per-unit
    trackers). Each method takes the engine as its first argument.
    """

    kind: ClassVar[str]  # the engine's ``topology``

    def build(self, engine: Any) -> None:
        """Start the actors (``engine.pool = ActorPool.start(...)``) and servers."""
        ...

    def num_units(self, engine: Any) -> int:
        """Return the number of decision units."""
        ...

    def observe(self, engine: Any, t: int) -> tuple[Observation, ...]:
        """Return round ``t``'s per-unit observations."""
        ...

    def round(self, engine: Any, t: int, decision: Decision) -> RoundResult:
        """Run round ``t``."""
        ...

    def exhausted(self, engine: Any) -> bool:
        """Return True when no client may upload any more."""
        ...

    def evaluate(self, engine: Any) -> list[EvalRow] | None:
        """Evaluate every client."""
        ...

    def restart(self, engine: Any, seed: int) -> None:
        """Reset run-level state for ``seed`` on the same actors."""
        ...

    def state_dict(self, engine: Any) -> dict[str, Any]:
        """Return this strategy's plain-data state."""
        ...

    def load_state_dict(self, engine: Any, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        ...

    def placement(self, engine: Any) -> dict[str, Any]:
        """Return the node of every actor the strategy owns (pool included)."""
        ...

    def summary(self, engine: Any) -> dict[str, Any]:
        """Return the topology block of ``summary.json``."""
        ...

    def write_extra(self, engine: Any, run_dir: Path) -> None:
        """Write extra files (none for the star)."""
        ...

    def close(self, engine: Any) -> None:
        """Kill the servers the strategy owns (the engine closes the pool)."""
        ...
