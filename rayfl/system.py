"""The contract every topology implements: ``System``, ``Topology``, ``Decider``, records.

One run is one :class:`System` — the engine (``rayfl.engine.Engine``) — whose
round is delegated to a topology strategy (:class:`Topology`: star, hierarchical,
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
    A class with the methods of :class:`Topology`. ``build(engine)`` starts its
    actors — client-hosting actors through ``ActorPool.start`` (packing,
    memory check, CPU reservation, names, restarts and the data holder are then
    the same for every topology) plus any servers it owns (cloud, edges) — and
    sets the engine's ``pool``. ``round`` runs one round and returns a
    :class:`RoundResult`; collect actor results with ``engine.pool.gather`` so a
    dead actor becomes lost updates (packet-loss semantics) and call
    ``engine.pool.restore_failed()`` before the next call to the actors.
    ``state_dict`` returns plain data only (numpy arrays, numbers, strings,
    lists, dicts: ``rayfl.checkpoint``); pull ObjectRefs into arrays there.
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
    "System",
    "Topology",
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
    module = build_model(
        config.model.kind,
        input_shape=input_shape,
        num_classes=num_classes,
        hidden=config.model.hidden,
    )
    generator = torch.Generator().manual_seed(torch_seed_for(config.seed, "init"))
    init_parameters(module, generator)
    return FlatModel(module).vector()


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
        """Return the run state as plain data (``rayfl.checkpoint``)."""
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


class Topology(Protocol):
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


# --- FLSystem: moves to rayfl.engine (Engine + rayfl.star.round.StarRound) -------------
import math  # noqa: E402
import uuid  # noqa: E402

import ray  # noqa: E402

from rayfl.actors.client import ClientActor  # noqa: E402
from rayfl.actors.cloud import REJECT_ACTOR_LOST, CloudServer  # noqa: E402
from rayfl.actors.setup import ActorSetup  # noqa: E402
from rayfl.actors.shared_data import share_data  # noqa: E402
from rayfl.algorithms.registry import algorithm_class, make_algorithm  # noqa: E402
from rayfl.config import RunConfig  # noqa: E402
from rayfl.data.federated import FederatedData, build_federated  # noqa: E402
from rayfl.resources import (  # noqa: E402
    check_fits,
    estimate_memory,
    placed,
    release_cpus,
    reserve_cpus,
)
from rayfl.session import RaySession  # noqa: E402
from rayfl.uplink import UplinkModel  # noqa: E402

__all__ += ["FLSystem"]


class FLSystem:
    """The actors of one run and the operations the runner and env call.

    Args:
        config: The run config.
        data: A prebuilt federated dataset (default: built from ``config.data``).
    """

    def __init__(self, config: RunConfig, data: FederatedData | None = None) -> None:
        self.config = config
        self.session = RaySession(config.ray)
        try:
            self._build(data)
        except BaseException:
            release_cpus(getattr(self, "reservation", None))
            self.session.close()
            raise

    def _build(self, data: FederatedData | None) -> None:
        cfg = self.config
        self.data = (
            data if data is not None else build_federated(cfg.data, seed=cfg.seed)
        )
        n = len(self.data.train_slices)
        self.num_clients = n
        self.num_train = np.asarray(self.data.num_train, dtype=np.int64)
        self.num_test = np.asarray(self.data.num_test, dtype=np.int64)
        vector, setup = self._start(cfg)
        cpus = RaySession.num_cpus()
        per_actor = cfg.ray.clients_per_actor
        if per_actor == "auto":
            per_actor = max(1, math.ceil(n / cpus))
        self.groups = pack_clients(n, int(per_actor))
        resources = ray.cluster_resources()
        check_fits(
            estimate_memory(
                num_clients=n,
                clients_per_actor=int(per_actor),
                dim=self.dim,
                data_bytes=self.data.x.nbytes + self.data.y.nbytes,
            ),
            memory_bytes=resources.get("memory", float("inf")),
            object_store_bytes=resources.get("object_store_memory", float("inf")),
            num_clients=n,
            clients_per_actor=int(per_actor),
        )
        actor_cpus = min(1.0, cpus / len(self.groups))
        self.run_id = uuid.uuid4().hex[:8]
        # The actors fetch the data by the holder's name (kept for the whole run), so
        # a restarted actor re-reads it without object-store constructor arguments.
        shared, self.data_holder = share_data(self.data, f"rayfl-{self.run_id}-data")
        # All actors' CPUs at once (no deadlock between runs sharing a cluster);
        # SPREAD places client actors across nodes first (multi-node clusters).
        self.reservation = reserve_cpus(
            len(self.groups), actor_cpus, timeout_s=cfg.ray.reserve_timeout_s
        )
        self.actors = [
            ClientActor.options(
                name=f"rayfl-{self.run_id}-clients-{a}",
                num_cpus=actor_cpus,
                max_restarts=cfg.ray.max_actor_restarts,
                scheduling_strategy=placed(self.reservation, a),
            ).remote(shared, group, setup)
            for a, group in enumerate(self.groups)
        ]
        self.actor_of = np.empty(n, dtype=np.int64)
        for a, group in enumerate(self.groups):
            self.actor_of[group] = a
        self.cloud = CloudServer.options(num_cpus=0).remote(setup)
        # Latest state snapshot of each actor's clients (refs, never pulled) and the
        # actors that died and must be restored before their next call.
        self.state_refs: dict[int, Any] = {}
        self.to_restore: set[int] = set()
        # Fail fast (and clearly) if an actor cannot start; learn where each landed.
        nodes = ray.get(
            [a.ping.remote() for a in self.actors] + [self.cloud.ping.remote()]
        )
        self.actor_nodes: list[str] = nodes[:-1]
        self.cloud_node: str = nodes[-1]

    def placement(self) -> dict[str, Any]:
        """Return where the actors run: node id per client actor and the cloud."""
        return {
            "client_actors": [
                {"node": node, "clients": [group[0], group[-1]]}
                for node, group in zip(self.actor_nodes, self.groups, strict=True)
            ],
            "cloud": self.cloud_node,
            "num_nodes": len(set(self.actor_nodes) | {self.cloud_node}),
        }

    def _start(self, cfg: RunConfig) -> tuple[npt.NDArray[np.float32], ActorSetup]:
        """Set the run-level state of ``cfg`` (seed): ω⁰, uplink model, setup."""
        self.config = cfg
        vector = initial_vector(
            cfg, tuple(self.data.input_shape), self.data.num_classes
        )
        self.dim = len(vector)
        self.uplink = UplinkModel(cfg, num_train=self.num_train, model_dim=self.dim)
        #: The algorithm sends per-client downloads (FedAMP, APPLE): the server
        #: needs every upload, so actors never pre-reduce them.
        self.personalized = algorithm_class(cfg.algorithm).personalized_downloads
        # Driver-side instance: only its flags are read (downlink, unscheduled).
        self.algorithm = make_algorithm(cfg.algorithm)
        self.global_ref = ray.put(vector)
        setup = ActorSetup(
            config=cfg,
            input_shape=tuple(self.data.input_shape),
            num_classes=self.data.num_classes,
            noise_std=self.uplink.noise_std,
            server_noise_std=self.uplink.server_noise_std,
            reduce_in_actor=cfg.ray.reduce_in_actor
            and self.uplink.per_client_effects is False
            and not self.personalized,
            client_noise_std=None
            if self.uplink.client_noise_std is None
            else tuple(float(s) for s in self.uplink.client_noise_std),
        )
        return vector, setup

    def restart(self, seed: int) -> None:
        """Start a new run with ``seed`` on the same actors and federated data.

        Model initialisation, batch order, noise, channel geometry and fading are
        redrawn from ``seed``; the data partition (drawn when the system was
        built) is kept, so restarting costs no actor start-up.
        """
        _, setup = self._start(self.config.model_copy(update={"seed": int(seed)}))
        ray.get(
            [a.reset.remote(setup) for a in self.actors]
            + [self.cloud.reset.remote(setup)]
        )

    # ------------------------------------------------------------------ rounds
    def run_round(self, round: int, schedule: Schedule) -> RoundResult:
        """Train the scheduled clients, send their uplinks, aggregate.

        Args:
            round: Round index t.
            schedule: Who uploads, on which subchannel, at what power.

        Returns:
            Per-client records of the round.
        """
        self._restore_failed()
        order = np.argsort(schedule.clients, kind="stable")
        clients = schedule.clients[order]
        calls, called = [], []
        extra = self._round_extras(round, schedule)
        down_bits: dict[int, float] = {}
        if self.personalized and len(clients):
            refs, down_bits = ray.get(
                self.cloud.download_refs.remote(
                    round, self.global_ref, clients.tolist(), self.num_clients
                )
            )
            for a in np.unique(self.actor_of[clients]):
                mine = clients[self.actor_of[clients] == a].tolist()
                extra.setdefault(int(a), {})["downloads"] = {c: refs[c] for c in mine}
        targets = np.unique(self.actor_of[clients]) if len(clients) else []
        if self.algorithm.updates_unscheduled:
            targets = np.arange(len(self.actors))
        for a in targets:
            mask = self.actor_of[clients] == a
            controls = {
                k: np.asarray(v)[order][mask].tolist()
                for k, v in schedule.controls.items()
            }
            calls.append(
                self.actors[a]
                .train.options(num_returns=3)
                .remote(
                    round,
                    self.global_ref,
                    clients[mask].tolist(),
                    controls,
                    **extra.get(int(a), {}),
                )
            )
            called.append(int(a))
        batches = self._gather([c[0] for c in calls], called)
        ok = [i for i, b in enumerate(batches) if b is not None]
        for i in ok:
            self.state_refs[called[i]] = calls[i][2]
        records = {int(r["client"]): r for i in ok for r in batches[i]}
        lost = {int(c) for c in clients} - set(records)
        for c in lost:  # the actor died mid-round: like packet loss
            records[c] = {"client": c, "bits": 0.0, "actor_failed": True}
        bits = np.array([records[int(c)]["bits"] for c in clients], dtype=np.float64)
        link_rows, link = self.uplink.link(round, schedule, bits)
        new_ref, server_ref = self.cloud.aggregate.options(num_returns=2).remote(
            round, self.global_ref, link, *[calls[i][1] for i in ok]
        )
        server = ray.get(server_ref)
        self.global_ref = new_ref
        delivered = set(server["delivered"])
        reasons = server["reasons"]
        rows = []
        for c in schedule.clients:
            row = {**records[int(c)], **link_rows.get(int(c), {})}
            row["delivered"] = int(c) in delivered
            # why the server refused the update (None: accepted or lost on the air)
            row["rejected"] = reasons.get(
                int(c), REJECT_ACTOR_LOST if int(c) in lost else None
            )
            if down_bits:
                row.update(self._downlink(round, int(c), down_bits.get(int(c), 0.0)))
            rows.append(row)
        self.uplink.record_releases([c for c in schedule.clients if int(c) not in lost])
        return RoundResult(round, rows, sorted(delivered))

    def _downlink(self, round: int, client: int, bits: float) -> dict[str, float]:
        """Return the downlink record of a personalized download of ``bits`` bits.

        With a wireless model the download is sent at the Shannon rate
        B·log₂(1 + SNR_dl) of the client's downlink SNR (BS power, bandwidth B
        or K·B per ``wireless.downlink_band``; the broadcast of ω is not counted).
        """
        row = {"download_bits": float(bits)}
        state = self.uplink.channel_state(round)
        if state is not None:
            snr = 10.0 ** (float(state.downlink_snr_db[client]) / 10.0)
            bandwidth_hz = state.downlink_bandwidth_hz or state.bandwidth_hz
            rate = bandwidth_hz * math.log2(1.0 + snr)
            row["downlink_rate_bps"] = rate
            row["downlink_latency_s"] = bits / rate if rate > 0 else float("inf")
        return row

    def _round_extras(
        self, round: int, schedule: Schedule
    ) -> dict[int, dict[str, Any]]:
        """Per-actor extra arguments of ``train``: downlink BER, personal-only clients.

        Empty for algorithms without ``uses_downlink``/``updates_unscheduled``.
        """
        algo = self.algorithm
        out: dict[int, dict[str, Any]] = {}
        if algo.uses_downlink:
            ber = self.downlink_bit_error_rate(round)
            for a, group in enumerate(self.groups):
                out.setdefault(a, {})["downlink_ber"] = {
                    c: float(ber[c]) for c in group
                }
        if algo.updates_unscheduled:
            scheduled = {int(c) for c in schedule.clients}
            for a, group in enumerate(self.groups):
                idle = [c for c in group if c not in scheduled]
                out.setdefault(a, {})["personal_only"] = idle
                out[a]["personal_controls"] = {
                    k: [float(np.asarray(v)[c]) for c in idle]
                    for k, v in schedule.all_controls.items()
                }
        return out

    def downlink_bit_error_rate(self, round: int) -> npt.NDArray[np.float64]:
        """Return each client's downlink BER of round ``round`` (zeros without errors).

        Seed 000 eq. 13 at the BS power (``rayfl.wireless.downlink``); zero with
        ideal links or when ``wireless.effects`` is not ``bit_flip``.
        """
        from rayfl.wireless.downlink import downlink_bit_error_rate

        wireless = self.config.wireless
        state = self.uplink.channel_state(round)
        if wireless is None or state is None or wireless.effects != "bit_flip":
            return np.zeros(self.num_clients)
        return downlink_bit_error_rate(state, qam_order=wireless.qam_order)

    def exhausted(self) -> bool:
        """Return True when a T0 cap is set and no client may upload any more."""
        cap = self.config.privacy.max_uploads
        return cap is not None and not bool(self.uplink.eligible().any())

    def evaluate(self) -> list[dict[str, float]]:
        """Evaluate every client's models; one record per client, by id.

        Clients of an actor that fails during evaluation get NaN metrics.
        """
        self._restore_failed()
        refs = [a.evaluate.remote(self.global_ref) for a in self.actors]
        batches = self._gather(refs, list(range(len(self.actors))))
        nan = float("nan")
        rows = []
        for a, batch in enumerate(batches):
            if batch is None:
                batch = [
                    {
                        "client": c,
                        "test_loss": nan,
                        "test_acc": nan,
                        "eval_train_loss": nan,
                    }
                    for c in self.groups[a]
                ]
            rows += batch
        return sorted(rows, key=lambda r: r["client"])

    # ------------------------------------------------------------------ faults
    def _gather(self, refs: list[Any], actor_ids: list[int]) -> list[Any]:
        """``ray.get`` the refs; a dead actor's result becomes None (and is noted)."""
        try:
            return list(ray.get(refs))
        except ray.exceptions.RayActorError:
            pass
        out = []
        for ref, a in zip(refs, actor_ids, strict=True):  # failure path only
            try:
                out.append(ray.get(ref))
            except ray.exceptions.RayActorError:
                out.append(None)
                self.to_restore.add(a)
        return out

    def _restore_failed(self) -> None:
        """Give restarted actors back their clients' state (waits for the restart)."""
        if not self.to_restore:
            return
        pending = [
            self.actors[a]
            .set_state.options(max_task_retries=-1)
            .remote(self.state_refs.get(a, {}))
            for a in sorted(self.to_restore)
        ]
        ray.get(pending)
        self.to_restore.clear()

    def state_dict(self) -> dict[str, Any]:
        """Return the run state for a checkpoint (pulls the model and client states)."""
        self._restore_failed()
        states = ray.get([a.get_state.remote() for a in self.actors])
        clients = {int(c): dict(v) for state in states for c, v in state.items()}
        out = {
            "global": np.array(ray.get(self.global_ref)),
            "clients": clients,
            "ledger": self.uplink.ledger.state_dict(),
        }
        if self.personalized:
            out["server"] = ray.get(self.cloud.get_state.remote())
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` (the packing may differ from the saved run)."""
        self.global_ref = ray.put(np.asarray(state["global"], dtype=np.float32))
        clients = state["clients"]
        ray.get(
            [
                actor.set_state.remote({c: clients[c] for c in group if c in clients})
                for actor, group in zip(self.actors, self.groups, strict=True)
            ]
        )
        self.uplink.ledger.load_state_dict(state["ledger"])
        if "server" in state:
            ray.get(self.cloud.set_state.remote(state["server"]))

    def local_updates(self) -> list[int]:
        """Return how many local updates each client has made (pulls small dicts)."""
        self._restore_failed()
        states = ray.get([a.get_state.remote() for a in self.actors])
        counts = [0] * self.num_clients
        for state in states:
            for c, s in state.items():
                counts[int(c)] = int(s.get("local_updates", 0))
        return counts

    def global_vector(self) -> npt.NDArray[np.float32]:
        """Return ω^t (pulls the array: not for the hot path)."""
        return np.array(ray.get(self.global_ref))

    def close(self) -> None:
        """Kill the actors and stop Ray if this system started it."""
        for actor in getattr(self, "actors", []):
            ray.kill(actor)
        if hasattr(self, "cloud"):
            ray.kill(self.cloud)
        if hasattr(self, "data_holder"):
            ray.kill(self.data_holder)
        self.actors = []
        release_cpus(getattr(self, "reservation", None))
        self.reservation = None
        self.session.close()

    def __enter__(self) -> FLSystem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
