"""StarRound: one cloud, N clients on a wireless uplink — the star topology's strategy.

One round (DESIGN.md "One round, as data flows"):
    1. the driver passes the global model's ObjectRef — never the array — to the
       client actors hosting the scheduled clients;
    2. each actor trains its clients and runs the uplink stages inside itself;
    3. the driver reads the small records (payload sizes) and turns the round's
       channel realisation into a ``LinkOutcome`` (BER, lost packets, latency,
       energy);
    4. the cloud actor applies the channel to the payloads, aggregates and
       returns the new global model, whose ref the engine keeps.

The star has one decision unit (all clients); its observation is the scheduling
env's (channel gain, last delivered train loss, uploads, ε spent, staleness,
data size, eligibility, round), built by :func:`star_observation` from a
:class:`rayfl.observation.ObservationTracker`.
"""

from __future__ import annotations

import math
import uuid
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import ray

from rayfl.actors.client import ClientActor
from rayfl.actors.cloud import CloudServer
from rayfl.actors.pool import ActorPool, kill_actors
from rayfl.actors.setup import ActorSetup
from rayfl.actors.shared_data import SharedData, hold_data
from rayfl.algorithms.registry import algorithm_class, make_algorithm
from rayfl.eval_sample import eval_sample
from rayfl.observation import ObservationTracker
from rayfl.schedule import Schedule
from rayfl.star.moving import moving_observation
from rayfl.star.round_steps import (
    actor_share,
    round_link,
    round_rows,
    settle_round,
    star_setup,
)
from rayfl.system import Decision, EvalRow, Observation, RoundResult
from rayfl.uplink import UplinkModel

__all__ = ["StarRound", "star_observation"]


def star_observation(
    uplink: UplinkModel,
    tracker: ObservationTracker,
    data_size: npt.ArrayLike,
    t: int,
) -> Observation:
    """Return the star's observation of round ``t`` (its eight core keys).

    The engine's star round and the scheduling env (both modes) read this.
    A moving world adds its keys (:mod:`rayfl.star.moving`); with availability
    on, ``eligible`` also needs the client reachable and ``channel_gain`` is
    the gain last seen.

    Args:
        uplink: Channel and ledger (gain, uploads, ε spent, eligibility).
        tracker: Each client's last delivered train loss and staleness.
        data_size: (N,) training samples of each client.
        t: Round index.
    """
    state = uplink.channel_state(t)
    assert state is not None  # observations exist with a wireless channel only
    eps, _ = uplink.epsilons(evaluate=True)
    tracked = tracker.fields()
    data_size = np.asarray(data_size)
    obs: Observation = {
        "channel_gain": np.asarray(state.gain_db, dtype=np.float32),
        "loss": tracked["loss"],
        "upload_count": uplink.upload_count().astype(np.float32),
        "privacy_spent": (
            np.zeros(len(data_size)) if eps is None else np.minimum(eps, 3e38)
        ).astype(np.float32),
        "staleness": tracked["staleness"],
        "data_size": data_size.astype(np.float32),
        "eligible": uplink.eligible(t).astype(np.float32),
        "round": np.array([t], dtype=np.float32),
    }
    obs.update(moving_observation(uplink, t))
    return obs


