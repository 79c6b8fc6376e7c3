"""APPLE: core models mixed by learned relationship vectors (Luo & Wu, IJCAI 2022).

"Adapt to Adaptation: Learning Personalization for Cross-Silo Federated Learning".

Every client n holds a core model c_n and a directed relationship vector
p_n ∈ R^N. Its personalized model mixes all clients' core models,

    θ_n = Σ_j p_{n,j} c_j,

where the other clients' cores c_j (j ≠ n) are downloaded from the server at the
start of the round and held fixed. On each mini-batch client n descends the loss
L_n(θ_n) + (λ(t) μ / 2) ‖p_n − p⁰‖² in both its own core and p_n:

    c_n ← c_n − η N p_{n,n} ∇_θ L_n(θ_n)
    p_{n,j} ← p_{n,j} − η₂ ( ∂L_n/∂p_{n,j} + λ(t) μ (p_{n,j} − p⁰_j) )

with ∂L_n/∂p_{n,j} = ⟨∇_θ L_n(θ_n), c_j⟩ and the cosine schedule
λ(t) = (cos(tπ / L_R) + 1)/2 for t < L_R = ⌊L·T⌋, 0 afterwards. Client n then
uploads c_n; the server keeps every client's latest core and sends them all to
the next scheduled clients.

Limit: η₂ = 0 (``dr_lr=0``) freezes p_n = 1/N, so θ_n = mean_j c_j; with one
local step and full participation every client computes the gradient at the same
θ = mean_j c_j and the mean core moves by −η mean_n ∇L_n(θ): FedAvg with one
local step and uniform weights (equal-size clients).

| paper symbol | code name |
|--------------|-----------|
| c_n | ``ctx.state["core"]``; the upload |
| p_n | ``ctx.state["p"]`` (float64, (N,)) |
| p⁰ | n_j / Σ_k n_k (train sizes) (PFLlib), from ``ctx.num_train_all`` |
| θ_n | ``ctx.state["personal"]`` (evaluated as ``personal``) |
| η | ``lr`` (scaled by N, control ``lr``) |
| η₂ | ``dr_lr`` |
| μ | ``mu`` |
| L | ``decay_fraction`` |
| T | the run's ``rounds`` (``ctx.num_rounds``) |

Implementation details:
    1. p_n starts at 1/N (PFLlib ``ps``); p⁰ is the train-size share (PFLlib
       ``serverapple``); c_n starts at ω⁰ (every core does).
    2. ``p_grad="layer_mean"`` (default, PFLlib): ∂L/∂p_j is taken as the mean
       over parameter tensors ℓ of mean(∇_θ L|_ℓ ⊙ c_j|_ℓ), a rescaled chain
       rule that keeps η₂ = 0.01 stable; ``"exact"`` uses ⟨∇_θ L, c_j⟩.
    3. The p-gradient uses the cores before this batch's core step (the
       simultaneous gradient; PFLlib updates c_n first).
    4. λ(t) uses the current round t (PFLlib uses the previous round's value).
    5. Downloads: the N cores in client order (the server's latest uploads, as
       received — DP-noised — and ω⁰ for clients that never uploaded); the own
       row is replaced by the client's exact c_n. One shared array is put in the
       object store; each scheduled client is charged (N − 1)·dim values on the
       downlink.
    6. The global model (column ``global``) is the |D_n|-weighted mean of the
       cores that arrived; APPLE does not use it.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import torch

from rayfl.algorithms.base import Algorithm, ClientContext, ClientUpdate, Download
from rayfl.algorithms.config import APPLEConfig
from rayfl.algorithms.pfl_common import batch_gradient, local_work, model_update
from rayfl.learning.models import FlatModel
from rayfl.learning.train import iterate_batches

__all__ = ["APPLE", "apple_lambda", "apple_local"]


def apple_lambda(round: int, num_rounds: int, decay_fraction: float) -> float:
    """Return λ(t) = (cos(tπ/L_R) + 1)/2 for t < L_R = ⌊L·T⌋, else 0.

    Example:
        >>> apple_lambda(0, 10, 1.0), apple_lambda(5, 10, 1.0), apple_lambda(10, 10, 1.0)
        (1.0, 0.5, 0.0)
    """
    horizon = int(decay_fraction * num_rounds)
    if round >= horizon:
        return 0.0
    return (math.cos(round * math.pi / horizon) + 1.0) / 2.0


def _layer_index(model: FlatModel) -> tuple[torch.Tensor, torch.Tensor]:
    """Return the layer sizes (float64) and each parameter's layer index."""
    offsets = list(model.spec.offsets)
    sizes = torch.tensor(np.diff(offsets), dtype=torch.float64)
    layer = torch.repeat_interleave(torch.arange(len(sizes)), sizes.long())
    return sizes, layer


def _mixing_gradient(
    stack: torch.Tensor,
    grad: torch.Tensor,
    *,
    p_grad: str,
    sizes: torch.Tensor,
    layer: torch.Tensor,
) -> torch.Tensor:
    """Return ∂F/∂p_{n,j} per core j: ⟨c_j, ∇F⟩ (``exact``) or its layer mean.

    Args:
        stack: The cores c_1..c_N, (N, dim).
        grad: ∇F(θ_n) of the batch, (dim,).
        p_grad: ``"layer_mean"`` or ``"exact"``.
        sizes: Layer sizes (float64), from :func:`_layer_index`.
        layer: Each parameter's layer index, from :func:`_layer_index`.
    """
    prod = stack.to(torch.float64) * grad.to(torch.float64)[None, :]
    if p_grad == "exact":
        return prod.sum(dim=1)
    per_layer = torch.zeros(stack.shape[0], len(sizes), dtype=torch.float64)
    per_layer.index_add_(1, layer, prod)
    return (per_layer / sizes[None, :]).mean(dim=1)


