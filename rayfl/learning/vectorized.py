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
| μ (FedProx), λ/α_K (FedAMP) | ``prox_weight`` |
| w_c | ``prox_centers`` |
| C (per-sample clipping, DP-SGD) | ``clip_norm`` |

Implementation details:
    1. Ragged runs (clients of different sizes, hence different step counts and
       last-batch sizes) are handled by masking, not grouping: clients are stacked
       by step count (descending), so the clients still training at step s are a
       prefix of the stack (a view, no gather/scatter of parameters); every batch
       slot is padded to the largest batch, with per-row loss weight 1/b_i on real
       rows and 0 on padding. Padding costs ≤ one slot per client and epoch.
    2. Batches are gathered per window of steps (≤ 16 MB of inputs) into reused
       buffers: one ``index_select`` per window when the clients' arrays are row
       slices of one buffer (``FederatedData``), else one per client and window.
       Clients are trained in chunks whose one-step batch is ≤ 16 MB (160 clients
       at 28×28, B = 32): for 1000 × 60 MLR chunks of 160 ran at 0.47 of the
       ``fast`` loop vs 0.64 for chunks of 10; for 100 × 600 chunk size (5–80)
       was within noise.
    3. Per-sample clipping (``clip_norm``) clips the cross-entropy gradient of each
       sample, then averages over the batch (sum / b_i); the proximal step is not
       clipped. No noise is added here (the uplink's DP stage adds it).
    4. Kernels: the built-in MLR/MLP run as explicit ``baddbmm`` with a
       hand-written backward (``kernel="matmul"``, per-sample norms without
       per-sample gradients); any other module (CNN) runs through ``torch.func``
       ``vmap(grad_and_value(functional_call))`` (``kernel="vmap"``; modules
       without buffers such as BatchNorm statistics). ``auto`` picks matmul when
       it applies: it beat vmap in every case below.
    5. ``fast_local_sgd`` is a separate one-client loop (``vectorized_single``):
       mm/addmm instead of 1-batch bmm, no padding, no loss-weight tensors.
    6. Equality: parameters match ``local_sgd`` to ~3e-8 (MLR, MLP, CNN; tests at
       1e-5). A CNN trajectory can still split by ~1e-4 after a few steps when
       float32 rounding of a different but equally valid kernel (grouped conv,
       bmm) flips a near-tie of a max-pool or ReLU: seen for 1 of 10 clients in
       the bench (28×28, 7 steps); the same client matches with ``max_clients=1``.
    7. Measured by ``.venv/bin/python bench/train_speed.py`` (1 torch thread,
       random Fashion-MNIST-shaped data as row slices of one array, E = 1, lr 0.05;
       time / time of the autograd ``local_sgd`` loop in the same run, two runs on
       a shared 2-core machine, ``fast`` = ``fast_local_sgd`` loop, ``vec`` =
       ``local_sgd_many`` auto kernel, ``vmap`` = its vmap kernel):

       | model | clients × n | B | fast | vec | vmap |
       |-------|-------------|---|------|-----|------|
       | mlr | 10 × 600 | 32 | 0.46 / 0.33 | 0.36 / 0.21 | 1.25 / 0.66 |
       | mlr | 100 × 600 | 32 | 0.53 / 0.65 | 0.32 / 0.38 | 0.50 / 0.65 |
       | mlr | 1000 × 60 | 32 | 0.72 / 0.58 | 0.40 / 0.24 | 0.52 / 0.31 |
       | mlr | 100 × 600 | 128 | 0.57 / 0.54 | 0.70 / 0.52 | 1.00 / 0.74 |
       | mlp 784-200-10 | 2 × 600 | 32 | 0.57 / 0.56 | 0.68 / 0.61 | 2.32 / 2.14 |
       | mlp 784-200-10 | 10 × 600 | 32 | 0.55 / 0.54 | 0.46 / 0.40 | 0.90 / 0.88 |
       | mlp 784-200-10 | 100 × 600 | 32 | 0.53 / 0.55 | 0.49 / 0.47 | 1.18 / 1.00 |
       | mlp 784-200-10 | 10 × 600 | 128 | 0.74 / 0.76 | 0.73 / 0.71 | 0.92 / 0.99 |
       | cnn | 10 × 200 | 32 | — | 1.51 / 1.23 (vmap) | — |

       Loop step vs arithmetic (FLOPs / peak 2048² ``torch.mm``, 113–117 GFLOP/s):
       MLP B = 32: 20.5 MFLOP = 0.18 ms; loop 0.80–0.91 ms (4.4–5.2×), fast
       0.45–0.51 ms (2.5–2.9×: the two 784×200 matmuls run at ~75 GFLOP/s, the
       rest is ~15 small ops). MLR: 1 MFLOP, loop 0.22–0.31 ms (25–37×), fast
       0.10 ms. CNN: 790 MFLOP, loop 19–23 ms (2.8–3.4×).
    8. Rule (:func:`choose_path`): one client, fewer than ``MIN_CLIENTS`` = 8, or
       B > ``MAX_BATCH`` = 64 → ``"loop"`` (per-client ``fast_local_sgd`` ties or
       wins: MLP 2 clients, B = 128 rows); MLR/MLP otherwise → ``"vectorized"``;
       other models (vmap) → ``"vectorized"`` only with dim ≤ 20,000 and ≥ 50
       clients (vmap on the 7,850-parameter MLR: 0.31–0.65 at 100–1000 clients,
       0.66–1.25 at 10; MLP and CNN through vmap are no faster than the loop).
       Per-sample clipping → ``"vectorized"`` (the loop has none).
    9. What ``algorithm.trainer: auto`` runs (:func:`auto_vectorizes`): the matmul
       kernel for the built-in MLR/MLP with B ≤ ``MAX_BATCH``, for every client,
       even alone in its actor; ``fast_local_sgd`` otherwise. It must not depend on
       how many clients an actor trains (the rule of item 8 does), or results would
       depend on the packing (DESIGN.md): the matmul kernel computes each client in
       its own slice of the stack, so a client's parameters are bit-identical
       whatever other clients share its stack or chunk, provided the batch slot
       (padded rows per step) is fixed for the run: FedAvg passes
       ``slot = min(B, largest client of the run)`` (with the default slot, a
       client smaller than B alone in a stack has fewer padding rows and its
       sums round differently). tests/learning/test_vectorized.py checks this;
       the vmap kernel does not guarantee it, see
       item 6, so ``auto`` never uses it). Cost of the rule where item 8 would
       pick the loop: MLP with 2 clients per actor, 0.68 vs 0.57 of the autograd
       loop.

