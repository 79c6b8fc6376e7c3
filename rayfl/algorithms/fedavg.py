"""FedAvg (McMahan et al. 2017, Algorithm 1).

Client n runs E local epochs of SGD from ω^t and uploads Δ_n = u_n − ω^t; the
server sets ω^{t+1} = ω^t + Σ_n (|D_n| / Σ_j |D_j|) Δ_n over the updates that
arrived (sample-size weighted, as in the paper's n_k/n).

| paper symbol | code name |
|--------------|-----------|
| ω^t | ``global_vector`` |
| u_n | ``LocalTrainResult.vector`` |
| n_k | ``weight`` (train samples) |

Implementation details:
    1. The upload is the delta, not the model, so DP clipping bounds the update's
       sensitivity (as in DP-FedAvg, McMahan et al. 2018).
    2. Only updates that arrived are averaged, renormalising their weights
       (packet loss, dropped clients).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rayfl.algorithms.base import Algorithm, ClientContext, ClientUpdate

if TYPE_CHECKING:  # the trainers import torch: only client hosts need them
    from rayfl.learning.train import LocalTrainResult

__all__ = ["FedAvg"]


class FedAvg(Algorithm):
    """FedAvg with optional per-client learning-rate control (``controls['lr']``)."""

    prox_weight: float = 0.0

    def client_update(self, ctx: ClientContext) -> ClientUpdate:
        """Run local SGD from ω^t and return Δ = u − ω^t."""
        from rayfl.algorithms.pfl_common import local_train

        if self._auto_vectorized(ctx):
            return self._train_many([ctx])[0]
        result = local_train(
            ctx, self.config, ctx.global_vector, prox_weight=self.prox_weight
        )
        return self._update(ctx, result)

    def client_update_many(self, contexts: list[ClientContext]) -> list[ClientUpdate]:
        """Train the actor's clients at once (``vectorized``, or ``auto`` on MLR/MLP).

        ``auto`` vectorizes every client of a built-in MLR/MLP with B ≤ 64, even
        one alone in its actor, so that results never depend on the packing
        (Implementation details 9 of :mod:`rayfl.learning.vectorized`).
        """
        if contexts and (
            self._auto_vectorized(contexts[0])
            or (self.config.trainer == "vectorized" and len(contexts) >= 2)
        ):
            return self._train_many(contexts)
        return [self.client_update(ctx) for ctx in contexts]

    def _auto_vectorized(self, ctx: ClientContext) -> bool:
        from rayfl.learning.vectorized import auto_vectorizes

        cfg = self.config
        return cfg.trainer == "auto" and auto_vectorizes(ctx.model, cfg.batch_size)

    def _train_many(self, contexts: list[ClientContext]) -> list[ClientUpdate]:
        from rayfl.learning.vectorized import local_sgd_many

        cfg = self.config
        results = local_sgd_many(
            contexts[0].model,
            np.stack([c.global_vector for c in contexts]),
            [(c.x_train, c.y_train) for c in contexts],
            lr=[float(c.controls.get("lr", cfg.lr)) for c in contexts],
            batch_size=cfg.batch_size,
            local_epochs=cfg.local_epochs,
            local_steps=cfg.local_steps,
            rngs=[c.rng for c in contexts],
            prox_weight=self.prox_weight,
            slot=self._slot(contexts),
        )
        return [self._update(c, r) for c, r in zip(contexts, results, strict=True)]

    def _slot(self, contexts: list[ClientContext]) -> int | None:
        """Run-level batch slot, so a client's rounding ignores its stack partners."""
        largest = contexts[0].max_train_size
        if largest is None or not all(c.max_train_size == largest for c in contexts):
            return None
        return max(1, min(self.config.batch_size, largest))

    @staticmethod
    def _update(ctx: ClientContext, result: LocalTrainResult) -> ClientUpdate:
        delta = result.vector - ctx.global_vector
        return ClientUpdate(
            delta,
            float(len(ctx.y_train)),
            {"train_loss": result.train_loss, "steps": float(result.steps)},
        )
