"""DP-SparFL: local DP-SGD on a random sparsification mask (Wei et al. 2023).

K. Wei et al., "Gradient Sparsification for Efficient Wireless Federated Learning
with Differential Privacy", arXiv:2304.04164 (spec seed_002 §2.3-2.4, Algorithm 1
with the Sec. IV-B modifications, eqs. 7-10, Lemma 1). Each scheduled client i
with sparsification rate s = s_i^t (set by the scheduler through the control
``sparsity``):

1. draws a mask m ~ Bernoulli(s)^abs(w), fixed for the round (§2.3);
2. runs τ DP-SGD steps from w^t: a Poisson batch at rate q_i = abs(b)/abs(D_i);
   per-sample gradients on the kept coordinates ĝ = ∇F(w; x) ⊙ m (eq. 7);
   per-sample clipping at √s·C (eq. 8, Lemma 1); Gaussian noise
   N(0, σ̂²·s·C²) (eq. 9); g = (Σ clipped + noise)/abs(b); w ← w − η·g ⊙ m (eq. 10);
3. uploads Δw = w^{t,τ} − w^t, supported on the mask: the kept float32 values plus
   a abs(w)-bit keep-map, 32·k + abs(w) bits with k ~ Binomial(abs(w), s) (§2.3).

The server sums p_i^t Δw_i with p_i^t = abs(D_i)/Σ_{scheduled} abs(D_k) (eq. 5).

| paper symbol | code name |
|--------------|-----------|
| s_i^t | control / field ``sparsity`` |
| m_i^t | ``mask`` (``ClientUpdate.support`` = its nonzeros) |
| C | ``clip_norm`` |
| σ̂ | ``noise_multiplier`` |
| τ | ``local_steps`` |
| abs(b), q_i | ``batch_size``, ``batch_size / abs(D_i)`` |
| η | ``lr`` |
| Δw_i^t | ``ClientUpdate.vector`` |

Implementation details:
    1. [AMBIG-13] Clip factor min{1, √s·C/‖ĝ‖} (the paper prints it inverted).
    2. [AMBIG-19] Poisson sampling by default (``sampling``), normalising by the
       expected batch abs(b), so the accountant's subsampled-Gaussian analysis
       applies (add/remove-one, Δ = C, q_i = abs(b)/abs(D_i)); ``fixed`` draws
       abs(b) samples without replacement and is accounted with no
       amplification (replace-one, Δ = 2C, q = 1, z = σ̂/2;
       ``rayfl.privacy.sensitivity``).
    3. Noise is drawn for every coordinate and masked, which equals noise on the
       kept coordinates only (eq. 10).
    4. ``clip_mode="original"`` keeps the clip and noise at C (Fig. 2 ablation).
    5. ``rescale=True`` makes the receiver multiply kept values by 1/s, so that
       E[decoded] equals the dense update for a fixed update (the paper sums as
       is, §2.2; default false).
    6. s = 1 uploads a dense payload of 32·abs(w) bits (no keep-map); the
       scheduler's payload model 32·s·abs(w) + abs(w) over-counts it by abs(w).
    7. The mask, the batches and the noise come from three generators spawned
       from the client's round generator (seed, "batch", round, client).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

from rayfl.algorithms.base import Algorithm, ClientContext, ClientUpdate
from rayfl.algorithms.config import SparseDPConfig
from rayfl.learning.models import FlatModel

__all__ = ["SparseDP", "SparseDPConfig", "dp_sparse_sgd", "random_mask"]


def random_mask(dim: int, *, keep: float, rng: np.random.Generator) -> npt.NDArray:
    """Draw the Bernoulli(s) keep-mask m of seed_002 §2.3 (not an exact-k choice).

    Example:
        >>> int(random_mask(5, keep=1.0, rng=np.random.default_rng(0)).sum())
        5
    """
    if not 0.0 < keep <= 1.0:
        raise ValueError(f"sparsity must be in (0, 1], got {keep}")
    if keep >= 1.0:
        return np.ones(dim, dtype=bool)
    return rng.random(dim) < keep


def dp_sparse_sgd(
    model: FlatModel,
    start: npt.NDArray[np.float32],
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.int64],
    *,
    mask: npt.NDArray[np.bool_],
    lr: float,
    batch_size: int,
    steps: int,
    clip_norm: float,
    noise_multiplier: float,
    sampling: str,
    rng: np.random.Generator,
) -> tuple[npt.NDArray[np.float32], float]:
    """Run τ masked DP-SGD steps (seed_002 eqs. 7-10) from ``start``.

    Args:
        model: The actor's flat model (scratch).
        start: w^t, float32 (dim,).
        x: Train inputs (n, ...).
        y: Train labels (n,).
        mask: Keep-mask m, bool (dim,).
        lr: η.
        batch_size: Expected batch abs(b); q = abs(b)/n.
        steps: τ.
        clip_norm: The clip actually applied (√s·C or C).
        noise_multiplier: σ̂; noise std per coordinate σ̂·clip_norm/abs(b).
        sampling: "poisson" or "fixed".
        rng: Generator for batches and noise.

    Returns:
        w^{t,τ} (float32) and the mean per-sample loss over the visited batches.
    """
    n = len(y)
    q = min(1.0, batch_size / n)
    model.load(start)
    keep = torch.from_numpy(np.asarray(mask, dtype=np.float32))
    x_t, y_t = torch.from_numpy(np.asarray(x)), torch.from_numpy(np.asarray(y))
    noise_std = noise_multiplier * clip_norm
    total, seen = 0.0, 0
    for _ in range(steps):
        if sampling == "poisson":
            idx = np.flatnonzero(rng.random(n) < q)
        else:
            idx = rng.choice(n, size=min(batch_size, n), replace=False)
        g = torch.zeros_like(model.flat)
        for j in idx.tolist():  # per-sample gradients (a loop beats vmap at |b| ~ 4)
            loss = F.cross_entropy(model.module(x_t[j : j + 1]), y_t[j : j + 1])
            grads = torch.autograd.grad(loss, model.params)
            flat = torch.cat([p.reshape(-1) for p in grads]) * keep  # eq. 7
            scale = min(1.0, clip_norm / max(float(flat.norm()), 1e-12))  # eq. 8
            g.add_(flat, alpha=scale)
            total += float(loss.detach())
            seen += 1
        noise = torch.from_numpy(rng.normal(0.0, noise_std, size=g.shape[0]))
        g = (g + noise.to(torch.float32)) / batch_size  # eq. 9
        with torch.no_grad():
            model.flat.sub_(lr * g * keep)  # eq. 10
    return model.vector(), total / max(seen, 1)


class SparseDP(Algorithm):
    """DP-SparFL client: masked local DP-SGD, sparse upload (seed_002 §2.4).

    Args:
        config: The ``algorithm`` section (:class:`SparseDPConfig`).
    """

    controls: ClassVar[dict[str, tuple[float, float]]] = {"sparsity": (0.0, 1.0)}

    def client_update(self, ctx: ClientContext) -> ClientUpdate:
        """Train with DP-SGD on this round's mask and return the sparse Δw."""
        cfg: SparseDPConfig = self.config  # type: ignore[assignment]
        s = float(ctx.controls.get("sparsity", cfg.sparsity))
        if not 0.0 < s <= 1.0:
            raise ValueError(
                f"client {ctx.client}: sparsity must be in (0, 1], got {s}"
            )
        mask_rng, train_rng = ctx.rng.spawn(2)
        dim = len(ctx.global_vector)
        mask = random_mask(dim, keep=s, rng=mask_rng)
        clip = cfg.clip_norm * (math.sqrt(s) if cfg.clip_mode == "adjusted" else 1.0)
        vector, loss = dp_sparse_sgd(
            ctx.model,
            ctx.global_vector,
            ctx.x_train,
            ctx.y_train,
            mask=mask,
            lr=cfg.lr,
            batch_size=cfg.batch_size,
            steps=int(cfg.local_steps or 1),
            clip_norm=clip,
            noise_multiplier=cfg.noise_multiplier,
            sampling=cfg.sampling,
            rng=train_rng,
        )
        delta = (vector - ctx.global_vector).astype(np.float32)
        support = None if s >= 1.0 else np.flatnonzero(mask).astype(np.int32)
        return ClientUpdate(
            delta,
            float(len(ctx.y_train)),
            {
                "train_loss": loss,
                "steps": float(cfg.local_steps or 1),
                "sparsity": s,
                "kept_fraction": float(mask.mean()),
            },
            support=support,
            scale=1.0 / s if cfg.rescale and support is not None else 1.0,
        )
