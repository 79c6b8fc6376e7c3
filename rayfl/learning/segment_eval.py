"""Evaluate one model on many clients' data at once, with per-client results.

:func:`evaluate_segments` gives, for each segment of a stacked dataset (e.g. each
client's test split and train split), what :func:`rayfl.learning.train.evaluate`
gives on that segment alone — the mean cross-entropy and the accuracy — from
one forward pass over all segments instead of one per segment.

Implementation details:
    1. Equal to per-segment :func:`~rayfl.learning.train.evaluate` to float32
       rounding, not bit for bit (so is :func:`evaluate_segments_many`, which
       evaluates many models at once with batched matmuls): a matmul over more rows may take another BLAS
       kernel whose sums round differently in the last bit (seen for a
       6→3 MLR, not for the digits MLP), and the per-sample losses are summed
       per segment in float64 where ``evaluate`` lets torch sum them in
       float32. tests/learning/test_segment_eval.py bounds the loss difference
       at 1e-6 relative; an accuracy differs only where a row's two top logits
       tie to float32 rounding.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

from rayfl.learning.models import FlatModel
from rayfl.learning.vectorized_kernels import linear_stack_shapes

__all__ = ["evaluate_segments", "evaluate_segments_many"]

#: Logit/activation floats per chunk of models in :func:`evaluate_segments_many`.
_MANY_FLOATS = 1 << 22


def evaluate_segments(
    model: FlatModel,
    vector: npt.NDArray[np.float32],
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.int64],
    bounds: npt.ArrayLike,
    *,
    batch_size: int = 2048,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Return the mean loss and accuracy of ``vector`` on each segment of ``(x, y)``.

    Args:
        model: The host's flat model (its parameters are overwritten).
        vector: Flat parameters to evaluate, float32 (dim,).
        x: Inputs of all segments, one after another, float32 (n, *input_shape).
        y: Their labels, int64 (n,).
        bounds: Segment boundaries, int (S + 1,): segment s is rows
            ``bounds[s]:bounds[s + 1]``.
        batch_size: Rows per forward pass (memory only).

    Returns:
        ``(loss, accuracy)``, float64 (S,) each; NaN for an empty segment.

    Example:
        >>> from rayfl.learning.models import build_model
        >>> fm = FlatModel(build_model("mlr", input_shape=(2,), num_classes=2))
        >>> x = np.ones((3, 2), np.float32); y = np.zeros(3, np.int64)
        >>> loss, acc = evaluate_segments(fm, np.zeros(6, np.float32), x, y, [0, 1, 3])
        >>> np.round(loss, 4).tolist(), acc.tolist()
        ([0.6931, 0.6931], [1.0, 1.0])
    """
    edges = np.asarray(bounds, dtype=np.int64)
    sizes = np.diff(edges)
    segment = np.repeat(np.arange(len(sizes)), sizes)
    model.load(vector)
    xt = torch.from_numpy(np.asarray(x))
    yt = torch.from_numpy(np.asarray(y))
    losses, hits = [], []
    with torch.no_grad():
        for first in range(0, len(yt), batch_size):
            out = model.module(xt[first : first + batch_size])
            target = yt[first : first + batch_size]
            losses.append(F.cross_entropy(out, target, reduction="none").numpy())
            hits.append((out.argmax(dim=1) == target).numpy())
    per_sample = np.concatenate(losses).astype(np.float64) if losses else np.zeros(0)
    correct = np.concatenate(hits).astype(np.float64) if hits else np.zeros(0)
    loss, acc = _segment_means(per_sample, correct, segment, sizes, models=1)
    return loss[0], acc[0]


