"""The client actor: hosts 1..M virtual clients of a run.

A thin shell (STYLE.md rule 7): it unpacks the global model ref, calls the
algorithm's client half and the uplink stages for each scheduled client, and
returns small records plus one :class:`Uploads` bundle. Nothing un-noised leaves
the actor when privacy placement is ``client`` (local DP trust boundary).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import ray
import torch

from rayfl.actors.messages import Uploads
from rayfl.actors.setup import ActorSetup
from rayfl.algorithms.base import ClientContext
from rayfl.algorithms.registry import make_algorithm
from rayfl.compression.payload import Payload
from rayfl.data.federated import FederatedData
from rayfl.learning.aggregate import partial_sum
from rayfl.learning.models import FlatModel, build_model
from rayfl.learning.train import evaluate
from rayfl.privacy.pipeline import build_client_stages, run_stages
from rayfl.seeding import rng_for

__all__ = ["ClientActor", "ClientHost"]


class ClientHost:
    """The engine behind :class:`ClientActor`, usable without Ray in tests.

    Args:
        data: The federated dataset (zero-copy from the object store).
        clients: Ids of the virtual clients hosted here.
        setup: Run-level values.
    """

    def __init__(
        self, data: FederatedData, clients: list[int], setup: ActorSetup
    ) -> None:
        torch.set_num_threads(1)
        self.data = data
        self.clients = [int(c) for c in clients]
        self.setup = setup
        cfg = setup.config
        self.model = FlatModel(
            build_model(
                cfg.model.kind,
                input_shape=setup.input_shape,
                num_classes=setup.num_classes,
                hidden=cfg.model.hidden,
            )
        )
        self.algorithm = make_algorithm(cfg.algorithm)
        self.stages = build_client_stages(
            cfg.privacy,
            cfg.compression,
            noise_std=setup.noise_std,
            layer_offsets=np.asarray(self.model.spec.offsets),
        )
        self.state: dict[int, dict[str, Any]] = {c: {} for c in self.clients}

    def train(
        self,
        round: int,
        global_vector: npt.NDArray[np.float32],
        clients: list[int],
        controls: dict[str, list[float]] | None = None,
    ) -> tuple[list[dict[str, float]], Uploads, dict[int, dict[str, Any]]]:
        """Train the scheduled ``clients`` and run their uplink stages.

        Args:
            round: Round index t.
            global_vector: ω^t, float32 (dim,).
            clients: Scheduled client ids hosted here, ascending.
            controls: Per-client knobs, name → one value per entry of ``clients``.

        Returns:
            One record per client, the bundle of their payloads, and a snapshot of
            the hosted clients' state after the round (the driver keeps its ref so
            a restarted actor can be restored; empty for stateless algorithms).
        """
        seed = self.setup.seed
        records: list[dict[str, float]] = []
        payloads = []
        weights = []
        contexts = []
        for i, client in enumerate(clients):
            x, y = self.data.train(client)
            contexts.append(
                ClientContext(
                    client=client,
                    round=round,
                    global_vector=global_vector,
                    x_train=x,
                    y_train=y,
                    model=self.model,
                    state=self.state[client],
                    controls={k: float(v[i]) for k, v in (controls or {}).items()},
                    rng=rng_for(seed, "batch", round=round, client=client),
                )
            )
        updates = self.algorithm.client_update_many(contexts)
        for ctx, update in zip(contexts, updates, strict=True):
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
            payload, stage_metrics = run_stages(
                upload,
                self.stages,
                rng_for(seed, "noise", round=round, client=client),
            )
            payloads.append(payload)
            weights.append(update.weight)
            records.append(
                {
                    "client": client,
                    **update.metrics,
                    **stage_metrics,
                    "bits": float(payload.payload_bits),
                }
            )
        clients_arr = np.asarray(clients, dtype=np.int64)
        if not self.setup.reduce_in_actor:
            bundle = Uploads(clients_arr, tuple(payloads), np.asarray(weights))
        else:
            dense = [p.to_dense() for p in payloads]
            ok = [i for i, v in enumerate(dense) if np.all(np.isfinite(v))]
            dim = self.model.spec.dim
            rows = (
                np.stack([dense[i] for i in ok])
                if ok
                else np.zeros((0, dim), np.float32)
            )
            bundle = Uploads(
                clients_arr,
                (),
                np.asarray(weights),
                partial=partial_sum(rows, [weights[i] for i in ok]),
                rejected=tuple(
                    int(clients[i]) for i in range(len(clients)) if i not in ok
                ),
            )
        snapshot = {c: dict(v) for c, v in self.state.items() if v}
        return records, bundle, snapshot

    def evaluate(
        self, global_vector: npt.NDArray[np.float32], clients: list[int] | None = None
    ) -> list[dict[str, float]]:
        """Evaluate each client's models on its test (and train) split.

        Returns:
            Per client: ``test_loss``/``test_acc`` of the global model,
            ``eval_train_loss`` (train-split loss of the client's evaluated model:
            the personal one when it has one), and ``personal_loss``/
            ``personal_acc`` when the algorithm keeps personal models.
        """
        rows = []
        for client in self.clients if clients is None else clients:
            x_te, y_te = self.data.test(client)
            x_tr, y_tr = self.data.train(client)
            vectors = self.algorithm.eval_vectors(global_vector, self.state[client])
            loss, acc = evaluate(self.model, vectors["global"], x_te, y_te)
            row = {"client": client, "test_loss": loss, "test_acc": acc}
            main = vectors.get("personal", vectors["global"])
            if "personal" in vectors:
                p_loss, p_acc = evaluate(self.model, vectors["personal"], x_te, y_te)
                row.update(personal_loss=p_loss, personal_acc=p_acc)
            row["eval_train_loss"] = evaluate(self.model, main, x_tr, y_tr)[0]
            rows.append(row)
        return rows

    def reset(self, setup: ActorSetup) -> None:
        """Start a new run on the same data: new setup (seed), empty client state."""
        self.setup = setup
        self.state = {c: {} for c in self.clients}

    def get_state(self) -> dict[int, dict[str, Any]]:
        """Return the per-client state (for checkpoints)."""
        return self.state

    def set_state(self, state: dict[int, dict[str, Any]]) -> None:
        """Restore per-client state saved by :meth:`get_state`."""
        self.state = {c: {} for c in self.clients}
        self.state.update({int(k): dict(v) for k, v in state.items()})

    def ping(self) -> str:
        """Return the node id this actor runs on (placement reports)."""
        return ray.get_runtime_context().get_node_id()


ClientActor = ray.remote(ClientHost)
"""``ClientHost`` as a Ray actor class (``@ray.remote`` once, at module level)."""
