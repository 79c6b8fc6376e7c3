"""Evaluate one model on many clients' data at once, with per-client results.

:func:`evaluate_segments` gives, for each segment of a stacked dataset (e.g. each
client's test split and train split), what :func:`rayfl.learning.train.evaluate`
gives on that segment alone — the mean cross-entropy and the accuracy — from
one forward pass over all segments instead of one per segment.

Implementation details:
    1. Equal to per-segment :func:`~rayfl.learning.train.evaluate` to float32
       rounding, not bit for bit: a matmul over more rows may take another BLAS
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

__all__ = ["evaluate_segments"]


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
    loss_sum = np.bincount(segment, weights=per_sample, minlength=len(sizes))
    hit_sum = np.bincount(segment, weights=correct, minlength=len(sizes))
    with np.errstate(invalid="ignore", divide="ignore"):
        loss = np.where(sizes > 0, loss_sum / sizes, np.nan)
        acc = np.where(sizes > 0, hit_sum / sizes, np.nan)
    return loss, acc
