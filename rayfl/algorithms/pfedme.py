"""pFedMe: personalization by Moreau envelopes (Dinh et al., NeurIPS 2020).

"Personalized Federated Learning with Moreau Envelopes", Algorithm 1.

Client n keeps a local model w_n and a personalized model θ_n. The personalized
model solves the Moreau envelope of F_n at w_n (eq. 3),

    θ̂_n(w_n) = argmin_θ  f_n(θ) + (λ/2)‖θ − w_n‖²,

approximately: on each local round r it samples a mini-batch D and takes K
gradient steps on θ (warm-started), then moves w_n towards it (Alg. 1 lines 7-8):

    θ ← θ − η_p [∇f_n(θ; D) + λ (θ − w_n)]            (K times)
    w_n ← w_n − η λ (w_n − θ)

Each round starts from w_n = θ = ω^t; after R local rounds client n uploads w_n and
the server sets ω^{t+1} = (1 − β) ω^t + β Σ_n p_n w_n (Alg. 1 line 11).

Limit: with K = 1 and R = 1 (``inner_steps=1, local_steps=1``) the inner step
is θ = ω − η_p ∇f(ω; D) and w = ω − η λ η_p ∇f(ω; D): FedAvg with one local step
of size η·λ·η_p (β = 1). λ = 0 leaves w_n = ω (no learning at all).

| paper symbol | code name |
|--------------|-----------|
| ω^t | ``ctx.global_vector`` |
| w_n | upload (``clip_target="model"``) |
| θ_n | ``ctx.state["personal"]`` (evaluated as ``personal``) |
| λ | ``lam`` |
| η | ``lr`` (control ``lr``) |
| η_p (personal learning rate) | ``personal_lr`` |
| K | ``inner_steps`` |
| R (local rounds), batch size | ``local_steps`` / ``local_epochs``, ``batch_size`` |
| β | ``beta`` |
| p_n | aggregation weight (train size) |

Implementation details:
    1. Each local round uses one mini-batch (``batch_indices`` order from the
       round's generator), so ``local_epochs=E`` means E passes of mini-batches;
       the K inner steps reuse that batch (PFLlib ``clientpFedMe``).
    2. θ is warm-started from the previous local round's θ and starts the round
       at ω^t, as PFLlib (``set_parameters`` sets both models to ω).
    3. The upload is the local model w_n (``clip_target="model"``, spec seed_000
       §5.3: "pFedMe uploads the model"); ``"update"`` uploads w_n − ω^t. The DP
       stage clips and noises whichever is uploaded.
    4. The personalized model evaluated is the last θ of the client's latest
       round; before its first round, ω.
    5. Server weights p_n ∝ |D_n| over the uploads that arrived (PFLlib).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import numpy.typing as npt

from rayfl.algorithms.base import Algorithm, ClientContext, ClientUpdate
from rayfl.algorithms.config import PFedMeConfig
from rayfl.algorithms.pfl_common import (
    batch_gradient,
    local_work,
    model_update,
    to_tensor,
)
from rayfl.learning.aggregate import PartialSum
from rayfl.learning.models import FlatModel
from rayfl.learning.train import iterate_batches

__all__ = ["PFedMe", "pfedme_local"]


def pfedme_local(
    model: FlatModel,
    start: npt.NDArray[np.float32],
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.int64],
    *,
    lr: float,
    personal_lr: float,
    lam: float,
    inner_steps: int,
    batch_size: int,
    local_epochs: int = 1,
    local_steps: int | None = None,
    rng: np.random.Generator,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], float, int]:
    """Run pFedMe's local rounds from w = θ = ``start``.

    Args:
        model: The actor's flat model (scratch).
        start: ω^t, float32 (dim,).
        x: Train inputs.
        y: Train labels.
        lr: η.
        personal_lr: η_p.
        lam: λ ≥ 0.
        inner_steps: K ≥ 1.
        batch_size: |D|.
        local_epochs: Epochs of mini-batches (ignored when ``local_steps``).
        local_steps: R, the number of local rounds.
        rng: Batch-order generator.

    Returns:
        (w_n, θ_n, mean inner-step batch loss, R).
    """
    w = to_tensor(start)
    theta = w.clone()
    total, count, rounds = 0.0, 0, 0
    for xb, yb in iterate_batches(
        x,
        y,
        batch_size=batch_size,
        local_epochs=local_epochs,
        local_steps=local_steps,
        rng=rng,
    ):
        for _ in range(inner_steps):
            grad, loss = batch_gradient(model, theta, xb, yb)
            theta = theta - personal_lr * (grad + lam * (theta - w))
            total += loss
            count += 1
        w = w - lr * lam * (w - theta)
        rounds += 1
    return w.numpy(), theta.numpy(), total / max(count, 1), rounds


class PFedMe(Algorithm):
    """pFedMe: local model uploaded, Moreau-envelope personalized model kept.

    Args:
        config: The ``algorithm`` section (:class:`PFedMeConfig`).
    """

    keeps_personal: ClassVar[bool] = True

    def client_update(self, ctx: ClientContext) -> ClientUpdate:
        """Run R local rounds; keep θ_n, upload w_n (or w_n − ω^t)."""
        cfg: PFedMeConfig = self.config  # type: ignore[assignment]
        w, theta, loss, rounds = pfedme_local(
            ctx.model,
            ctx.global_vector,
            ctx.x_train,
            ctx.y_train,
            personal_lr=cfg.personal_lr,
            lam=cfg.lam,
            inner_steps=cfg.inner_steps,
            **local_work(ctx, cfg),
        )
        ctx.state["personal"] = theta
        upload = w - ctx.global_vector if self.uploads_delta else w
        return model_update(
            upload, len(ctx.y_train), {"train_loss": loss, "steps": rounds}
        )

    def combine(
        self, global_vector: npt.NDArray[np.float32], summed: PartialSum
    ) -> npt.NDArray[np.float32]:
        """Return ω^{t+1} = (1 − β) ω^t + β mean(w_n) (= ω^t + β mean(Δ_n))."""
        beta = self.config.beta  # type: ignore[attr-defined]
        if summed.count == 0 or (beta == 1.0 and not self.uploads_delta):
            return super().combine(global_vector, summed)
        mean = summed.mean().astype(np.float64)
        omega = np.asarray(global_vector, dtype=np.float64)
        if self.uploads_delta:
            return (omega + beta * mean).astype(np.float32)
        return ((1.0 - beta) * omega + beta * mean).astype(np.float32)