def apple_local(
    model: FlatModel,
    cores: npt.NDArray[np.float32],
    own: int,
    p: npt.NDArray[np.float64],
    p0: npt.NDArray[np.float64],
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.int64],
    *,
    lr: float,
    dr_lr: float,
    mu: float,
    lam: float,
    p_grad: str,
    batch_size: int,
    local_epochs: int = 1,
    local_steps: int | None = None,
    rng: np.random.Generator,
) -> tuple[
    npt.NDArray[np.float32],
    npt.NDArray[np.float64],
    npt.NDArray[np.float32],
    float,
    int,
]:
    """Run APPLE's local steps on the core stack (own row trained).

    Args:
        model: A flat model (scratch; ``spec.offsets`` for ``layer_mean``).
        cores: c_1..c_N, float32 (N, dim); row ``own`` is the client's c_n.
        own: n, the row of the client's own core.
        p: p_n, (N,).
        p0: p⁰, (N,).
        x: Train inputs.
        y: Train labels.
        lr: η (the core step is η·N·p_{n,n}).
        dr_lr: η₂ ≥ 0.
        mu: μ.
        lam: λ(t).
        p_grad: ``"layer_mean"`` or ``"exact"``.
        batch_size: B.
        local_epochs: Epochs.
        local_steps: Steps (override epochs).
        rng: Batch-order generator.

    Returns:
        (c_n, p_n, θ_n = p_n·C after the last step, mean loss, steps).
    """
    num = cores.shape[0]
    stack = torch.from_numpy(np.array(cores, dtype=np.float32))
    pv = torch.from_numpy(np.array(p, dtype=np.float64))
    p0v = torch.from_numpy(np.array(p0, dtype=np.float64))
    sizes, layer = _layer_index(model)
    total, steps = 0.0, 0
    for xb, yb in iterate_batches(
        x,
        y,
        batch_size=batch_size,
        local_epochs=local_epochs,
        local_steps=local_steps,
        rng=rng,
    ):
        theta = (pv.to(torch.float32) @ stack) if num else stack.sum(0)
        grad, loss = batch_gradient(model, theta, xb, yb)
        new_p = pv
        if dr_lr > 0.0:
            dp = _mixing_gradient(stack, grad, p_grad=p_grad, sizes=sizes, layer=layer)
            new_p = pv - dr_lr * (dp + lam * mu * (pv - p0v))
        stack[own] -= float(lr * num * float(pv[own])) * grad
        pv = new_p
        total += loss
        steps += 1
    theta = pv.to(torch.float32) @ stack
    return (
        stack[own].numpy().copy(),
        pv.numpy().copy(),
        theta.numpy(),
        total / max(steps, 1),
        steps,
    )


class APPLE(Algorithm):
    """APPLE: core models uploaded, all cores downloaded, learned mixing p_n.

    Args:
        config: The ``algorithm`` section (:class:`APPLEConfig`).
    """

    uploads_delta: bool = False
    personalized_downloads: ClassVar[bool] = True
    keeps_personal: ClassVar[bool] = True

    def client_update(self, ctx: ClientContext) -> ClientUpdate:
        """Train c_n and p_n against the downloaded cores; upload c_n."""
        cfg: APPLEConfig = self.config  # type: ignore[assignment]
        if ctx.download is None:
            raise ValueError("APPLE needs the downloaded core models (ctx.download)")
        cores = np.array(ctx.download["cores"], dtype=np.float32)
        num = cores.shape[0]
        n = ctx.client
        if "core" in ctx.state:
            cores[n] = ctx.state["core"]
        p = ctx.state.get("p")
        if p is None:
            p = np.full(num, 1.0 / num)
        sizes = (
            np.asarray(ctx.num_train_all, np.float64)
            if ctx.num_train_all is not None
            else np.ones(num)
        )
        p0 = sizes / sizes.sum()
        core, p_new, theta, loss, steps = apple_local(
            ctx.model,
            cores,
            n,
            p,
            p0,
            ctx.x_train,
            ctx.y_train,
            dr_lr=cfg.dr_lr,
            mu=cfg.mu,
            lam=apple_lambda(ctx.round, max(ctx.num_rounds, 1), cfg.decay_fraction),
            p_grad=cfg.p_grad,
            **local_work(ctx, cfg),
        )
        ctx.state.update(core=core, p=p_new, personal=theta)
        return model_update(
            core,
            len(ctx.y_train),
            {"train_loss": loss, "steps": steps, "p_self": float(p_new[n])},
        )

    def server_downloads(
        self,
        round: int,
        global_vector: npt.NDArray[np.float32],
        store: dict[str, Any],
        clients: list[int],
        num_clients: int,
    ) -> dict[int, Download]:
        """Send every scheduled client the stack of all N cores (detail 5)."""
        init = store.setdefault("init", np.array(global_vector, np.float32))
        uploads: dict[int, Any] = store.get("uploads", {})
        cores = np.stack([uploads.get(j, init) for j in range(num_clients)])
        cores.flags.writeable = False
        data = {"cores": cores}
        size = (num_clients - 1) * len(init)
        return {n: Download(data, size) for n in clients}
