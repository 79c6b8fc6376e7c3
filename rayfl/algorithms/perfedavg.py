"""Per-FedAvg, first-order MAML variant (Fallah et al., NeurIPS 2020).

"Personalized Federated Learning with Theoretical Guarantees: A Model-Agnostic
Meta-Learning Approach", Algorithm 1 with the Hessian term dropped.

Client n minimises the MAML objective F_n(w − α∇F_n(w)). Each local step s takes
two independent mini-batches D and D′ and sets (Alg. 1 lines 6-8, FO):

    w′ = w − α ∇f_n(w; D)                  (temporary adapted model)
    w  ← w − β ∇f_n(w′; D′)                (meta step, gradient taken at w′)

After the local steps client n uploads Δ_n = w − ω^t and the server averages as
FedAvg: ω^{t+1} = ω^t + Σ_n p_n Δ_n. The personalized model of client n is ω
adapted by one step on its own data, ω − α∇f_n(ω; D) (the paper's evaluation).

Limit: as α → 0, w′ = w and every step is w ← w − β∇f_n(w; D′) on FedAvg's own
batch sequence: FedAvg with learning rate β (the D batches come from a separate
stream, detail 2).

| paper symbol | code name |
|--------------|-----------|
| ω^t | ``ctx.global_vector`` |
| α | ``lr`` (control ``lr``) |
| β | ``beta`` |
| D, D′ | inner / outer mini-batches of size ``batch_size`` |
| τ (local steps) | ``local_steps`` / ``local_epochs`` (outer batches) |
| p_n | aggregation weight (train size) |

Implementation details:
    1. First-order only (PFLlib ``clientperavg``); the Hessian-free variant is
       not implemented.
    2. The outer batches D′ follow FedAvg's order (``batch_indices`` from the
       round's generator, so ``local_epochs=E`` is E passes of outer batches);
       the inner batches D are drawn the same way from a generator *spawned*
       from the round's one, which leaves the round's stream untouched.
    3. The meta step applies the gradient at w′ to w, as the paper writes it
       (PFLlib applies it to w′ in place).
    4. The upload is the update Δ_n (as FedAvg), so DP clips the update.
    5. Personalized evaluation (``eval_steps`` = 1): one SGD step of size α on a
       train mini-batch of size B from the latest ω, drawn from the
       ``eval_adapt`` generator keyed by the client's number of local updates;
       PFLlib's ``train_one_step`` adapts on a *test* batch, which we avoid.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.algorithms.base import Algorithm, ClientContext, ClientUpdate
from rayfl.algorithms.config import PerFedAvgConfig
from rayfl.algorithms.pfl_common import batch_gradient, model_update, to_tensor
from rayfl.learning.models import FlatModel
from rayfl.learning.train import iterate_batches

__all__ = ["PerFedAvg", "perfedavg_adapt", "perfedavg_local"]


def perfedavg_local(
    model: FlatModel,
    start: npt.NDArray[np.float32],
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.int64],
    *,
    alpha: float,
    beta: float,
    batch_size: int,
    local_epochs: int = 1,
    local_steps: int | None = None,
    rng: np.random.Generator,
) -> tuple[npt.NDArray[np.float32], float, int]:
    """Run first-order Per-FedAvg local steps from ``start``.

    Args:
        model: A flat model (scratch).
        start: ω^t, float32 (dim,).
        x: Train inputs.
        y: Train labels.
        alpha: α ≥ 0 (inner step).
        beta: β > 0 (meta step).
        batch_size: Size of D and D′.
        local_epochs: Epochs of outer batches (ignored when ``local_steps``).
        local_steps: Number of meta steps τ.
        rng: Order of the outer batches D′; the inner batches D draw from a
            generator spawned from it.

    Returns:
        (w after τ meta steps, mean outer-batch loss at w′, τ).
    """
    kwargs: dict[str, Any] = {
        "batch_size": batch_size,
        "local_epochs": local_epochs,
        "local_steps": local_steps,
    }
    outer = list(iterate_batches(x, y, rng=rng, **kwargs))
    inner = iterate_batches(x, y, rng=rng.spawn(1)[0], **kwargs)
    w = to_tensor(start)
    total = 0.0
    for (xo, yo), (xi, yi) in zip(outer, inner, strict=False):
        if alpha > 0.0:
            g_in, _ = batch_gradient(model, w, xi, yi)
            w_adapted = w - alpha * g_in
        else:
            w_adapted = w
        g_out, loss = batch_gradient(model, w_adapted, xo, yo)
        w = w - beta * g_out
        total += loss
    return w.numpy(), total / max(len(outer), 1), len(outer)


def perfedavg_adapt(
    model: FlatModel,
    start: npt.NDArray[np.float32],
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.int64],
    *,
    alpha: float,
    batch_size: int,
    steps: int,
    rng: np.random.Generator,
) -> npt.NDArray[np.float32]:
    """Return ``start`` after ``steps`` SGD steps of size α (the personalization).

    Args:
        model: A flat model (scratch).
        start: The meta model ω, float32 (dim,).
        x: Train inputs.
        y: Train labels.
        alpha: α.
        batch_size: B.
        steps: Number of adaptation steps (0 returns ``start``).
        rng: Batch-order generator.
    """
    w = to_tensor(start)
    if steps == 0 or len(y) == 0:
        return w.numpy()
    for xb, yb in iterate_batches(
        x, y, batch_size=batch_size, local_epochs=1, local_steps=steps, rng=rng
    ):
        grad, _ = batch_gradient(model, w, xb, yb)
        w = w - alpha * grad
    return w.numpy()


class PerFedAvg(Algorithm):
    """Per-FedAvg (FO): MAML local steps, FedAvg server, one-step personalization.

    Args:
        config: The ``algorithm`` section (:class:`PerFedAvgConfig`).
    """

    def client_update(self, ctx: ClientContext) -> ClientUpdate:
        """Run τ FO-MAML steps from ω^t and upload Δ = w − ω^t."""
        cfg: PerFedAvgConfig = self.config  # type: ignore[assignment]
        w, loss, steps = perfedavg_local(
            ctx.model,
            ctx.global_vector,
            ctx.x_train,
            ctx.y_train,
            alpha=float(ctx.controls.get("lr", cfg.lr)),
            beta=cfg.beta,
            batch_size=cfg.batch_size,
            local_epochs=cfg.local_epochs,
            local_steps=cfg.local_steps,
            rng=ctx.rng,
        )
        return model_update(
            w - ctx.global_vector,
            len(ctx.y_train),
            {"train_loss": loss, "steps": steps},
        )

    def eval_vectors_for(
        self, ctx: ClientContext
    ) -> dict[str, npt.NDArray[np.float32]]:
        """Return ω and ω adapted by ``eval_steps`` SGD steps on the train split."""
        cfg: PerFedAvgConfig = self.config  # type: ignore[assignment]
        personal = perfedavg_adapt(
            ctx.model,
            ctx.global_vector,
            ctx.x_train,
            ctx.y_train,
            alpha=cfg.lr,
            batch_size=cfg.batch_size,
            steps=cfg.eval_steps,
            rng=ctx.rng,
        )
        return {"global": ctx.global_vector, "personal": personal}
