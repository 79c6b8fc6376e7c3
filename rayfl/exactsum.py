"""Exact, grouping-independent sums of float64 vectors (pure numpy, no torch).

Every finite float64 is an integer multiple of 2⁻¹⁰⁷⁴, so a sum of finite
float64 rows has an exact value; :class:`ExactSum` keeps that exact value, per
element, as a short vector of 48-bit integer limbs ("digits" in base 2⁴⁸ on a
grid of exponents shared by every sum). Adding two sums adds their limbs, which
is integer arithmetic: associative and commutative, so a client actor may
pre-reduce its clients and the server add the partial sums and the result is
bit-for-bit the one of summing every row at the server, whatever the packing
(DESIGN.md determinism rule). Nothing overflows or wraps for any finite input:
the limbs carry into new limbs as needed, up to the full float64 range.

The value is rounded once, at the end: :meth:`ExactSum.value` is the correctly
rounded float64 of the exact sum (equal to :func:`math.fsum` of the rows), and
:meth:`ExactSum.mean` divides it by the exact weight sum.

Implementation details:
    1. Splitting a row into digits: for the top level b (a multiple of 48)
       ``hi = (x + 1.5·2^(b+52)) − 1.5·2^(b+52)`` rounds x to a multiple of
       2^b exactly and ``x − hi`` is exact (error-free transformation), so a row
       costs a few vectorised passes per level; typical updates span ≤ 96 bits
       (two levels), float32 rows at most six.
    2. Digits of up to 32 rows are summed in float64 (exact: every partial sum
       is an integer below 2⁵³) before going into the int64 limbs; limbs are
       carry-normalised after each block, so they never exceed 2⁶³.
    3. Rounding to float64: the top 62 bits of |sum| plus a sticky bit for
       every lower bit are converted with one int64→float64 cast (round to
       nearest even), then scaled by a power of two. The mean divides that
       float64 by the weight sum and casts to float32 (the only two roundings
       after the exact sum).
    4. Weights are summed exactly as :class:`fractions.Fraction` (a handful of
       numbers per sum).
    5. Fast path: when the plain float64 running sum of the weighted rows is
       exact — every addition's TwoSum error (Knuth, TAOCP vol. 2, 4.2.2) is
       zero, checked per element — that float64 vector *is* the exact sum, and
       :class:`ExactSum` keeps it as ``exact64`` without building limbs (built
       from it on demand, exactly, for ``+`` when the float64 sum of two sums is
       not exact). The rounding then has nothing to do: :meth:`ExactSum.value`
       returns it and :meth:`ExactSum.mean` divides it once, the same bits as the
       limb path (tests/learning/test_exact_sum.py compares both paths). Typical
       updates (float32 rows times sample counts, exponents within ~20 bits)
       take it; any element with a rounding error sends the whole sum to the
       limb path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

__all__ = [
    "LIMB_BITS",
    "ExactSum",
    "exact_sum",
    "group_running_sums",
    "plain_divisions",
]

LIMB_BITS = 48
"""Bits per limb; limb j of a sum with ``low`` = l weighs 2^(48·(l + j))."""

_L = LIMB_BITS
_BLOCK_ROWS = 32  # rows whose digits (|d| ≤ 2⁴⁷) are summed in float64 (< 2⁵³)
_BLOCK_ELEMENTS = 1 << 16  # elements per block (cache-sized)


@dataclass(frozen=True)
class ExactSum:
    """The exact Σ_k w_k v_k (per element) and Σ_k w_k over a set of rows.

    Attributes:
        limbs: int64 (levels, dim), carry-normalised: rows 0..levels−2 in
            [0, 2⁴⁸), the last row signed; element i's exact sum is
            Σ_j limbs[j, i]·2^(48·(low + j)). Shape (0, dim) for an empty sum.
            None when the sum is held as ``exact64`` (built on demand).
        low: Level index of ``limbs[0]``.
        weight: Σ_k w_k, exact.
        count: Number of rows summed.
        exact64: The exact sum itself, float64 (dim,), when every element of it
            is a float64 (implementation detail 5), else None.
    """

    limbs: npt.NDArray[np.int64] | None
    low: int
    weight: Fraction = field(default=Fraction(0))
    count: int = 0
    exact64: npt.NDArray[np.float64] | None = None

    @property
    def dim(self) -> int:
        """Vector length."""
        if self.limbs is None:
            assert self.exact64 is not None
            return len(self.exact64)
        return int(self.limbs.shape[1])

    def as_limbs(self) -> tuple[npt.NDArray[np.int64], int]:
        """Return ``(limbs, low)``, building them from ``exact64`` if needed."""
        if self.limbs is not None:
            return self.limbs, self.low
        assert self.exact64 is not None
        acc = _Accumulator(self.dim)
        row = self.exact64[None].copy()
        _digits(row, np.empty_like(row), acc)
        return acc.limbs()

    def __add__(self, other: ExactSum) -> ExactSum:
        if other.dim != self.dim:
            raise ValueError(f"cannot add sums of length {self.dim} and {other.dim}")
        weight, count = self.weight + other.weight, self.count + other.count
        if self.exact64 is not None and other.exact64 is not None:
            fast = _exact_running_sum(np.stack([self.exact64, other.exact64]))
            if fast is not None:
                return ExactSum(None, 0, weight, count, fast)
        limbs, low = _add_limbs(*self.as_limbs(), *other.as_limbs())
        return ExactSum(limbs, low, weight, count)

    def value(self) -> npt.NDArray[np.float64]:
        """Return the exact sum rounded to the nearest float64 (±inf beyond range)."""
        if self.exact64 is not None:
            return self.exact64.copy()
        return _round(*self.as_limbs(), 1.0)

    def mean(self) -> npt.NDArray[np.float32]:
        """Return Σ w v / Σ w as float32 (the exact sum rounded to float64, divided).

        Raises:
            ValueError: If the weights sum to ≤ 0.
        """
        if not self.weight > 0:
            raise ValueError(
                f"aggregation weights must sum to > 0, got {float(self.weight)}"
            )
        divisor = float(self.weight)
        with np.errstate(over="ignore"):  # beyond float32: ±inf, correctly
            if self.exact64 is not None and _plain_division_is_exact(
                self.exact64, divisor
            ):
                return (self.exact64 / divisor).astype(np.float32)
            return _round(*self.as_limbs(), divisor).astype(np.float32)


def exact_sum(vectors: npt.ArrayLike, weights: npt.ArrayLike) -> ExactSum:
    """Return the exact :class:`ExactSum` of the weighted rows w_k·v_k.

    Each product w_k·v_k is taken in float64 (exact for a float32 row and an
    integer weight below 2²⁹, e.g. a sample count); the sum of the products is
    exact.

    Args:
        vectors: Stacked rows (m, dim), float32 or float64; m may be 0.
        weights: Weights (m,).

    Returns:
        The exact sum.

    Raises:
        ValueError: If a weighted row is not finite, or the shapes disagree.

    Example:
        >>> s = exact_sum(np.array([[1e30, 1.0], [-1e30, 2.0]]), [1.0, 1.0])
        >>> s.value().tolist(), float(s.weight)
        ([0.0, 3.0], 2.0)
    """
    rows = np.asarray(vectors)
    if rows.ndim != 2:
        raise ValueError(f"need an (m, dim) stack, got shape {rows.shape}")
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if len(w) != len(rows):
        raise ValueError(f"{len(rows)} rows but {len(w)} weights")
    m, dim = rows.shape
    weight = sum((Fraction(float(v)) for v in w), Fraction(0))
    if m and np.isfinite(w).all():
        fast = _exact_running_sum(rows * w[:, None])
        if fast is not None:
            return ExactSum(None, 0, weight, int(m), fast)
    acc = _Accumulator(dim)
    step = max(1, min(_BLOCK_ROWS, _BLOCK_ELEMENTS // max(dim, 1)))
    x = np.empty((step, dim), np.float64)
    t = np.empty((step, dim), np.float64)
    for start in range(0, m, step):
        block = rows[start : start + step]
        k = len(block)
        np.multiply(block, w[start : start + step, None], out=x[:k])
        _digits(x[:k], t[:k], acc)
    limbs, low = acc.limbs()
    return ExactSum(limbs, low, weight, int(m))


#: |exact sum / divisor| range where one float64 division, scaled or not, rounds
#: the same (no overflow, no subnormal result): implementation detail 5.
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
    p, dim = len(count), updates.shape[1]
    rank = np.argsort(-count, kind="stable")  # lanes with a k-th row: a prefix
    place = np.empty(p, np.int64)
    place[rank] = np.arange(p)
    slot = np.arange(len(row)) - np.repeat(np.cumsum(count) - count, count)
    s = np.zeros((p, dim))  # +0: a running sum from it is never -0
    exact = np.ones(p, bool)
    lanes = int(np.count_nonzero(count))
    x, t, d = (np.empty((lanes, dim)) for _ in range(3))
    same, also = np.empty((lanes, dim), bool), np.empty((lanes, dim), bool)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(int(count.max(initial=0))):
            at = np.flatnonzero(slot == k)
            at = at[np.argsort(place[row[at]])]
            n = len(at)
            head, xs, ts, ds = s[:n], x[:n], t[:n], d[:n]
            # w·u in float64 (a float32 → float64 cast is exact; one mixed-type
            # multiply costs several same-type passes)
            np.multiply(updates[at].astype(np.float64), weights[at, None], out=xs)
            if k == 0:
                np.add(head, xs, out=head)
                continue
            # t = head + x is exact iff t − head == x and t − x == head: the
            # subtraction of the larger operand is exact (Fast2Sum), so an
            # inexact t fails one of them; inf and nan fail too
            np.add(head, xs, out=ts)
            np.equal(np.subtract(ts, head, out=ds), xs, out=same[:n])
            np.equal(np.subtract(ts, xs, out=ds), head, out=also[:n])
            exact[:n] &= np.logical_and(same[:n], also[:n], out=same[:n]).all(axis=1)
            np.copyto(head, ts)
    return s[place], exact[place]


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


class _Accumulator:
    """Per-level digit sums of many rows: float64 while exact, then int64."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.fsum: dict[int, npt.NDArray[np.float64]] = {}  # Σ digit·2^b, exact
        self.rows: dict[int, int] = {}  # rows in fsum[level], ≤ 32 (< 2^(b+53))
        self.scaled: dict[int, bool] = {}  # fsum[level] holds digits, not ·2^b
        self.isum: dict[int, npt.NDArray[np.int64]] = {}  # Σ digits (< 2⁶³)
        self.flushes = 0
        self._limbs = np.zeros((0, dim), np.int64)
        self._low = 0

    def add(
        self, level: int, part: npt.NDArray[np.float64], rows: int, scaled: bool
    ) -> None:
        """Add the (dim,) digit sum of ``rows`` rows (×2^b unless ``scaled``)."""
        if level in self.fsum and (
            self.rows[level] + rows > _BLOCK_ROWS or self.scaled[level] != scaled
        ):
            self._flush(level)
        if level in self.fsum:
            self.fsum[level] += part
            self.rows[level] += rows
        else:
            self.fsum[level] = part.copy()
            self.rows[level] = rows
            self.scaled[level] = scaled

    def _flush(self, level: int) -> None:
        total = self.fsum.pop(level)
        self.rows.pop(level)
        scaled = self.scaled.pop(level)
        digits = (total if scaled else np.ldexp(total, -_L * level)).astype(np.int64)
        if level in self.isum:
            self.isum[level] += digits
        else:
            self.isum[level] = digits
        self.flushes += 1
        if self.flushes % 1000 == 0:  # each flush adds < 2⁵³: carry before 2⁶³
            self._carry()

    def _carry(self) -> None:
        if self.isum:
            lo = min(self.isum)
            digits = np.zeros((max(self.isum) - lo + 1, self.dim), np.int64)
            for level, d in self.isum.items():
                digits[level - lo] = d
            self._limbs, self._low = _add_limbs(self._limbs, self._low, digits, lo)
        self.isum = {}

    def limbs(self) -> tuple[npt.NDArray[np.int64], int]:
        """Return the normalised limbs and their lowest level."""
        for level in list(self.fsum):
            self._flush(level)
        self._carry()
        return self._limbs, self._low