class StarRound:
    """The star strategy (see the module docstring); ``Engine`` delegates to it.

    Attributes set by :meth:`build`: ``uplink`` (channel, ledger), ``algorithm``
    (driver-side flags), ``personalized`` (per-client downloads), ``cloud`` and
    ``cloud_node``.
    """

    kind: ClassVar[str] = "star"

    def __init__(self) -> None:
        #: The clients' history; started by the first :meth:`observe`.
        self.tracker: ObservationTracker | None = None
        #: The last round run (keys a sampled evaluation's draw); -1 before any.
        self.last_round = -1

    # ------------------------------------------------------------------ build
    def build(self, engine: Any) -> None:
        """Start the client actors (on ``engine.pool``) and the cloud."""
        setup = self._start(engine)
        # The cloud holds the dataset's ref for the client hosts (no holder actor
        # of the pool's: one worker process fewer to start). It is created just
        # after the client hosts, before they are pinged: the hosts take Ray's
        # pre-started workers (they import torch, the long part), the cloud a
        # new one, started meanwhile.
        run_id = uuid.uuid4().hex[:8]
        shared = SharedData(f"rayfl-{run_id}-cloud")

        def start_cloud() -> None:
            self.cloud = CloudServer.options(num_cpus=0, name=shared.holder).remote(
                setup, hold_data(engine.data)
            )

        engine.pool = ActorPool.start(
            ClientActor,
            engine.data,
            setup,
            ray_settings=engine.config.ray,
            dim=engine.dim,
            role="clients",
            memory_hints=self._memory_hints(engine),
            run_id=run_id,
            shared=shared,
            before_ping=start_cloud,
        )
        self.cloud_node: str = ray.get(self.cloud.ping.remote())

    def _memory_hints(self, engine: Any) -> dict[str, int]:
        """Per-client state vectors and uploads per round, for the memory check."""
        cfg = engine.config
        per_round = cfg.scheduler.clients_per_round
        return {
            "state_vectors_per_client": int(
                algorithm_class(cfg.algorithm).keeps_personal
            ),
            "uploads": engine.num_clients if per_round is None else int(per_round),
        }

    def _start(self, engine: Any) -> ActorSetup:
        """Set the run-level state of ``engine.config`` (seed): uplink and setup."""
        cfg = engine.config
        self.uplink, setup = star_setup(
            cfg,
            num_train=engine.num_train,
            dim=engine.dim,
            input_shape=tuple(engine.data.input_shape),
            num_classes=engine.data.num_classes,
        )
        #: The algorithm sends per-client downloads (FedAMP, APPLE): the server
        #: needs every upload, so actors never pre-reduce them.
        self.personalized = algorithm_class(cfg.algorithm).personalized_downloads
        # Driver-side instance: only its flags are read (downlink, unscheduled).
        self.algorithm = make_algorithm(cfg.algorithm)
        self.tracker = None
        return setup

    def restart(self, engine: Any, seed: int) -> None:
        """Reset uplink, trackers, actors and cloud for ``engine.config`` (new seed)."""
        setup = self._start(engine)
        ray.get(
            [a.reset.remote(setup) for a in engine.pool.actors]
            + [self.cloud.reset.remote(setup)]
        )

    def num_units(self, engine: Any) -> int:
        """One unit: the star decides for all clients at once."""
        return 1

    # ------------------------------------------------------------------ observe
    def observe(self, engine: Any, t: int) -> tuple[Observation, ...]:
        """Return round ``t``'s observation (the scheduling env's eight keys).

        The first call evaluates every client once for the initial losses.
        """
        if self.tracker is None:
            evals = self.evaluate(engine, sampled=False)
            self.tracker = ObservationTracker(
                engine.num_clients, [e["eval_train_loss"] for e in evals]
            )
        return (star_observation(self.uplink, self.tracker, engine.num_train, t),)

    def exhausted(self, engine: Any) -> bool:
        """Return True when a T0 cap is set and no client may upload any more."""
        cap = engine.config.privacy.max_uploads
        return cap is not None and not bool(self.uplink.eligible().any())

    # ------------------------------------------------------------------ round
    def round(self, engine: Any, t: int, decision: Decision) -> RoundResult:
        """Train the scheduled clients, send their uplinks, aggregate.

        Args:
            engine: The engine (pool, global ref).
            t: Round index.
            decision: One schedule (the star's one unit).
        """
        (schedule,) = decision
        self.last_round = t
        pool: ActorPool = engine.pool
        pool.restore_failed()
        order = np.argsort(schedule.clients, kind="stable")
        clients = schedule.clients[order]
        extra, down_bits = self._actor_extras(engine, t, schedule, clients)
        calls, called = self._submit(engine, t, schedule, order, clients, extra)
        batches = pool.gather([c[0] for c in calls], called)
        ok = [i for i, b in enumerate(batches) if b is not None]
        for i in ok:
            pool.remember_state(called[i], calls[i][2])
        records = {int(r["client"]): r for i in ok for r in batches[i]}
        lost = {int(c) for c in clients} - set(records)
        for c in lost:  # the actor died mid-round: like packet loss
            records[c] = {"client": c, "bits": 0.0, "actor_failed": True}
        link_rows, link = round_link(self.uplink, t, schedule, clients, records)
        new_ref, server_ref = self.cloud.aggregate.options(num_returns=2).remote(
            t, engine.global_ref, link, *[calls[i][1] for i in ok]
        )
        server = ray.get(server_ref)
        engine.global_ref = new_ref
        rows = round_rows(schedule, records, link_rows, server, lost)
        if down_bits:
            for row in rows:
                c = int(row["client"])
                row.update(self._downlink(t, c, down_bits.get(c, 0.0)))
        return settle_round(self.uplink, self.tracker, t, schedule, rows, server, lost)

    def _actor_extras(
        self, engine: Any, t: int, schedule: Schedule, clients: npt.NDArray[np.int64]
    ) -> tuple[dict[int, dict[str, Any]], dict[int, float]]:
        """Per-actor extra ``train`` arguments, incl. personalized downloads."""
        extra = self._round_extras(engine, t, schedule)
        down_bits: dict[int, float] = {}
        if self.personalized and len(clients):
            refs, down_bits = ray.get(
                self.cloud.download_refs.remote(
                    t, engine.global_ref, clients.tolist(), engine.num_clients
                )
            )
            for a, mine in engine.pool.by_actor(clients).items():
                extra.setdefault(a, {})["downloads"] = {c: refs[c] for c in mine}
        return extra, down_bits

    def _submit(
        self,
        engine: Any,
        t: int,
        schedule: Schedule,
        order: npt.NDArray[np.int64],
        clients: npt.NDArray[np.int64],
        extra: dict[int, dict[str, Any]],
    ) -> tuple[list[Any], list[int]]:
        """Call ``train`` on each actor hosting a scheduled client (or every actor)."""
        pool: ActorPool = engine.pool
        targets: npt.NDArray[np.int64] | list[int] = (
            np.unique(pool.actor_of[clients]) if len(clients) else []
        )
        if self.algorithm.updates_unscheduled:
            targets = np.arange(len(pool.actors))
        calls, called = [], []
        for a in targets:
            mine, controls = actor_share(pool.actor_of, schedule, order, clients, a)
            calls.append(
                pool.actors[a]
                .train.options(num_returns=3)
                .remote(t, engine.global_ref, mine, controls, **extra.get(int(a), {}))
            )
            called.append(int(a))
        return calls, called

    def _downlink(self, t: int, client: int, bits: float) -> dict[str, float]:
        """Return the downlink record of a personalized download of ``bits`` bits.

        With a wireless model the download is sent at the Shannon rate
        B·log₂(1 + SNR_dl) of the client's downlink SNR (BS power, bandwidth B
        or K·B per ``wireless.downlink_band``; the broadcast of ω is not counted).
        """
        row = {"download_bits": float(bits)}
        state = self.uplink.channel_state(t)
        if state is not None:
            snr = 10.0 ** (float(state.downlink_snr_db[client]) / 10.0)
            bandwidth_hz = state.downlink_bandwidth_hz or state.bandwidth_hz
            rate = bandwidth_hz * math.log2(1.0 + snr)
            row["downlink_rate_bps"] = rate
            row["downlink_latency_s"] = bits / rate if rate > 0 else float("inf")
        return row

    def _round_extras(
        self, engine: Any, t: int, schedule: Schedule
    ) -> dict[int, dict[str, Any]]:
        """Per-actor extra arguments of ``train``: downlink BER, personal-only clients.

        Empty for algorithms without ``uses_downlink``/``updates_unscheduled``.
        """
        algo = self.algorithm
        groups = engine.pool.groups
        out: dict[int, dict[str, Any]] = {}
        if algo.uses_downlink:
            ber = self.downlink_bit_error_rate(engine, t)
            for a, group in enumerate(groups):
                out.setdefault(a, {})["downlink_ber"] = {
                    c: float(ber[c]) for c in group
                }
        if algo.updates_unscheduled:
            scheduled = {int(c) for c in schedule.clients}
            for a, group in enumerate(groups):
                idle = [c for c in group if c not in scheduled]
                out.setdefault(a, {})["personal_only"] = idle
                out[a]["personal_controls"] = {
                    k: [float(np.asarray(v)[c]) for c in idle]
                    for k, v in schedule.all_controls.items()
                }
        return out

    def downlink_bit_error_rate(self, engine: Any, t: int) -> npt.NDArray[np.float64]:
        """Return each client's downlink BER of round ``t`` (zeros without errors).

        Seed 000 eq. 13 at the BS power (``rayfl.wireless.downlink``); zero with
        ideal links or when ``wireless.effects`` is not ``bit_flip``.
        """
        from rayfl.wireless.downlink import downlink_bit_error_rate

        wireless = engine.config.wireless
        state = self.uplink.channel_state(t)
        if wireless is None or state is None or wireless.effects != "bit_flip":
            return np.zeros(engine.num_clients)
        return downlink_bit_error_rate(state, qam_order=wireless.qam_order)

    # ------------------------------------------------------------------ evaluate
    def evaluate(self, engine: Any, *, sampled: bool = True) -> list[EvalRow]:
        """Evaluate the clients' models; one record per client, by id.

        With ``eval_clients: K`` (and ``sampled``) only K clients drawn by
        :func:`rayfl.eval_sample.eval_sample` are evaluated, O(K) work. A host
        failing during evaluation is restored and retried once; clients still
        missing get NaN scores and ``eval_failed`` (``ActorPool.evaluate_all``).
        """
        pool: ActorPool = engine.pool
        cfg = engine.config
        sample = (
            eval_sample(cfg.seed, self.last_round, engine.num_clients, cfg.eval_clients)
            if sampled
            else None
        )
        return pool.evaluate_all(
            lambda actor, clients: (
                actor.evaluate.remote(engine.global_ref)
                if clients is None
                else actor.evaluate.remote(engine.global_ref, clients)
            ),
            ("test_loss", "test_acc", "eval_train_loss"),
            None if sample is None else pool.by_actor(sample),
        )

    # ------------------------------------------------------------------ state
    def state_dict(self, engine: Any) -> dict[str, Any]:
        """Return the clients, ledger, tracker (and server) state."""
        out: dict[str, Any] = {
            "clients": engine.client_states(),
            "ledger": self.uplink.ledger.state_dict(),
        }
        if self.tracker is not None:
            out["tracker"] = self.tracker.state_dict()
        if self.personalized:
            out["server"] = ray.get(self.cloud.get_state.remote())
        return out

    def load_state_dict(self, engine: Any, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the packing may differ from the saved run)."""
        engine.set_client_states(state["clients"])
        self.uplink.ledger.load_state_dict(state["ledger"])
        if "tracker" in state:
            self.tracker = ObservationTracker(engine.num_clients)
            # a checkpoint of older versions holds loss and staleness only
            self.tracker.load_state_dict(
                {**self.tracker.state_dict(), **state["tracker"]}
            )
        if "server" in state:
            ray.get(self.cloud.set_state.remote(state["server"]))

    # ------------------------------------------------------------------ the rest
    def placement(self, engine: Any) -> dict[str, Any]:
        """Return the node of each client actor and of the cloud."""
        return {
            "client_actors": engine.pool.placement(),
            "cloud": self.cloud_node,
            "num_nodes": len(set(engine.pool.nodes) | {self.cloud_node}),
        }

    def summary(self, engine: Any) -> dict[str, Any]:
        """The star adds nothing to ``summary.json``."""
        return {}

    def write_extra(self, engine: Any, run_dir: Path) -> None:
        """The star writes no extra files."""

    def close(self, engine: Any) -> None:
        """Kill the cloud."""
        if hasattr(self, "cloud"):
            kill_actors(self.cloud)
