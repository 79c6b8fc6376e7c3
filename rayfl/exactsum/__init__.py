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

from rayfl.exactsum.fast import group_running_sums, plain_divisions
from rayfl.exactsum.limbs import LIMB_BITS, ExactSum, exact_sum

__all__ = [
    "LIMB_BITS",
    "ExactSum",
    "exact_sum",
    "group_running_sums",
    "plain_divisions",
]