Example:
    Two clients on the same data, one with η = 0 (its loss is the start's):

    >>> from rayfl.learning.models import build_model
    >>> fm = FlatModel(build_model("mlr", input_shape=(2,), num_classes=2))
    >>> x = np.ones((3, 2), np.float32); y = np.zeros(3, np.int64)
    >>> res = local_sgd_many(fm, np.zeros((2, 6), np.float32), [(x, y)] * 2,
    ...     lr=[0.0, 0.5], batch_size=3, rngs=[np.random.default_rng(0)] * 2)
    >>> [round(r.train_loss, 4) for r in res], bool(res[1].vector[4] > 0)
    ([0.6931, 0.6931], True)
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence

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

__all__ = [
    "auto_vectorizes",
    "choose_path",
    "fast_local_sgd",
    "local_sgd_many",
    "per_client_trainer",
]

KERNELS = ("auto", "matmul", "vmap")
# choose_path thresholds (Implementation details 8)
MIN_CLIENTS = 8
MAX_BATCH = 64
VMAP_MAX_DIM = 20_000
VMAP_MIN_CLIENTS = 50
_CHUNK_BYTES = 256 << 20
# Window buffers per model, reused across calls (see WindowScratch).
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
    slot: int | None = None,
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
        slot: Rows per padded batch slot; default the largest batch of these
            clients. With the matmul kernel, a run-level value (min(B, largest
            client of the run)) makes each client's result bit-identical whatever
            other clients share its stack (Implementation details 9).

    Returns:
        One result per client, in the order of ``datasets``.

    Raises:
        ValueError: For mismatched shapes, a bad kernel or a non-positive clip norm.

    The module's Example trains two clients at two learning rates.
    """
    m, dim = len(datasets), model.spec.dim
    starts, lrs = _checked_starts_and_lr(starts, lr, m, dim)
    kind, shapes = _kernel_kind(model, kernel, clip_norm)
    centers = _prox_centers(starts, prox_weight, prox_centers)
    plan = plan_batches(
        [len(y) for _, y in datasets],
        batch_size=batch_size,
        local_epochs=local_epochs,
        local_steps=local_steps,
        rngs=rngs,
        slot=slot,
    )
    row_bytes = 4 * int(np.prod(np.shape(datasets[0][0])[1:])) if m else 4
    chunk = max_clients or _chunk_size(
        dim, row_bytes, plan.slot, clip=clip_norm is not None, kernel=kind
    )
    results: list[LocalTrainResult | None] = [None] * m
    scratch = _SCRATCH.setdefault(model, WindowScratch())
    for c0 in range(0, m, chunk):
        sub = plan.chunk(c0, chunk)
        kern = _make_kernel(model, kind, shapes, sub.order, starts, centers)
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
        _store_results(results, sub, kern.vectors().numpy(), losses)
    return [r for r in results if r is not None]


def _kernel_kind(
    model: FlatModel, kernel: str, clip_norm: float | None
) -> tuple[str, list[tuple[int, int]] | None]:
    """Return the kernel to use ("matmul" or "vmap") and the Linear shapes, checked."""
    if clip_norm is not None and not clip_norm > 0:
        raise ValueError(f"clip_norm must be > 0 or None, got {clip_norm}")
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(KERNELS)}; got {kernel!r}")
    shapes = linear_stack_shapes(model.module)
    if kernel == "matmul" and shapes is None:
        raise ValueError("kernel='matmul' needs a built-in mlr/mlp module")
    kind = "matmul" if kernel != "vmap" and shapes is not None else "vmap"
    return kind, shapes


def _make_kernel(
    model: FlatModel,
    kind: str,
    shapes: list[tuple[int, int]] | None,
    order: npt.NDArray[np.int64],
    starts: npt.NDArray[np.float32],
    centers: npt.NDArray[np.float32] | None,
) -> MatmulKernel | VmapKernel:
    """Return the kernel of the clients ``order`` (rows of ``starts``/``centers``)."""
    order_t = torch.from_numpy(order)
    starts_t = torch.from_numpy(starts)
    centers_t = None if centers is None else torch.from_numpy(centers)
    if kind == "matmul" and shapes is not None:
        return MatmulKernel(model.spec, shapes, starts_t, order_t, centers_t)
    return VmapKernel(model.module, model.spec, starts_t, order_t, centers_t)


def _checked_starts_and_lr(
    starts: npt.ArrayLike, lr: float | npt.ArrayLike, m: int, dim: int
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Return the starts as float32 (m, dim) and one learning rate per client."""
    starts = np.asarray(starts, dtype=np.float32)
    if starts.shape != (m, dim):
        raise ValueError(f"starts must have shape ({m}, {dim}), got {starts.shape}")
    lrs = np.asarray(lr, dtype=np.float32)
    if lrs.ndim > 1 or lrs.size not in (1, m):
        raise ValueError(f"lr must be a float or have {m} entries, got {lrs.shape}")
    return starts, np.broadcast_to(lrs.reshape(-1), (m,))


def _prox_centers(
    starts: npt.NDArray[np.float32],
    prox_weight: float,
    prox_centers: npt.NDArray[np.float32] | None,
) -> npt.NDArray[np.float32] | None:
    """Return the proximal centres per client (m, dim), or None without a prox term."""
    if not prox_weight > 0.0:
        return None
    m, dim = starts.shape
    c = starts if prox_centers is None else np.asarray(prox_centers, np.float32)
    if c.shape not in ((dim,), (m, dim)):
        raise ValueError(
            f"prox_centers must have shape ({dim},) or ({m}, {dim}), got {c.shape}"
        )
    return np.broadcast_to(c, (m, dim))


def _store_results(
    results: list[LocalTrainResult | None],
    sub: BatchPlan,
    vectors: npt.NDArray[np.float32],
    losses: npt.NDArray[np.float64],
) -> None:
    """Write one chunk's trained vectors and mean losses into ``results``."""
    for pos, client in enumerate(sub.order):
        steps = int(sub.steps[pos])
        results[client] = LocalTrainResult(
            vectors[pos], float(losses[pos]) / max(steps, 1), steps
        )


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


def per_client_trainer(trainer: str) -> Callable[..., LocalTrainResult]:
    """Return the per-client SGD function of an ``algorithm.trainer`` setting.

    ``autograd`` → :func:`~rayfl.learning.train.local_sgd`; anything else (``auto``,
    ``fast``, and ``vectorized`` for single clients) → :func:`fast_local_sgd`.
    """
    return local_sgd if trainer == "autograd" else fast_local_sgd


def auto_vectorizes(model: FlatModel, batch_size: int) -> bool:
    """Return True when ``trainer: auto`` trains with the matmul kernel.

    Implementation details 9: built-in MLR/MLP (a stack of Linear layers) and
    B ≤ ``MAX_BATCH``; never dependent on how many clients an actor trains.

    Example:
        >>> from rayfl.learning.models import build_model
        >>> mlr = FlatModel(build_model("mlr", input_shape=(4,), num_classes=3))
        >>> auto_vectorizes(mlr, 32), auto_vectorizes(mlr, 128)
        (True, False)
    """
    return batch_size <= MAX_BATCH and linear_stack_shapes(model.module) is not None


def choose_path(
    kind: str,
    dim: int,
    batch_size: int,
    num_clients: int,
    *,
    per_sample_clipping: bool = False,
) -> str:
    """Return ``"loop"`` or ``"vectorized"``: the faster way to train these clients.

    The rule of the module docstring (Implementation details 8), from
    ``bench/train_speed.py``.

    Args:
        kind: Model kind: ``"mlr"``, ``"mlp"`` (matmul kernel), anything else
            (``"cnn"``, custom) runs through ``vmap``.
        dim: Number of parameters.
        batch_size: Mini-batch size B.
        num_clients: Clients one actor trains in the round.
        per_sample_clipping: DP-SGD clipping needed: only ``local_sgd_many`` has it.

    Returns:
        ``"loop"`` (``fast_local_sgd`` per client) or ``"vectorized"``
        (``local_sgd_many``).

    Example:
        >>> choose_path("mlr", 7850, 32, 1000)
        'vectorized'
        >>> choose_path("cnn", 582026, 32, 10)
        'loop'
    """
    if per_sample_clipping:
        return "vectorized"
    if num_clients < MIN_CLIENTS or batch_size > MAX_BATCH:
        return "loop"
    if kind in ("mlr", "mlp"):
        return "vectorized"
    if dim <= VMAP_MAX_DIM and num_clients >= VMAP_MIN_CLIENTS:
        return "vectorized"
    return "loop"
