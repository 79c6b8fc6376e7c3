"""Exact sums as 48-bit integer limbs (:class:`ExactSum`, :func:`exact_sum`).

The module docstring of :mod:`rayfl.exactsum` describes the arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from rayfl.exactsum.fast import _exact_running_sum, _plain_division_is_exact

__all__ = ["LIMB_BITS", "ExactSum", "exact_sum"]

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
