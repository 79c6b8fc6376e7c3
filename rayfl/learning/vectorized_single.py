"""Hand-written local SGD of one client on the built-in MLR/MLP (no autograd).

The same arithmetic as :func:`rayfl.learning.train.local_sgd` with fewer, larger
torch calls per step: the client's batches are gathered once per window of
consecutive steps (so a step reads a contiguous slice, no per-step
``index_select``), labels become a one-hot matrix once per window, activations
are kept in column layout (features × batch: the softmax over 10 classes then
reduces over dim 0, much faster than over a short last dim), and the backward is
two matmuls per layer with the update fused into ``addmm_``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import torch

from rayfl.learning.models import ModelSpec
from rayfl.learning.vectorized_plan import WINDOW_BYTES, WindowScratch

__all__ = ["linear_stack_sgd"]


def _windows(
    batches: Sequence[npt.NDArray[np.int64]], max_rows: int
) -> list[tuple[int, int]]:
    """Split batch indices ``[0, len(batches))`` into runs of ≤ ``max_rows`` rows."""
    runs, start, rows = [], 0, 0
    for i, b in enumerate(batches):
        if rows and rows + len(b) > max_rows:
            runs.append((start, i))
            start, rows = i, 0
        rows += len(b)
    if start < len(batches):
        runs.append((start, len(batches)))
    return runs


def _linear_step(
    weights: list[torch.Tensor],
    biases: list[torch.Tensor],
    inputs: torch.Tensor,
    target: torch.Tensor,
    *,
    alpha: float,
) -> torch.Tensor:
    """Take one SGD step of the Linear/ReLU stack in place; return the summed loss.

    Args:
        weights: Weight views (out, in) per Linear, updated in place.
        biases: Bias views (out, 1) per Linear, updated in place.
        inputs: The batch's inputs, one column per sample (in, b).
        target: One-hot labels, one column per sample (classes, b).
        alpha: −η/b, the step's scale.

    Returns:
        Σ_j log p_j · target_j over the batch (a float32 scalar: minus the loss sum).
    """
    last = len(weights) - 1
    acts = [inputs]
    for i, (w, bias) in enumerate(zip(weights, biases, strict=True)):
        z = torch.addmm(bias, w, acts[i])
        if i < last:
            acts.append(z.clamp_(min=0.0))
    log_p = torch.log_softmax(z, dim=0)
    loss = (log_p * target).sum()
    deltas = [log_p.exp_().sub_(target)]  # ∂ce_j/∂z, column j
    for i in range(last, 0, -1):
        back = torch.mm(weights[i].t(), deltas[0])
        deltas.insert(0, torch.ops.aten.threshold_backward(back, acts[i], 0.0))
    for w, bias, d, a in zip(weights, biases, deltas, acts, strict=True):
        w.addmm_(d, a.t(), alpha=alpha)
        bias.add_(d.sum(1, keepdim=True), alpha=alpha)
    return loss


def linear_stack_sgd(
    spec: ModelSpec,
    shapes: list[tuple[int, int]],
    start: npt.NDArray[np.float32],
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.int64],
    batches: Sequence[npt.NDArray[np.int64]],
    *,
    lr: float,
    prox_weight: float,
    prox_center: npt.NDArray[np.float32] | None,
    scratch: WindowScratch,
) -> tuple[npt.NDArray[np.float32], float]:
    """Train one client's MLR/MLP from ``start`` over the given batches.

    Args:
        spec: The model's spec (weight, bias, … per Linear).
        shapes: ``(out, in)`` per Linear.
        start: Initial flat parameters, float32 (dim,).
        x: Train inputs, float32 (n, *input_shape).
        y: Train labels, int64 (n,).
        batches: Index arrays of the steps, from ``batch_indices``.
        lr: Learning rate η.
        prox_weight: Weight μ of the proximal term; 0 = none.
        prox_center: Centre w_c, float32 (dim,); defaults to ``start``.
        scratch: Reusable buffers for the gathered batches.

    Returns:
        The trained vector (dim,) and the summed mini-batch loss.
    """
    flat = torch.tensor(np.asarray(start, dtype=np.float32))
    off = spec.offsets
    weights = [
        flat[off[2 * i] : off[2 * i + 1]].view(shape) for i, shape in enumerate(shapes)
    ]
    biases = [
        flat[off[2 * i + 1] : off[2 * i + 2]].view(-1, 1) for i in range(len(shapes))
    ]
    center = None
    if prox_weight > 0.0:
        c = start if prox_center is None else prox_center
        center = torch.from_numpy(np.asarray(c, dtype=np.float32))
    xt = torch.from_numpy(np.asarray(x, dtype=np.float32)).reshape(len(y), -1)
    yt = torch.from_numpy(np.asarray(y, dtype=np.int64))
    num_classes = shapes[-1][0]
    losses: list[torch.Tensor] = []  # summed (not mean) batch losses, float32
    max_rows = max(1, WINDOW_BYTES // (4 * max(1, xt.shape[1])))
    for first, stop in _windows(batches, max_rows):
        index = torch.from_numpy(np.concatenate(batches[first:stop]))
        xw, yw, _ = scratch.get(1, len(index), (xt.shape[1],))
        xw = torch.index_select(xt, 0, index, out=xw[0])
        torch.index_select(yt, 0, index, out=yw[0])
        onehot = torch.zeros(num_classes, len(index)).scatter_(
            0, yw[:, : len(index)], 1.0
        )
        row = 0
        for b in batches[first:stop]:
            rows = slice(row, row + len(b))
            row += len(b)
            loss = _linear_step(
                weights, biases, xw[rows].t(), onehot[:, rows], alpha=-lr / len(b)
            )
            losses.append(loss)
            if center is not None:
                flat.sub_(flat - center, alpha=lr * prox_weight)
    sizes = [len(b) for b in batches]
    return flat.numpy(), -sum(float(v) / n for v, n in zip(losses, sizes, strict=True))
