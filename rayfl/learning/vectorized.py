"""Vectorized local training: many clients' local SGD at once, same results.

:func:`local_sgd_many` trains m clients with stacked parameters (m, dim) and gives,
client by client, what :func:`rayfl.learning.train.local_sgd` gives (to float32
rounding): the same batch order (drawn from each client's own rng by
``batch_indices``), the same update η·mean-gradient, then the same proximal step
w ← w − ημ(w − w_c). :func:`fast_local_sgd` is a drop-in ``local_sgd`` with the
hand-written MLR/MLP step. :func:`choose_path` says which of the per-client loop
or the vectorized path is faster for a model and batch shape.

| paper symbol | code name |
|--------------|-----------|
| η_i (per client) | ``lr`` |
| B | ``batch_size`` |
| μ (FedProx), λ (Ditto) | ``prox_weight`` |
| w_c | ``prox_centers`` |
| C (per-sample clipping, DP-SGD) | ``clip_norm`` |

Implementation details:
    1. Ragged runs (clients of different sizes, hence different step counts and
       last-batch sizes) are handled by masking, not grouping: clients are stacked
       by step count (descending), so the clients still training at step s are a
       prefix of the stack (a view, no gather/scatter of parameters); every batch
       slot is padded to the largest batch, with per-row loss weight 1/b_i on real
       rows and 0 on padding. Padding costs ≤ one slot per client and epoch.
    2. Batches are gathered per window of steps (≤ 64 MB of inputs) with one
       ``index_select`` per client and window, not per step.
    3. Per-sample clipping (``clip_norm``) clips the cross-entropy gradient of each
       sample, then averages over the batch (sum / b_i); the proximal step is not
       clipped. No noise is added here (the uplink's DP stage adds it).
    4. Kernels: the built-in MLR/MLP run as explicit ``baddbmm`` with a
       hand-written backward (``kernel="matmul"``); any other module (CNN) runs
       through ``torch.func`` ``vmap(grad_and_value(functional_call))``
       (``kernel="vmap"``). ``kernel="auto"`` picks matmul when it applies: it beat
       vmap everywhere we measured (table below).
    5. ``fast_local_sgd`` is ``local_sgd_many`` with one client and the matmul
       kernel (it falls back to ``local_sgd`` for other modules).
    6. Measured (``.venv/bin/python bench/train_speed.py``; 1 torch thread, random
       Fashion-MNIST-shaped data, 600 samples/client, B = 32, E = 1; ratio = time
       / time of the autograd ``local_sgd`` loop in the same run; the machine was
       shared, so absolute times vary by ~2×, ratios much less):
       MEASUREMENTS
    7. Rule (:func:`choose_path`), from these numbers: RULE
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import torch

from rayfl.learning import vectorized_plan
from rayfl.learning.models import FlatModel
from rayfl.learning.train import LocalTrainResult, batch_indices, local_sgd
from rayfl.learning.vectorized_kernels import (
    MatmulKernel,
    VmapKernel,
    linear_stack_shapes,
)
from rayfl.learning.vectorized_plan import (
    BatchPlan,
    WindowScratch,
    iter_windows,
    plan_batches,
)
from rayfl.learning.vectorized_single import linear_stack_sgd

__all__ = ["choose_path", "fast_local_sgd", "local_sgd_many"]

KERNELS = ("auto", "matmul", "vmap")
_CHUNK_BYTES = 256 << 20
# Window buffers per model, reused across calls: a fresh multi-MB buffer costs its
# first-touch page faults, about as much as the gather that fills it.
_SCRATCH: weakref.WeakKeyDictionary[FlatModel, WindowScratch] = (
    weakref.WeakKeyDictionary()
)


def _chunk_size(dim: int, row_bytes: int, slot: int, *, clip: bool, kernel: str) -> int:
    """Clients per chunk: one step's batch ≤ ``WINDOW_BYTES``, parameters ≲ 256 MB."""
    per_client = 4 * dim * (3 + (slot if clip and kernel == "vmap" else 0))
    by_params = _CHUNK_BYTES // per_client
    by_batch = vectorized_plan.WINDOW_BYTES // max(1, slot * row_bytes)
    return max(1, min(by_params, by_batch))