def _digits(
    x: npt.NDArray[np.float64], t: npt.NDArray[np.float64], acc: _Accumulator
) -> None:
    """Split the rows of x into digits per level and add them to ``acc``.

    ``x`` is overwritten (it holds the residual); ``t`` is scratch space.
    """
    rows = len(x)
    hi_abs = max(float(x.max(initial=0.0)), -float(x.min(initial=0.0)))
    if not np.isfinite(hi_abs):  # max/min propagate nan
        raise ValueError(
            "a weighted update is not finite (inf or nan); reject it before summing"
        )
    if hi_abs == 0.0:
        return
    top = -((-(int(np.frexp(hi_abs)[1]) - _L + 1)) // _L)  # ceil: |x| < 2^(48 top + 47)
    level = top
    while True:  # ends by level −23 (b = −1104): every float64 bit is ≥ 2⁻¹⁰⁷⁴
        scaled = _split(x, t, _L * level)  # t = digits (·2^b unless scaled)
        acc.add(level, t[0] if rows == 1 else t.sum(axis=0), rows, scaled)
        if not x.any():  # residual all zero (a −0.0 compares equal to 0)
            break
        level -= 1


def _split(x: npt.NDArray[np.float64], hi: npt.NDArray[np.float64], b: int) -> bool:
    """Split x at level b in place: x ← x − d·2^b, with d = round(x / 2^b).

    Returns:
        False when ``hi`` holds d·2^b (the fast path), True when it holds d.
    """
    if -1074 <= b <= 960:
        c = np.ldexp(1.5, b + 52)
        np.add(x, c, out=hi)
        np.subtract(hi, c, out=hi)
        np.subtract(x, hi, out=x)
        return False
    # Outside the range of the constant: scale (exact where the digit is not 0).
    y = np.ldexp(x, -b)
    np.rint(y, out=hi)
    nz = hi != 0
    x[...] = np.where(nz, np.ldexp(y - hi, b), x)
    return True


def _add_limbs(
    a: npt.NDArray[np.int64], a_low: int, b: npt.NDArray[np.int64], b_low: int
) -> tuple[npt.NDArray[np.int64], int]:
    """Return the normalised sum of two limb arrays on the shared level grid."""
    if len(a) == 0:
        a_low = b_low
    if len(b) == 0:
        b_low = a_low
    low = min(a_low, b_low)
    high = max(a_low + len(a), b_low + len(b))
    out = np.zeros((high - low + 1, a.shape[1]), np.int64)  # one carry row
    out[a_low - low : a_low - low + len(a)] += a
    out[b_low - low : b_low - low + len(b)] += b
    out = _normalise(out)
    skip = 0
    while skip < len(out) and not out[skip].any():  # zero bottom rows: drop
        skip += 1
    return out[skip:], low + skip


def _normalise(limbs: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Carry so that every row but the last is in [0, 2⁴⁸) (in place; returned)."""
    mask = (1 << _L) - 1
    for j in range(len(limbs) - 1):
        carry = limbs[j] >> _L
        limbs[j] &= mask
        limbs[j + 1] += carry
    while len(limbs) and np.any(np.abs(limbs[-1]) > mask):
        carry = limbs[-1] >> _L
        limbs[-1] &= mask
        limbs = np.vstack([limbs, carry[None]])
    while len(limbs) >= 2:  # fold a top row of 0 / −1 (sign) into the row below
        top, below = limbs[-1], limbs[-2]
        if not np.all((top == 0) | ((top == -1) & (below > 0))):
            break
        limbs = limbs[:-1]
        limbs[-1] += top << _L
    if len(limbs) == 1 and not limbs[0].any():
        limbs = limbs[:0]
    return limbs


def _round(
    limbs: npt.NDArray[np.int64], low: int, divisor: float
) -> npt.NDArray[np.float64]:
    """Return RN64(exact sum) / divisor per element (see implementation detail 3)."""
    dim = limbs.shape[1]
    if len(limbs) == 0:
        return np.zeros(dim, np.float64)
    neg = limbs[-1] < 0
    mag = np.where(neg[None], -limbs, limbs)
    mag = _normalise(mag)  # all rows in [0, 2⁴⁸) now
    if len(mag) == 0:
        return np.zeros(dim, np.float64)
    pad = 3
    mag = np.vstack([np.zeros((pad, dim), np.int64), mag])
    nz = mag != 0
    n_rows = len(mag)
    top = n_rows - 1 - np.argmax(nz[::-1], axis=0)  # highest nonzero row
    zero = ~nz.any(axis=0)
    top = np.where(zero, pad, top)
    cols = np.arange(dim)
    a2 = mag[top, cols]
    a1 = mag[top - 1, cols]
    a0 = mag[top - 2, cols]
    below = np.logical_or.accumulate(nz, axis=0)[top - 3, cols]
    n = np.frexp(a2.astype(np.float64))[1].astype(np.int64)  # bit length, ≤ 48
    s = 62 - n  # a2 << s puts its leading bit at 61
    small = s <= _L
    sh1 = np.where(small, _L - s, 0)  # a1 >> sh1 when s ≤ 48
    up1 = np.where(small, 0, s - _L)  # a1 << up1 when s > 48
    sh0 = np.where(small, 0, 2 * _L - s)  # a0 >> sh0 when s > 48
    window = (a2 << s) | np.where(small, a1 >> sh1, (a1 << up1) | (a0 >> sh0))
    rest1 = np.where(small, a1 & ((np.int64(1) << sh1) - 1), 0) != 0
    rest0 = np.where(small, a0, a0 & ((np.int64(1) << sh0) - 1)) != 0
    window |= (rest1 | rest0 | below).astype(np.int64)
    exponent = _L * (top - pad + low) - s
    with np.errstate(over="ignore"):
        q = window.astype(np.float64) / divisor
        out = np.ldexp(q, exponent)
    out = np.where(neg, -out, out)
    return np.where(zero, 0.0, out)