def evaluate_segments_many(
    model: FlatModel,
    vectors: npt.NDArray[np.float32],
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.int64],
    bounds: npt.ArrayLike,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Return :func:`evaluate_segments` of each row of ``vectors`` on the same data.

    The built-in MLR/MLP (:func:`~rayfl.learning.vectorized_kernels.linear_stack_shapes`)
    run as one batched matmul per layer over a chunk of models; any other
    module is evaluated one model at a time.

    Args:
        model: The host's flat model (gives the layout; its parameters may be
            overwritten).
        vectors: Flat parameters, float32 (L, dim), one model per row.
        x: Inputs of all segments, float32 (n, *input_shape).
        y: Their labels, int64 (n,).
        bounds: Segment boundaries, int (S + 1,).

    Returns:
        ``(loss, accuracy)``, float64 (L, S) each; NaN for an empty segment.

    Example:
        >>> from rayfl.learning.models import build_model
        >>> fm = FlatModel(build_model("mlr", input_shape=(2,), num_classes=2))
        >>> x = np.ones((3, 2), np.float32); y = np.zeros(3, np.int64)
        >>> loss, acc = evaluate_segments_many(
        ...     fm, np.zeros((2, 6), np.float32), x, y, [0, 1, 3])
        >>> np.round(loss, 4).tolist()
        [[0.6931, 0.6931], [0.6931, 0.6931]]
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    shapes = linear_stack_shapes(model.module)
    if shapes is None:
        pairs = [evaluate_segments(model, v, x, y, bounds) for v in vectors]
        return (
            np.array([p[0] for p in pairs]).reshape(len(vectors), -1),
            np.array([p[1] for p in pairs]).reshape(len(vectors), -1),
        )
    edges = np.asarray(bounds, dtype=np.int64)
    sizes = np.diff(edges)
    segment = np.repeat(np.arange(len(sizes)), sizes)
    n = len(segment)
    # column layout (features, samples): reductions over the classes run over
    # dim −2, far faster than a last-dim softmax over ~10 classes
    xt = torch.from_numpy(np.asarray(x, dtype=np.float32)).reshape(n, -1).T
    yt = torch.from_numpy(np.asarray(y)).reshape(1, 1, n)
    width = max(out for out, _ in shapes)
    chunk = max(1, _MANY_FLOATS // max(1, n * width))
    losses, hits = [], []
    with torch.no_grad():
        for first in range(0, len(vectors), chunk):
            stack = torch.from_numpy(vectors[first : first + chunk])
            logits = _linear_stack_logits(model, shapes, stack, xt)  # (l, C, n)
            target = yt.expand(len(stack), 1, n)
            log_p = torch.log_softmax(logits, dim=-2)
            losses.append(-log_p.gather(-2, target).squeeze(-2).numpy())
            hits.append((_first_argmax(logits) == target.squeeze(-2)).numpy())
    per_sample = np.concatenate(losses).astype(np.float64)
    correct = np.concatenate(hits).astype(np.float64)
    return _segment_means(per_sample, correct, segment, sizes, models=len(vectors))


def _segment_means(
    per_sample: npt.NDArray[np.float64],
    correct: npt.NDArray[np.float64],
    segment: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64],
    *,
    models: int,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Mean loss and accuracy per (model, segment), float64 (models, S).

    ``per_sample`` and ``correct`` hold each model's per-sample values one model
    after another (models × n); ``segment`` gives each sample's segment.
    """
    index = (np.arange(models)[:, None] * len(sizes) + segment[None]).reshape(-1)
    total = models * len(sizes)
    loss_sum = np.bincount(index, per_sample.reshape(-1), total).reshape(models, -1)
    hit_sum = np.bincount(index, correct.reshape(-1), total).reshape(models, -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        loss = np.where(sizes > 0, loss_sum / sizes, np.nan)
        acc = np.where(sizes > 0, hit_sum / sizes, np.nan)
    return loss, acc


def _linear_stack_logits(
    model: FlatModel,
    shapes: list[tuple[int, int]],
    stack: torch.Tensor,
    xt: torch.Tensor,
) -> torch.Tensor:
    """Logits (l, C, n) of l stacked MLR/MLP models on shared inputs xt (in, n)."""
    offsets = model.spec.offsets
    m, n = len(stack), xt.shape[1]
    h = xt
    last = len(shapes) - 1
    for i, (out, inp) in enumerate(shapes):
        w0, b0, b1 = offsets[2 * i], offsets[2 * i + 1], offsets[2 * i + 2]
        w = stack[:, w0:b0].reshape(m, out, inp)
        b = stack[:, b0:b1].reshape(m, out, 1)
        if h.dim() == 2:  # shared inputs: one GEMM for every model
            h = torch.addmm(b.reshape(m * out, 1), w.reshape(m * out, inp), h)
            h = h.view(m, out, n)
        else:
            h = torch.baddbmm(b, w, h)
        if i < last:
            h = h.clamp_(min=0.0)
    return h


def _first_argmax(logits: torch.Tensor) -> torch.Tensor:
    """``logits.argmax(dim=-2)`` (the first maximum), faster in column layout."""
    if torch.isnan(logits).any():  # argmax's NaN rule: keep torch's own
        return logits.argmax(dim=-2)
    classes = logits.shape[-2]
    is_max = logits == logits.amax(dim=-2, keepdim=True)
    rank = torch.arange(classes, 0, -1, dtype=logits.dtype).view(1, classes, 1)
    return classes - (is_max * rank).amax(dim=-2).to(torch.int64)
