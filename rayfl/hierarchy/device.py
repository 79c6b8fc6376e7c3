"""The device side of the hierarchy: the flat client actor plus one segment call.

:class:`DeviceHost` subclasses :class:`rayfl.actors.client.ClientHost` (same
data, model, algorithm and batch streams) and adds :meth:`train_segment`: run
``steps`` local SGD steps from the edge model w̄_c, then, inside the actor
(trust boundary, DESIGN.md):

    1. clip the accumulated step δ_i = w_i − w̄_c to η·steps·G, so that
       ‖u_i‖ ≤ η τ G as Lemma 3.2's sensitivity needs (spec §2.2);
    2. add N(0, σ_i² I_M) when the device's edge is untrusted (σ_i > 0), from
       (seed, "hier_device_noise", period, device);
    3. pre-reduce the call's uploads into one exact sum (``PartialSum``, so
       results do not depend on how devices are packed into actors).

Implementation details:
    1. Clipping is on the accumulated step, not per sample (spec §2.2 allows
       either: both give ‖u_i‖ ≤ η τ G, hence the same Δ). Per-sample clipping is
       only in the opt-in vectorized trainer, whose rounding depends on packing.
    2. Batches come from (seed, "batch", period, device), as the flat engine's
       rounds: with τ = m and one edge, period k is round k of the flat run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import ray
import torch
import torch.nn.functional as F

from rayfl.actors.client import ClientHost
from rayfl.actors.cloud import REJECT_NON_FINITE
from rayfl.actors.restart import needs_state
from rayfl.learning.aggregate import PartialSum, partial_sum
from rayfl.privacy.clip import clip_by_l2_norm
from rayfl.seeding import rng_for

__all__ = ["DeviceActor", "DeviceHost", "evaluate_devices"]


class DeviceHost(ClientHost):
    """``ClientHost`` with the hierarchy's segment training (see module doc)."""

    @needs_state
    def train_segment(
        self,
        period: int,
        start: npt.NDArray[np.float32],
        clients: list[int],
        lr: float,
        steps: int,
        clip_norm: float | None,
        noise_stds: list[float],
        equal_weights: bool,
    ) -> tuple[list[dict[str, float]], PartialSum | None]:
        """Train ``clients`` for ``steps`` SGD steps from ``start`` and upload.

        Args:
            period: Global aggregation-period index (keys batches and noise).
            start: w̄_c, the edge model, float32 (dim,).
            clients: Devices hosted here, same subnet, ascending.
            lr: η_k.
            steps: SGD steps of this segment.
            clip_norm: Clip of the accumulated step (η·steps·G) or None.
            noise_stds: σ per client (0 in trusted subnets).
            equal_weights: ρ = 1/s_c (True) or by sample count.

        Returns:
            One record per client and the exact sum of the accepted uploads,
            or None when every upload was rejected (non-finite).
        """
        cfg = self.setup.algorithm
        self.algorithm.config = cfg.model_copy(update={"local_steps": int(steps)})
        try:
            records, bundle, _ = self.train(
                period, start, clients, {"lr": [float(lr)] * len(clients)}
            )
        finally:
            self.algorithm.config = cfg
        rows, weights, kept = [], [], []
        for i, (client, payload) in enumerate(
            zip(clients, bundle.payloads, strict=True)
        ):
            vector = payload.to_dense()
            rec = records[i]
            if clip_norm is not None:
                vector, norm = clip_by_l2_norm(vector, clip_norm=float(clip_norm))
                rec["update_norm"] = float(norm)
                rec["clip_scale"] = (
                    float(min(1.0, clip_norm / norm)) if norm > 0 else 1.0
                )
            std = float(noise_stds[i])
            if std > 0:
                rng = rng_for(
                    self.setup.seed, "hier_device_noise", round=period, client=client
                )
                vector = (vector + rng.normal(0.0, std, size=vector.shape)).astype(
                    np.float32
                )
            rec["device_noise_std"] = std
            if not np.all(np.isfinite(vector)):
                rec["rejected"] = REJECT_NON_FINITE
                continue
            rows.append(vector)
            weights.append(1.0 if equal_weights else float(bundle.weights[i]))
            kept.append(client)
        if not rows:
            return records, None
        return records, partial_sum(np.stack(rows), weights)

    def smoothness(
        self,
        before: npt.NDArray[np.float32],
        after: npt.NDArray[np.float32],
        clients: list[int],
        max_samples: int = 512,
    ) -> float:
        """Return max_i ‖∇F_i(after) − ∇F_i(before)‖ / ‖after − before‖ (β̂, spec §3.5).

        Full-batch gradients on up to ``max_samples`` of each client's samples.
        """
        step = float(np.linalg.norm((after - before).astype(np.float64)))
        if step == 0 or not clients:
            return 0.0
        best = 0.0
        for client in clients:
            x, y = self.data.train(client)
            xb = torch.from_numpy(np.asarray(x[:max_samples], dtype=np.float32))
            yb = torch.from_numpy(np.asarray(y[:max_samples], dtype=np.int64))
            grads = []
            for vector in (before, after):
                self.model.load(vector)
                loss = F.cross_entropy(self.model.module(xb), yb)
                g = torch.autograd.grad(loss, self.model.params)
                grads.append(
                    torch.cat([t.reshape(-1) for t in g]).numpy().astype(np.float64)
                )
            best = max(best, float(np.linalg.norm(grads[1] - grads[0])) / step)
        return best


DeviceActor = ray.remote(DeviceHost)
"""``DeviceHost`` as a Ray actor class."""


def evaluate_devices(pool: Any, global_ref: Any) -> list[dict[str, Any]]:
    """Evaluate ``global_ref`` on every device's test split, one row per device by id.

    A host failing during evaluation is restored and retried once; devices still
    missing get NaN scores and ``eval_failed`` (``ActorPool.evaluate_all``).
    """
    return list(
        pool.evaluate_all(
            lambda actor, _: actor.evaluate.remote(global_ref),
            ("test_loss", "test_acc"),
        )
    )
