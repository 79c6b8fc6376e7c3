"""The client actor: hosts 1..M virtual clients of a run.

A thin shell (STYLE.md rule 7): it unpacks the global model ref, calls the
algorithm's client half and the uplink stages for each scheduled client, and
returns small records plus one :class:`Uploads` bundle. Nothing un-noised leaves
the actor when privacy placement is ``client`` (local DP trust boundary).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import ray
import torch

from rayfl.actors.messages import Uploads
from rayfl.actors.quiet_exit import quiet_exit
from rayfl.actors.restart import mark_restarted, needs_state, state_restored
from rayfl.actors.setup import ActorSetup
from rayfl.actors.shared_data import SharedData
from rayfl.actors.state import ClientStateStore, StateSnapshot
from rayfl.algorithms.base import ClientContext, ClientUpdate, Download
from rayfl.algorithms.registry import make_algorithm
from rayfl.compression.payload import Payload
from rayfl.data.federated import FederatedData
from rayfl.learning.aggregate import partial_sum
from rayfl.learning.models import FlatModel, build_model
from rayfl.learning.train import evaluate
from rayfl.privacy.pipeline import build_client_stages, run_stages
from rayfl.seeding import rng_for

__all__ = ["TRAIN_CHUNK", "ClientActor", "ClientHost"]

#: Scheduled clients trained together by a host (bounds its memory per round).
TRAIN_CHUNK = 512

#: The generator ``run_stages`` gets when a client has no uplink stage: never drawn from.
_NO_DRAWS = np.random.default_rng(0)


class ClientHost:
    """The engine behind :class:`ClientActor`, usable without Ray in tests.

    Args:
        data: The federated dataset, or a :class:`SharedData` naming where to fetch
            it (zero-copy from the object store; what the Ray actors get, so that a
            restart re-reads it by name).
        clients: Ids of the virtual clients hosted here (a list or a range).
        setup: Run-level values.
    """

    def __init__(
        self,
        data: FederatedData | SharedData,
        clients: Sequence[int],
        setup: ActorSetup,
    ) -> None:
        torch.set_num_threads(1)
        quiet_exit()
        mark_restarted(self)
        if isinstance(data, SharedData):
            data = data.get()
        self.data = data
        self.clients = [int(c) for c in clients]
        self.setup = setup
        self.model = FlatModel(
            build_model(
                setup.model.kind,
                input_shape=setup.input_shape,
                num_classes=setup.num_classes,
                hidden=setup.model.hidden,
            )
        )
        self.algorithm = make_algorithm(setup.algorithm)
        self.algorithm.bind(privacy=setup.privacy, seed=setup.seed)
        self.stages = build_client_stages(
            setup.privacy,
            setup.compression,
            noise_std=setup.noise_std,
            layer_offsets=self.model.spec.offsets,
        )
        self.state = ClientStateStore(self.clients)
        # One (N,) array for every context: ``data.num_train`` is computed on each
        # access, and a context per scheduled client each holding its own copy
        # made a round of K clients cost K x N x 8 bytes (issue 37's N² term).
        self.num_train_all = np.asarray(data.num_train, dtype=np.int64)
        self.num_train_all.flags.writeable = False
        sizes = self.num_train_all
        self.max_train_size = int(sizes.max()) if len(sizes) else 0
        self._client_stages: dict[float, list[Any]] = {}

    def _stages_for(self, client: int) -> list[Any]:
        """Return the uplink stages of ``client`` (its own σ_n when set)."""
        stds = self.setup.client_noise_std
        if stds is None:
            return self.stages
        std = float(stds[client])
        if std not in self._client_stages:
            self._client_stages[std] = build_client_stages(
                self.setup.privacy,
                self.setup.compression,
                noise_std=std,
                layer_offsets=self.model.spec.offsets,
            )
        return self._client_stages[std]

    @needs_state
    def train(
        self,
        round: int,
        global_vector: npt.NDArray[np.float32],
        clients: list[int],
        controls: dict[str, list[float]] | None = None,
        downloads: dict[int, Any] | None = None,
        downlink_ber: dict[int, float] | None = None,
        personal_only: list[int] | None = None,
        personal_controls: dict[str, list[float]] | None = None,
    ) -> tuple[list[dict[str, Any]], Uploads, StateSnapshot]:
        """Train the scheduled ``clients`` and run their uplink stages.

        Args:
            round: Round index t.
            global_vector: ω^t, float32 (dim,).
            clients: Scheduled client ids hosted here, ascending.
            controls: Per-client knobs, name → one value per entry of ``clients``.
            downloads: client → its personalized download (an object ref or the
                :class:`~rayfl.algorithms.base.Download` itself), for algorithms
                with ``personalized_downloads``.
            downlink_ber: Downlink BER of hosted clients this round (algorithms
                with ``uses_downlink``); missing = 0.
            personal_only: Unscheduled hosted clients that run the algorithm's
                ``personal_update`` (algorithms with ``updates_unscheduled``).
            personal_controls: Their knobs, one value per entry of ``personal_only``.

        Returns:
            One record per client, the bundle of their payloads, and a snapshot of
            the hosted clients' state after the round (the driver keeps its ref so
            a restarted actor can be restored; empty for stateless algorithms).
        """
        received = _resolve(downloads or {})
        records: list[dict[str, Any]] = []
        bundles = []
        for first in range(0, len(clients), TRAIN_CHUNK):
            part = clients[first : first + TRAIN_CHUNK]
            contexts = [
                self._context(
                    round,
                    global_vector,
                    client,
                    {k: float(v[first + i]) for k, v in (controls or {}).items()},
                    (downlink_ber or {}).get(client, 0.0),
                    received.get(client),
                )
                for i, client in enumerate(part)
            ]
            bundles.append(self._train_chunk(round, contexts, records))
        for i, client in enumerate(personal_only or []):
            ctx = self._context(
                round,
                global_vector,
                client,
                {k: float(v[i]) for k, v in (personal_controls or {}).items()},
                (downlink_ber or {}).get(client, 0.0),
                personal=True,
            )
            records.append(
                {"client": client, "personal_only": True}
                | self.algorithm.personal_update(ctx)
            )
        if not bundles:  # no scheduled client here (personal updates only)
            bundles.append(self._bundle([], [], []))
        return records, _merge(clients, bundles), self.state.snapshot()

    def _train_chunk(
        self, round: int, contexts: list[ClientContext], records: list[dict[str, Any]]
    ) -> Uploads:
        """Train one chunk of scheduled clients; append their records; bundle them.

        A round's clients are trained :data:`TRAIN_CHUNK` at a time so that a
        host's memory is O(chunk × dim), not O(K × dim), when its uploads are
        pre-reduced (the exact sum does not depend on the grouping, and the
        vectorized trainer's results do not depend on a client's stack partners).
        """
        updates = self.algorithm.client_update_many(contexts)
        return self._send_chunk(round, contexts, updates, records)

    def _send_chunk(
        self,
        round: int,
        contexts: list[ClientContext],
        updates: list[ClientUpdate],
        records: list[dict[str, Any]],
    ) -> Uploads:
        """Run trained clients' uplink stages; append their records; bundle them."""
        payloads = []
        weights = []
        for ctx, update in zip(contexts, updates, strict=True):
            payload, record = self._upload(round, ctx, update)
            payloads.append(payload)
            weights.append(update.weight)
            records.append(record)
        return self._bundle([c.client for c in contexts], payloads, weights)

    def _context(
        self,
        round: int,
        global_vector: npt.NDArray[np.float32],
        client: int,
        controls: dict[str, float],
        downlink_ber: float,
        download: Any = None,
        *,
        personal: bool = False,
        rng: np.random.Generator | None = None,
    ) -> ClientContext:
        """Return a hosted client's context of the round (``personal``: no upload).

        ``rng`` is the client's (seed, "batch", round, client) generator when
        the caller made it already (:func:`rayfl.seeding.rng_for_many`).
        """
        x, y = self.data.train(client)
        common: dict[str, Any] = {
            "client": client,
            "round": round,
            "global_vector": global_vector,
            "x_train": x,
            "y_train": y,
            "model": self.model,
            "state": self.state[client],
            "controls": controls,
            "rng": (
                rng
                if rng is not None
                else rng_for(self.setup.seed, "batch", round=round, client=client)
            ),
            "downlink_bit_error_rate": downlink_ber,
        }
        if personal:
            return ClientContext(**common)
        return ClientContext(
            **common,
            max_train_size=self.max_train_size,
            download=download,
            num_rounds=self.setup.rounds,
            num_train_all=self.num_train_all,
        )

    def _upload(
        self, round: int, ctx: ClientContext, update: ClientUpdate
    ) -> tuple[Any, dict[str, float]]:
        """Run a trained client's uplink stages; return its payload and record."""
        client = ctx.client
        ctx.state["local_updates"] = ctx.state.get("local_updates", 0) + 1
        upload: npt.NDArray[np.float32] | Payload = update.vector
        if update.support is not None:  # a sparse upload (seed 002 §2.3)
            upload = Payload(
                dim=len(update.vector),
                values=np.asarray(update.vector, np.float32)[update.support],
                indices=update.support,
                scale=update.scale,
            )
        stages = self._stages_for(client)
        payload, stage_metrics = run_stages(
            upload,
            stages,
            # no stage, no draw: the keyed generator costs more than the rest
            rng_for(self.setup.seed, "noise", round=round, client=client)
            if stages
            else _NO_DRAWS,
        )
        payload = self.algorithm.encode_upload(payload, ctx)
        record = {
            "client": client,
            **update.metrics,
            **stage_metrics,
            **self.algorithm.payload_metrics(payload),
            "bits": float(payload.payload_bits),
        }
        return payload, record

    def _bundle(
        self, clients: list[int], payloads: list[Any], weights: list[float]
    ) -> Uploads:
        """Return the round's uploads: one by one, or summed here (reduce_in_actor)."""
        clients_arr = np.asarray(clients, dtype=np.int64)
        if not self.setup.reduce_in_actor:
            return Uploads(clients_arr, tuple(payloads), np.asarray(weights))
        dense = [p.to_dense() for p in payloads]
        ok = [i for i, v in enumerate(dense) if np.all(np.isfinite(v))]
        dim = self.model.spec.dim
        rows = (
            np.stack([dense[i] for i in ok]) if ok else np.zeros((0, dim), np.float32)
        )
        return Uploads(
            clients_arr,
            (),
            np.asarray(weights),
            partial=partial_sum(rows, [weights[i] for i in ok]),
            rejected=tuple(int(clients[i]) for i in range(len(clients)) if i not in ok),
        )

    @needs_state
    def evaluate(
        self, global_vector: npt.NDArray[np.float32], clients: list[int] | None = None
    ) -> list[dict[str, float]]:
        """Evaluate each client's models on its test (and train) split.

        Returns:
            Per client: ``test_loss``/``test_acc`` of the global model,
            ``eval_train_loss`` (train-split loss of the client's evaluated model:
            the personal one when it has one), ``personal_loss``/
            ``personal_acc`` when the algorithm keeps personal models, and the
            algorithm's ``eval_train_objectives`` (Ditto: regularised PL losses).
        """
        rows = []
        for client in self.clients if clients is None else clients:
            x_te, y_te = self.data.test(client)
            x_tr, y_tr = self.data.train(client)
            state = self.state[client]
            vectors = self.algorithm.eval_vectors_for(
                ClientContext(
                    client=client,
                    round=-1,
                    global_vector=global_vector,
                    x_train=x_tr,
                    y_train=y_tr,
                    model=self.model,
                    state=state,
                    controls={},
                    rng=rng_for(
                        self.setup.seed,
                        "eval_adapt",
                        round=int(state.get("local_updates", 0)),
                        client=client,
                    ),
                    num_rounds=self.setup.rounds,
                    num_train_all=self.num_train_all,
                )
            )
            loss, acc = evaluate(self.model, vectors["global"], x_te, y_te)
            row = {"client": client, "test_loss": loss, "test_acc": acc}
            main = vectors.get("personal", vectors["global"])
            if "personal" in vectors:
                p_loss, p_acc = evaluate(self.model, vectors["personal"], x_te, y_te)
                row.update(personal_loss=p_loss, personal_acc=p_acc)
            row["eval_train_loss"] = evaluate(self.model, main, x_tr, y_tr)[0]
            row.update(
                self.algorithm.eval_train_objectives(row["eval_train_loss"], state)
            )
            rows.append(row)
        return rows

    def reset(self, setup: ActorSetup) -> None:
        """Start a new run on the same data: new setup (seed), empty client state."""
        self.setup = setup
        self.state = ClientStateStore(self.clients)
        self.algorithm.bind(privacy=setup.privacy, seed=setup.seed)
        self._client_stages = {}
        state_restored(self)

    @needs_state
    def get_state(self) -> dict[Any, Any]:
        """Return the per-client state (for checkpoints), ``{client: {name: value}}``."""
        return self.state.export()

    def set_state(self, state: dict[Any, Any]) -> None:
        """Restore per-client state saved by :meth:`get_state`."""
        self.state.load(state)
        state_restored(self)

    def get_client_states(self) -> dict[int, dict[str, Any]]:
        """Return ``{client: {name: value}}`` (``Engine.client_states``, any host)."""
        return ClientHost.get_state(self)

    def set_client_states(self, state: dict[int, dict[str, Any]]) -> None:
        """Restore the per-client state only (a host's other state is kept)."""
        ClientHost.set_state(self, state)

    def state_nbytes(self) -> int:
        """Bytes of client state held by this actor (memory reports)."""
        return self.state.nbytes()

    def ping(self) -> str:
        """Return the node id this actor runs on (placement reports)."""
        return ray.get_runtime_context().get_node_id()


def _merge(clients: list[int], bundles: list[Uploads]) -> Uploads:
    """Return one round's uploads from its chunks' bundles (sums added exactly)."""
    if len(bundles) == 1:
        return bundles[0]
    partials = [b.partial for b in bundles if b.partial is not None]
    total = partials[0] if partials else None
    for partial in partials[1:]:
        total = total + partial if total is not None else partial
    return Uploads(
        np.asarray(clients, dtype=np.int64),
        tuple(p for b in bundles for p in b.payloads),
        np.concatenate([b.weights for b in bundles]),
        partial=total,
        rejected=tuple(c for b in bundles for c in b.rejected),
    )


def _resolve(downloads: dict[int, Any]) -> dict[int, Any]:
    """Return client → download data, fetching object refs (one get for all)."""
    refs = {c: v for c, v in downloads.items() if isinstance(v, ray.ObjectRef)}
    out = dict(downloads)
    if refs:
        out.update(zip(refs, ray.get(list(refs.values())), strict=True))
    return {int(c): v.data if isinstance(v, Download) else v for c, v in out.items()}


ClientActor = ray.remote(ClientHost)
"""``ClientHost`` as a Ray actor class (``@ray.remote`` once, at module level)."""
