"""Effective-bit coding of R-bit level indices: seed 000's Table III accounting.

Seed 000 (spec §5.2, Table III) sends, per parameter, only the *effective* bits
of its level index plus a sign bit, and an index list that run-length codes
consecutive parameters sharing the same bit count. B_q is the mean number of
quantization bits per parameter, B_o the mean overhead, and a parameter costs
min(R, B_q + B_o) bits (the sender falls back to plain R-bit codes when that is
cheaper).

Our reading of the coding (the paper gives no more detail):

1. Sign-magnitude level index. The 2^R levels χ_i = −A + iΔ are symmetric about
   0, so level i has sign s = [i < 2^{R−1}] and magnitude index
   j = abs(i − (2^R − 1)/2) − 1/2 in 0..2^{R−1} − 1 (j = 0 are the two levels
   ±Δ/2 nearest 0).
2. Quantization bits of a parameter: 1 (sign) + bit_length(j), at most R.
3. Overhead: the bit counts are run-length coded, each run costing a 4-bit width
   code plus a ⌈log2 d⌉-bit run length; if that exceeds 4 bits per parameter, a
   plain 4-bit width per parameter is sent instead. So B_o ≤ 4, the saturation
   visible in Table III's many 4.00 entries (the spec's reading).

Symbol table:

| paper symbol | code name |
|---|---|
| B_q | ``quantization_bits`` |
| B_o | ``overhead_bits`` |
| R | ``bits`` |
| abs(ω) | ``dim`` |
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "EffectiveBits",
    "effective_bits",
    "effective_bits_of_lengths",
    "magnitude_bit_lengths",
]

WIDTH_CODE_BITS = 4


@dataclass(frozen=True)
class EffectiveBits:
    """Per-parameter bit accounting of one payload (Table III).

    Attributes:
        quantization_bits: B_q, mean sign + magnitude bits per parameter.
        overhead_bits: B_o, mean width/run-length overhead per parameter (≤ 4).
        bits_per_parameter: min(R, B_q + B_o), what one parameter costs.
    """

    quantization_bits: float
    overhead_bits: float
    bits_per_parameter: float


def magnitude_bit_lengths(codes: npt.ArrayLike, *, bits: int) -> npt.NDArray[np.int64]:
    """Return bit_length(j) of each level index's magnitude j (module item 1).

    Args:
        codes: R-bit level indices i in 0..2^R − 1, shape (d,).
        bits: R ≥ 1.

    Returns:
        bit_length(j) in 0..R − 1, shape (d,), int64.

    Example:
        >>> magnitude_bit_lengths([0, 1, 2, 3], bits=2).tolist()  # j = 1, 0, 0, 1
        [1, 0, 0, 1]
    """
    i = np.asarray(codes, dtype=np.int64)
    half = 1 << (bits - 1)
    j = np.where(i >= half, i - half, half - 1 - i)
    # bit_length(j) is frexp's exponent: exact for integers, 0 for j = 0.
    _, length = np.frexp(j.astype(np.float64))
    return length.astype(np.int64)


def effective_bits(codes: npt.ArrayLike, *, bits: int) -> EffectiveBits:
    """Return B_q, B_o and the cost per parameter of one payload's codes.

    Args:
        codes: R-bit level indices, shape (d,), d ≥ 1.
        bits: R ≥ 1.

    Returns:
        The accounting of module notes items 1-3.

    Example:
        >>> e = effective_bits([32768] * 1000, bits=16)  # all +Δ/2: j = 0
        >>> e.quantization_bits, round(e.overhead_bits, 3)
        (1.0, 0.014)
    """
    lengths = magnitude_bit_lengths(codes, bits=bits)
    return effective_bits_of_lengths(lengths, fallback_bits=float(bits))


def effective_bits_of_lengths(
    lengths: npt.ArrayLike, *, fallback_bits: float
) -> EffectiveBits:
    """Return B_q, B_o and the cost per parameter of given magnitude bit lengths.

    The accounting of module notes items 2-3, for any signed index whose
    magnitude has ``lengths[i]`` bits (e.g. the dithered indices of
    ``rayfl.compression.dithering``).

    Args:
        lengths: bit_length of each index's magnitude, shape (d,), d ≥ 1.
        fallback_bits: Mean bits per parameter of the plain (uncoded) payload,
            the cap of the cost (R for fixed R-bit codes).

    Returns:
        B_q = 1 + mean length, B_o, and min(fallback, B_q + B_o).

    Example:
        >>> e = effective_bits_of_lengths([0, 3, 3, 3], fallback_bits=16)
        >>> e.quantization_bits, e.overhead_bits  # 2 runs of 4 + 2 bits over 4
        (3.25, 3.0)
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    dim = int(lengths.size)
    if dim == 0:
        raise ValueError("effective_bits needs at least one code")
    quantization = 1.0 + float(lengths.mean())
    runs = 1 + int(np.count_nonzero(np.diff(lengths)))
    run_cost = runs * (WIDTH_CODE_BITS + max(1, math.ceil(math.log2(dim))))
    overhead = min(float(WIDTH_CODE_BITS * dim), float(run_cost)) / dim
    return EffectiveBits(
        quantization, overhead, min(float(fallback_bits), quantization + overhead)
    )
