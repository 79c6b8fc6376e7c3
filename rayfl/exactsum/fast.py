"""The float64 fast path of exact sums: running sums checked addition by addition.

When the plain float64 running sum of weighted rows is exact (every
addition's TwoSum error is zero, checked per element), that float64 vector
is the exact sum (:mod:`rayfl.exactsum`, implementation detail 5). This
module checks it for one stack of rows (:func:`_exact_running_sum`) or for
many groups at once (:func:`group_running_sums`, the lanes' aggregations),
and says when a division by the weight sum rounds as the limb path's
(:func:`plain_divisions`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["group_running_sums", "plain_divisions"]

_PLAIN_RANGE = (2.0**-960, 2.0**960)


def _exact_running_sum(
    x: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64] | None:
    """Return Σ_k x_k when every float64 addition of the running sum is exact.

    Args:
        x: Weighted rows, float64 (m, dim), m ≥ 1.

    Returns:
        The exact sum (−0.0 turned to 0.0, as the limb path gives), or None when
        a row is not finite or some addition rounded (TwoSum error ≠ 0).
    """
    if not np.isfinite(x).all():
        return None
    s = x[0] + 0.0  # a copy, with −0.0 → +0.0
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(1, len(x)):
            t = s + x[k]
            z = t - s
            # TwoSum: err = (s + x_k) − fl(s + x_k) exactly (nan if t overflowed)
            err = (s - (t - z)) + (x[k] - z)
            if np.any(err != 0):  # nan != 0 too
                return None
            s = t
    return s + 0.0


def group_running_sums(
    row: npt.NDArray[np.int64],
    count: npt.NDArray[np.int64],
    updates: npt.NDArray[np.float32] | npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Per group: the float64 running sum of its weighted rows, and whether it is exact.

    :func:`_exact_running_sum` (implementation detail 5's fast path) of many
    groups at once, e.g. each lane's uploads in :mod:`rayfl.star.columns`: the
    k-th rows of every group that has one are added in one pass (groups in a
    given order: ``row`` ascending, a group's rows in its order), with an
    exactness check of each addition (TwoSum's: the rounding error is 0). An
    exact group's sum is its :class:`ExactSum`'s value; an inexact one must go
    to :func:`exact_sum`.

    Args:
        row: (m,) the group of each row, ascending.
        count: (P,) rows per group.
        updates: (m, dim) the rows, float32 (uploads) or float64 (e.g. the
            ``exact64`` of partial sums, with weights 1).
        weights: (m,) their weights.

    Returns:
        ``(sums, exact)``: float64 (P, dim) and bool (P,).
    """
    p = len(count)
    s = np.zeros((p, updates.shape[1]))  # +0: a running sum from it is never -0
    exact = np.ones(p, bool)
    first = np.cumsum(count) - count  # rows are grouped: row ascending
    groups = np.flatnonzero(count > 0)
    # a block of groups at a time, so that its arrays stay in cache (the
    # additions are memory-bound: one pass over all groups ran ~3x slower)
    block = max(1, _BLOCK_BYTES // (8 * max(1, updates.shape[1])))
    unit = updates.dtype == np.float64 and bool((weights == 1).all())
    for b in range(0, len(groups), block):
        at = groups[b : b + block]
        s[at], exact[at] = _block_running_sums(
            first[at], count[at], updates, weights, unit
        )
    return s, exact


#: The bytes of one (groups × dim) float64 array of a block of
#: :func:`group_running_sums` (about 8 such arrays are live at once).
_BLOCK_BYTES = 1 << 18


def _block_running_sums(
    first: npt.NDArray[np.int64],
    count: npt.NDArray[np.int64],
    updates: npt.NDArray[np.float32] | npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64],
    unit: bool,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """:func:`group_running_sums` of a few groups (rows ``first[g] + k``, count ≥ 1).

    ``unit``: the rows are float64 with weights 1 (w·u = u, no multiply).
    """
    rank = np.argsort(-count, kind="stable")  # groups with a k-th row: a prefix
    first, count = first[rank], count[rank]
    n, dim = len(first), updates.shape[1]
    head, x, t, d = (np.empty((n, dim)) for _ in range(4))
    same, also = np.empty((n, dim), bool), np.empty((n, dim), bool)
    exact = np.ones(n, bool)

    def load(k: int, m: int) -> npt.NDArray[np.float64]:
        rows, xs = first[:m] + k, x[:m]
        if unit:
            np.take(updates, rows, axis=0, out=xs)
        else:
            # w·u in float64 (a float32 → float64 cast is exact; one mixed-type
            # multiply costs several same-type passes)
            np.multiply(updates[rows].astype(np.float64), weights[rows, None], out=xs)
        return xs

    with np.errstate(over="ignore", invalid="ignore"):
        np.add(load(0, n), 0.0, out=head)  # 0 + x: −0 → +0
        for k in range(1, int(count[0])):
            m = int(np.count_nonzero(count > k))
            hs, xs, ts, ds = head[:m], load(k, m), t[:m], d[:m]
            # t = head + x is exact iff t − head == x and t − x == head: the
            # subtraction of the larger operand is exact (Fast2Sum), so an
            # inexact t fails one of them; inf and nan fail too
            np.add(hs, xs, out=ts)
            np.equal(np.subtract(ts, hs, out=ds), xs, out=same[:m])
            np.equal(np.subtract(ts, xs, out=ds), hs, out=also[:m])
            exact[:m] &= np.logical_and(same[:m], also[:m], out=same[:m]).all(axis=1)
            np.copyto(hs, ts)
    out_s, out_exact = np.empty_like(head), np.empty_like(exact)
    out_s[rank], out_exact[rank] = head, exact
    return out_s, out_exact


def _plain_division_is_exact(total: npt.NDArray[np.float64], divisor: float) -> bool:
    """True when ``total / divisor`` rounds as the limb path's scaled division."""
    return bool(plain_divisions(total[None], np.array([float(divisor)]))[0])


def plain_divisions(
    totals: npt.NDArray[np.float64], divisors: npt.NDArray[np.float64]
) -> npt.NDArray[np.bool_]:
    """Per row: does ``totals[i] / divisors[i]`` round as the limb path's division?

    True when the divisor and every quotient of a non-zero element lie in
    :data:`_PLAIN_RANGE` (no overflow, no subnormal). Division by a positive
    divisor rounds monotonically, so the smallest and largest quotients are
    those of the smallest non-zero and the largest ``abs(total)``: two
    reductions per row instead of a division per element.
    """
    lo, hi = _PLAIN_RANGE
    a = np.abs(totals)
    big = a.max(axis=1, initial=0.0)
    small = np.min(a, axis=1, where=a > 0, initial=np.inf)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return (
            (divisors >= lo)
            & (divisors <= hi)
            & (big / divisors <= hi)
            & ((small == np.inf) | (small / divisors >= lo))
        )