def local_sgd_many(
    model: FlatModel,
    starts: npt.NDArray[np.float32],
    datasets: Sequence[tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]],
    *,
    lr: float | npt.ArrayLike,
    batch_size: int,
    local_epochs: int = 1,
    local_steps: int | None = None,
    rngs: Sequence[np.random.Generator],
    prox_weight: float = 0.0,
    prox_centers: npt.NDArray[np.float32] | None = None,
    clip_norm: float | None = None,
    kernel: str = "auto",
    max_clients: int | None = None,
) -> list[LocalTrainResult]:
    """Run local mini-batch SGD of m clients at once (vectorized over clients).

    Args:
        model: The actor's flat model; only its module's structure is used.
        starts: Initial flat parameters per client, float32 (m, dim).
        datasets: ``(x, y)`` per client: x float32 (n_i, *input_shape), y int64
            (n_i,); sizes may differ.
        lr: Learning rate η, one for all or one per client (m,).
        batch_size: Mini-batch size B.
        local_epochs: Epochs E.
        local_steps: Steps S (overrides epochs when set).
        rngs: One batch-order generator per client, as given to ``local_sgd``.
        prox_weight: Weight μ of the proximal term (μ/2)‖w − w_c‖²; 0 = none.
        prox_centers: Centres w_c, float32 (m, dim) or (dim,); default ``starts``.
        clip_norm: Per-sample gradient clipping norm C (DP-SGD), or None.
        kernel: ``"auto"``, ``"matmul"`` (built-in MLR/MLP only) or ``"vmap"``.
        max_clients: Clients trained together per chunk; default by memory.

    Returns:
        One result per client, in the order of ``datasets``.

    Raises:
        ValueError: For mismatched shapes, a bad kernel or a non-positive clip norm.

    Example:
        >>> from rayfl.learning.models import build_model
        >>> fm = FlatModel(build_model("mlr", input_shape=(2,), num_classes=2))
        >>> x = np.ones((3, 2), np.float32); y = np.zeros(3, np.int64)
        >>> res = local_sgd_many(fm, np.zeros((2, 6), np.float32), [(x, y)] * 2,
        ...     lr=[0.0, 0.5], batch_size=3, rngs=[np.random.default_rng(0)] * 2)
        >>> [round(r.train_loss, 4) for r in res], res[1].vector[4] > 0
        ([0.6931, 0.6931], np.True_)
    """
    m, dim = len(datasets), model.spec.dim
    starts = np.asarray(starts, dtype=np.float32)
    if starts.shape != (m, dim):
        raise ValueError(f"starts must have shape ({m}, {dim}), got {starts.shape}")
    lrs = np.asarray(lr, dtype=np.float32)
    if lrs.ndim > 1 or lrs.size not in (1, m):
        raise ValueError(f"lr must be a float or have {m} entries, got {lrs.shape}")
    lrs = np.broadcast_to(lrs.reshape(-1), (m,))
    if clip_norm is not None and not clip_norm > 0:
        raise ValueError(f"clip_norm must be > 0 or None, got {clip_norm}")
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(KERNELS)}; got {kernel!r}")
    shapes = linear_stack_shapes(model.module)
    if kernel == "matmul" and shapes is None:
        raise ValueError("kernel='matmul' needs a built-in mlr/mlp module")
    kind = "matmul" if kernel != "vmap" and shapes is not None else "vmap"
    centers = None
    if prox_weight > 0.0:
        c = starts if prox_centers is None else np.asarray(prox_centers, np.float32)
        centers = np.broadcast_to(c, (m, dim))
    plan = plan_batches(
        [len(y) for _, y in datasets],
        batch_size=batch_size,
        local_epochs=local_epochs,
        local_steps=local_steps,
        rngs=rngs,
    )
    row_bytes = 4 * int(np.prod(np.shape(datasets[0][0])[1:])) if m else 4
    chunk = max_clients or _chunk_size(
        dim, row_bytes, plan.slot, clip=clip_norm is not None, kernel=kind
    )
    results: list[LocalTrainResult | None] = [None] * m
    scratch = _SCRATCH.setdefault(model, WindowScratch())
    for c0 in range(0, m, chunk):
        sub = BatchPlan(
            plan.order[c0 : c0 + chunk],
            plan.steps[c0 : c0 + chunk],
            plan.batches[c0 : c0 + chunk],
            plan.slot,
        )
        chunk_starts = torch.from_numpy(starts[sub.order])  # fancy indexing copies
        chunk_centers = (
            None if centers is None else torch.from_numpy(centers[sub.order])
        )
        kern: MatmulKernel | VmapKernel
        if kind == "matmul" and shapes is not None:
            kern = MatmulKernel(model.spec, chunk_starts, shapes, chunk_centers)
        else:
            kern = VmapKernel(model.module, model.spec, chunk_starts, chunk_centers)
        losses = _run_chunk(
            kern,
            sub,
            datasets,
            neg_lr=torch.from_numpy(-lrs[sub.order]),
            prox_rate=torch.from_numpy(lrs[sub.order] * np.float32(prox_weight)),
            prox=centers is not None,
            clip_norm=clip_norm,
            scratch=scratch,
        )
        vectors = kern.vectors().numpy()
        for pos, client in enumerate(sub.order):
            steps = int(sub.steps[pos])
            results[client] = LocalTrainResult(
                vectors[pos], float(losses[pos]) / max(steps, 1), steps
            )
    return [r for r in results if r is not None]


