"""Ditto and DP-Ditto: a global FL model plus one personalized model per client.

Ditto (Li et al., ICML 2021) in the parametrisation of DP-Ditto (Zhao et al.,
"Convergence-Privacy-Fairness Trade-Off in Personalized Federated Learning",
spec seed_001). Each round t, every scheduled client n receives ω^t and

1. trains an FL local model from it (Alg. 1 lines 4-5):
   u_n^{t+1} = ω^t − η_G ∇F_n(ω^t)  (or E epochs of mini-batch SGD);
2. uploads u_n^{t+1}; the engine's uplink clips it, u ← u / max(1, ‖u‖₂/C)
   (eq. 5), and adds z_n ~ N(0, σ_u² I_d) with σ_u = Δs·√(2TN ln(1/δ))/(εN),
   Δs = 2C/|D_n| (eqs. 6-8; ``privacy.calibration: dp_ditto``);
3. updates its persistent personalized (PL) model with the gradient of the PL
   objective f_n(ϖ; ω^t) = (1 − λ/2) F_n(ϖ) + (λ/2)‖ϖ − ω^t‖² (eq. 3a):
   ϖ_n^{t+1} = ϖ_n^t − η_L [(1 − λ/2) ∇F_n(ϖ_n^t) + λ (ϖ_n^t − ω^t)]  (Alg. 1 line 10).

The server sets ω^{t+1} = (1/N) Σ_n ũ_n^{t+1} (Alg. 1 line 13). λ = 0 is pure
local training (ϖ ignores ω and the DP noise); λ = 2 removes personalization: the
PL objective is ‖ϖ − ω^t‖², so ϖ is pulled onto the global model
(ϖ ← ω^t − (1 − 2η_L)^S (ϖ − ω^t) after S steps; exactly ω^t when η_L = 1/2), and
the global model is FedAvg's for every λ.

| paper symbol | code name |
|--------------|-----------|
| ω^t (ω~^t, noisy) | ``ctx.global_vector`` |
| u_n^{t+1} | upload ``ClientUpdate.vector`` |
| ϖ_n^t | ``ctx.state["personal"]`` (float32, never uploaded) |
| λ ∈ [0, 2] | ``lam`` (control ``lam``) |
| η_G | ``lr`` (control ``lr``) |
| η_L | ``personal_lr`` (control ``personal_lr``) |
| E, S (FL model) | ``local_epochs``, ``local_steps`` |
| E, S (PL model) | ``personal_epochs``, ``personal_steps`` |
| B | ``batch_size`` |
| C, σ_u, ε, δ | ``privacy.clip_norm``, noise std, ``privacy.epsilon``, ``privacy.delta`` |
| p_n | aggregation weight (``aggregation``) |

Implementation details:
    1. [AMBIG-1] ``local_mode="epochs"`` (default): E epochs of mini-batch SGD with
       batch B for both models, the PL rule applied per mini-batch with ω^t held
       fixed (PFLlib ``train``/``ptrain``); ``"paper_gd_step"``: one full-batch
       gradient step per model per round, as Algorithm 1 is printed.
    2. [AMBIG-5] The upload is the clipped *model* (``clip_target="model"``, eq. 5):
       ``uploads_delta`` is False and the server averages models. ``"update"``
       uploads Δ = u − ω^t instead (DP-FedAvg style), same server result without
       clipping.
    3. [AMBIG-2] ϖ_n is initialised to the global model the client receives the
       first time it is scheduled: ω^0 under full participation, as the spec's
       ϖ_n^0 = ω^0 (PFLlib ``model_per = deepcopy(model)``). Before that,
       ``eval_vectors`` reports the global model as the personal one.
    4. Order inside a round: the FL model's batches are drawn first from the
       round's generator, then the PL model's. Both use ω^t, so the order does not
       change the maths (spec §3); drawing FL first makes the global trajectory
       identical to FedAvg's for every λ and PL setting.
    5. [AMBIG-20] ``aggregation="uniform"`` (default) gives every upload weight 1:
       the paper's p_n = 1/N; ``"data_weighted"`` weights by |D_n|.
    6. [AMBIG-18] The engine evaluates after the round, i.e. ϖ_n^{t+1} and
       ω^{t+1}; PFLlib's row for round t + 1 (evaluated before training) holds
       the same models.
    7. Only scheduled clients update ϖ_n (seed 001 has full participation).
    8. The PL step is the simultaneous gradient of f_n at ϖ_k (both terms at the
       same point), not FedProx's gradient-then-proximal split of
       ``rayfl.learning.train.local_sgd``.
    9. ``trainer`` selects the FL step as in FedAvg (``autograd`` or the fast
       MLR/MLP step; ``vectorized`` trains clients one by one with the fast step).
       The PL step always uses torch autograd.
    10. "Training loss of the PL model" has three readings; all are logged per
        client and round. ``eval_train_loss`` is F_n(ϖ_n), the plain
        cross-entropy. ``eval_train_reg_loss`` adds PFLlib Ditto's regulariser
        (λ/2)·‖ω − ϖ_n‖₂ (unsquared; ``train_metrics_personalized``, which the
        WPFL and DP-Ditto authors' PFLlib-based code most likely reports).
        ``eval_train_pl_objective`` is eq. 3a's f_n. The Jain indices of each are
        ``jain_train_loss``, ``jain_train_reg_loss``, ``jain_train_pl_objective``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

from rayfl.algorithms.base import Algorithm, ClientContext, ClientUpdate
from rayfl.algorithms.config import DittoConfig
from rayfl.algorithms.pfl_common import local_train
from rayfl.learning.models import FlatModel
from rayfl.learning.train import LocalTrainResult, iterate_batches

__all__ = ["Ditto", "DittoConfig", "personal_sgd", "record_pl_gap"]


def record_pl_gap(
    state: Any,
    personal: npt.NDArray[np.float32],
    center: npt.NDArray[np.float32],
    lam: float,
) -> None:
    """Keep ‖ϖ_n − ω‖₂ and λ of the latest PL step for the objective metrics.

    :meth:`Ditto.eval_train_objectives` turns them into the regularised PL
    training losses at evaluation time.

    Args:
        state: The client's state mapping.
        personal: ϖ_n after the step.
        center: The ω the step was pulled towards (the received broadcast).
        lam: The λ of the step.
    """
    gap = np.asarray(personal, dtype=np.float64) - np.asarray(center, dtype=np.float64)
    state["pl_gap"] = float(np.linalg.norm(gap))
    state["pl_lam"] = float(lam)


def personal_sgd(
    model: FlatModel,
    start: npt.NDArray[np.float32],
    center: npt.NDArray[np.float32],
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.int64],
    *,
    lr: float,
    lam: float,
    batch_size: int,
    local_epochs: int = 1,
    local_steps: int | None = None,
    rng: np.random.Generator,
) -> LocalTrainResult:
    """Run Ditto's PL update from ``start`` (Alg. 1 line 10 of seed 001).

    Each mini-batch step is ϖ ← ϖ − η_L [(1 − λ/2) ∇F_B(ϖ) + λ (ϖ − ω)], the
    gradient of (1 − λ/2) F_B(ϖ) + (λ/2)‖ϖ − ω‖² (eq. 3a) at the current ϖ.

    Args:
        model: The actor's flat model (its parameters are overwritten).
        start: ϖ_n^t, float32 (dim,).
        center: ω^t, the received global model, float32 (dim,).
        x: Train inputs, float32 (n, *input_shape).
        y: Train labels, int64 (n,).
        lr: η_L > 0.
        lam: λ in [0, 2].
        batch_size: Mini-batch size B.
        local_epochs: Epochs E.
        local_steps: Steps S (overrides epochs when set).
        rng: Source of the batch order.

    Returns:
        ϖ_n^{t+1}, the mean mini-batch cross-entropy F_B at the visited points,
        and the step count.

    Raises:
        ValueError: If λ is outside [0, 2].
    """
    if not 0.0 <= lam <= 2.0:
        raise ValueError(f"algorithm.lam must be in [0, 2], got {lam}")
    model.load(start)
    omega = torch.from_numpy(np.array(center, dtype=np.float32).reshape(-1))
    loss_weight = 1.0 - lam / 2.0
    params = model.params
    total = torch.zeros((), dtype=torch.float64)
    steps = 0
    for xb, yb in iterate_batches(
        x,
        y,
        batch_size=batch_size,
        local_epochs=local_epochs,
        local_steps=local_steps,
        rng=rng,
    ):
        if loss_weight > 0.0:
            loss = F.cross_entropy(model.module(xb), yb)
            grads = torch.autograd.grad(loss, params)
        else:  # λ = 2: the loss term has weight 0; only report it
            with torch.no_grad():
                loss = F.cross_entropy(model.module(xb), yb)
        with torch.no_grad():
            pull = model.flat - omega  # ϖ_k − ω, taken before the step
            if loss_weight > 0.0:
                torch._foreach_add_(params, grads, alpha=-lr * loss_weight)
            if lam > 0.0:
                model.flat.sub_(pull, alpha=lr * lam)
        total += loss.detach()
        steps += 1
    return LocalTrainResult(model.vector(), float(total) / max(steps, 1), steps)


class Ditto(Algorithm):
    """Ditto / DP-Ditto: FL local model uploaded, PL model kept in the client.

    Args:
        config: The ``algorithm`` section (:class:`DittoConfig`).
    """

    keeps_personal: ClassVar[bool] = True
    controls: ClassVar[dict[str, tuple[float, float]]] = {
        "lr": (0.0, 1.0),
        "personal_lr": (0.0, 1.0),
        "lam": (0.0, 2.0),
    }

    def client_update(self, ctx: ClientContext) -> ClientUpdate:
        """Train u_n from ω^t (uploaded) and ϖ_n towards ω^t (kept in the state)."""
        cfg: DittoConfig = self.config  # type: ignore[assignment]
        work = self._batching(ctx, cfg.local_epochs, cfg.local_steps)
        fl = local_train(ctx, cfg, ctx.global_vector, **work)
        pl = self.personal_step(ctx, ctx.global_vector)
        vector = fl.vector - ctx.global_vector if self.uploads_delta else fl.vector
        weight = float(len(ctx.y_train)) if cfg.aggregation == "data_weighted" else 1.0
        return ClientUpdate(
            vector.astype(np.float32),
            weight,
            {
                "train_loss": fl.train_loss,
                "steps": float(fl.steps),
                "personal_train_loss": pl.train_loss,
                "personal_steps": float(pl.steps),
            },
        )

    def personal_step(
        self, ctx: ClientContext, center: npt.NDArray[np.float32]
    ) -> LocalTrainResult:
        """Run the PL update towards ``center`` and keep ϖ_n (and its gap) in the state.

        Local work as configured (one full-batch step in ``paper_gd_step`` mode),
        η_L and λ from the client's controls or the config; ϖ_n starts at
        ``center`` the first time (detail 3).

        Args:
            ctx: The client's context (data, model, state, controls, generator).
            center: ω, the model the step is pulled towards.

        Returns:
            The PL step's result (ϖ_n^{t+1}, its mean batch loss and step count).
        """
        cfg: DittoConfig = self.config  # type: ignore[assignment]
        start = ctx.state.get("personal")
        if start is None:
            start = np.array(center, dtype=np.float32)
        lam = float(ctx.controls.get("lam", cfg.lam))
        pl = personal_sgd(
            ctx.model,
            start,
            center,
            ctx.x_train,
            ctx.y_train,
            lr=float(ctx.controls.get("personal_lr", cfg.personal_lr)),
            lam=lam,
            rng=ctx.rng,
            **self._batching(ctx, cfg.personal_epochs, cfg.personal_steps),
        )
        ctx.state["personal"] = pl.vector  # a fresh array, never uploaded
        record_pl_gap(ctx.state, pl.vector, center, lam)
        return pl

    def _batching(
        self, ctx: ClientContext, epochs: int, steps: int | None
    ) -> dict[str, Any]:
        """Return B, E and S of one model's run: one full-batch step in paper mode."""
        if self.config.local_mode == "paper_gd_step":  # type: ignore[attr-defined]
            return {"batch_size": len(ctx.y_train), "local_epochs": 1, "local_steps": 1}
        return {
            "batch_size": self.config.batch_size,
            "local_epochs": epochs,
            "local_steps": steps,
        }

    def eval_train_objectives(
        self, train_loss: float, state: Mapping[str, Any]
    ) -> dict[str, float]:
        """Return the PL model's regularised training losses (detail 10).

        With g = ‖ϖ_n − ω‖₂ from the client's latest PL step (ω: the model that
        step was pulled towards, a WPFL client's received broadcast) and its λ:

        - ``eval_train_reg_loss`` = F_n(ϖ_n) + (λ/2)·g, PFLlib Ditto's
          ``train_metrics_personalized`` (its ``0.5 * mu * torch.norm(gm - pm)``,
          an unsquared norm);
        - ``eval_train_pl_objective`` = (1 − λ/2)·F_n(ϖ_n) + (λ/2)·g², the PL
          objective f_n of eq. 3a that the step descends.

        Args:
            train_loss: F_n(ϖ_n), the mean cross-entropy on the train split.
            state: The client's state.

        Returns:
            Both values, or an empty dict before the client's first PL step.
        """
        if "pl_gap" not in state:
            return {}
        gap, lam = float(state["pl_gap"]), float(state["pl_lam"])
        return {
            "eval_train_reg_loss": train_loss + 0.5 * lam * gap,
            "eval_train_pl_objective": (1.0 - lam / 2.0) * train_loss
            + 0.5 * lam * gap * gap,
        }