def _run_chunk(
    kern: MatmulKernel | VmapKernel,
    plan: BatchPlan,
    datasets: Sequence[tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]],
    *,
    neg_lr: torch.Tensor,
    prox_rate: torch.Tensor,
    prox: bool,
    clip_norm: float | None,
    scratch: WindowScratch,
) -> npt.NDArray[np.float64]:
    """Train one chunk in place; return each stacked client's summed batch loss."""
    active = [plan.active(s) for s in range(plan.num_steps)]
    step_loss = torch.zeros(plan.num_steps, len(plan.order))
    for window in iter_windows(plan, datasets, scratch=scratch):
        for s in range(window.start, window.stop):
            k = active[s]
            x, y, weight = window.batch(s, k, plan.slot)
            step_loss[s, :k] = kern.step(k, x, y, weight, neg_lr[:k], clip_norm)
            if prox:
                # ∇(μ/2)‖w − w_c‖² = μ (w − w_c), after the gradient step (local_sgd).
                kern.prox_(k, prox_rate[:k])
    return step_loss.double().sum(0).numpy()


def fast_local_sgd(
    model: FlatModel,
    start: npt.NDArray[np.float32],
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.int64],
    *,
    lr: float,
    batch_size: int,
    local_epochs: int = 1,
    local_steps: int | None = None,
    rng: np.random.Generator,
    prox_weight: float = 0.0,
    prox_center: npt.NDArray[np.float32] | None = None,
) -> LocalTrainResult:
    """Run ``local_sgd`` with the hand-written MLR/MLP step when the model allows.

    Args and Returns are those of :func:`rayfl.learning.train.local_sgd`; other
    modules fall back to it. ``model``'s parameters are left untouched.
    """
    shapes = linear_stack_shapes(model.module)
    if shapes is None:
        return local_sgd(
            model,
            start,
            x,
            y,
            lr=lr,
            batch_size=batch_size,
            local_epochs=local_epochs,
            local_steps=local_steps,
            rng=rng,
            prox_weight=prox_weight,
            prox_center=prox_center,
        )
    if len(y) == 0 and local_steps:
        raise ValueError(f"no samples but local_steps={local_steps}")
    batches = batch_indices(
        len(y),
        batch_size=batch_size,
        local_epochs=local_epochs,
        local_steps=local_steps,
        rng=rng,
    )
    vector, loss_sum = linear_stack_sgd(
        model.spec,
        shapes,
        start,
        x,
        y,
        batches,
        lr=lr,
        prox_weight=prox_weight,
        prox_center=prox_center,
        scratch=_SCRATCH.setdefault(model, WindowScratch()),
    )
    return LocalTrainResult(vector, loss_sum / max(len(batches), 1), len(batches))


def choose_path(kind: str, dim: int, batch_size: int, num_clients: int) -> str:
    """Return ``"loop"`` or ``"vectorized"``: the faster way to train these clients.

    Args:
        kind: Model kind, ``"mlr"``, ``"mlp"``, ``"cnn"`` or a custom name.
        dim: Number of parameters.
        batch_size: Mini-batch size B.
        num_clients: Clients trained together by one actor.

    Returns:
        ``"loop"`` (``fast_local_sgd`` per client) or ``"vectorized"``
        (``local_sgd_many``).

    Example:
        >>> choose_path("mlr", 7850, 32, 1000)
        'vectorized'
        >>> choose_path("cnn", 582026, 32, 10)
        'loop'
    """
    if kind in ("mlr", "mlp") and num_clients > 1:
        return "vectorized"
    return "loop"
