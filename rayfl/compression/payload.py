"""What travels on the uplink: a dense or sparse, optionally quantized model vector.

Symbol table:

| paper symbol | code name | meaning |
|---|---|---|
| abs(ω) (seed 000), abs(w) (seed 002) | ``dim`` | number of model parameters d |
| R (seed 000 §2.4) | ``bits_per_element`` | bits per transmitted value (32 = float32) |
| [−A_L, A_L] (seed 000 eq. 6) | ``lo``, ``hi`` | quantizer range |
| Δ, χ_i = lo + i·Δ (seed 000 eq. 6) | ``quantize_step``, ``dequantize`` | level spacing, levels of the codes |
| 1/s (unbiased sparsifier) | ``scale`` | multiplier applied to the values on decoding |
| Z_i^t (seed 002 §2.3) | ``payload_bits`` | uplink payload size in bits |

Implementation details:

1. Index overhead of a sparse payload is the cheaper of a list of kept indices
   (⌈log2 d⌉ bits each) and a d-bit keep-bitmap; seed 002 §2.3 uses the bitmap
   (Z = 32·s·d + d), which this rule reproduces whenever s·⌈log2 d⌉ ≥ 1.
2. The header (``lo``, ``hi``, ``scale``, ``dim``) is not counted in
   ``payload_bits``: it is a constant of a few floats, negligible against d, and
   leaving it out makes a dense R-bit payload exactly R·d bits (seed 000 r_min,
   eq. 10).
3. ``scale`` is kept apart from ``values`` so that quantization acts on the raw
   (clipped, noised) values whose range is known (±(C + 3σ)); the 1/p rescaling
   of random sparsification is applied only when decoding.
4. ``with_codes`` is the hook for seed 000 [AMBIG-1]: channel errors are real bit
   flips of the R-bit level index, so corrupted values stay inside [lo, hi].
5. ``payload_bits`` is the measured size that seed 000 [AMBIG-3] recommends for
   r_min, and seed 002's default payload mode "sec2" ([AMBIG-6]).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt


def quantize_step(*, lo: float, hi: float, bits: int) -> float:
    """Return the level spacing Δ = (hi − lo)/(2^R − 1), seed 000 eq. 6.

    Args:
        lo: Lower end of the range.
        hi: Upper end of the range (≥ lo).
        bits: R, integer in [1, 32].

    Returns:
        Δ (same unit as the values).

    Example:
        >>> quantize_step(lo=-1.0, hi=1.0, bits=1)
        2.0
    """
    return (hi - lo) / float((1 << bits) - 1)


def dequantize(
    codes: npt.ArrayLike, *, lo: float, hi: float, bits: int
) -> npt.NDArray[np.float32]:
    """Map R-bit codes back to their levels χ_i = lo + i·Δ, seed 000 eq. 6.

    Args:
        codes: Integer codes, shape (k,).
        lo: Lower end of the range.
        hi: Upper end of the range.
        bits: R, integer in [1, 32].

    Returns:
        float32 levels, shape (k,).

    Example:
        >>> dequantize([0, 1, 3], lo=-1.0, hi=2.0, bits=2).tolist()
        [-1.0, 0.0, 2.0]
    """
    step = quantize_step(lo=lo, hi=hi, bits=bits)
    levels = lo + np.asarray(codes, dtype=np.float64) * step
    return levels.astype(np.float32)


def payload_size_bits(
    *, dim: int, carried: float, bits_per_element: int, sparse: bool
) -> float:
    """Return the uplink size of a payload carrying ``carried`` of ``dim`` values.

    Value bits are ``bits_per_element`` per carried value; a sparse payload adds
    min(k·⌈log2 d⌉, d) bits of indices (index list or bitmap, module notes item 1).
    ``carried`` may be an expected count (e.g. p·d for random sparsification).

    Example:
        >>> payload_size_bits(dim=1024, carried=10, bits_per_element=16, sparse=True)
        260
    """
    value_bits = carried * bits_per_element
    if not sparse:
        return value_bits
    return value_bits + min(carried * math.ceil(math.log2(dim)), dim)


@dataclass(frozen=True, eq=False)
class Payload:
    """An uplink message: values (dense or sparse), optional integer codes.

    Attributes:
        dim: Length d of the decoded model vector.
        values: float32 values, shape (d,) when dense or (k,) for the k kept
            coordinates when sparse. When quantized they equal the dequantized
            ``codes``.
        indices: int32 positions of the kept coordinates, shape (k,), sorted
            ascending; ``None`` when dense.
        codes: Unsigned integer quantization codes, same shape as ``values``
            (uint8/uint16/uint32 by ``bits_per_element``); ``None`` when not
            quantized. A channel flips their low ``bits_per_element`` bits.
        bits_per_element: Bits per transmitted value: R when quantized, else 32.
        lo: Lower end of the quantizer range; ``None`` when not quantized.
        hi: Upper end of the quantizer range; ``None`` when not quantized.
        scale: Multiplier applied to ``values`` by ``to_dense`` (1/p for unbiased
            random sparsification, else 1.0).
    """

    dim: int
    values: npt.NDArray[np.float32]
    indices: npt.NDArray[np.int32] | None = None
    codes: npt.NDArray[np.unsignedinteger] | None = None
    bits_per_element: int = 32
    lo: float | None = None
    hi: float | None = None
    scale: float = 1.0

    def __post_init__(self) -> None:
        """Check that the fields are mutually consistent.

        Raises:
            ValueError: If shapes, dtypes or the quantization fields disagree.
        """
        expected = self.dim if self.indices is None else self.indices.shape[0]
        if self.values.shape != (expected,):
            raise ValueError(
                f"payload.values must have shape ({expected},), got {self.values.shape}"
            )
        if self.codes is not None:
            if self.codes.shape != self.values.shape:
                raise ValueError(
                    f"payload.codes must have shape {self.values.shape}, got "
                    f"{self.codes.shape}"
                )
            if not np.issubdtype(self.codes.dtype, np.unsignedinteger):
                raise ValueError(
                    f"payload.codes must be unsigned integers, got {self.codes.dtype}"
                )
            if self.lo is None or self.hi is None:
                raise ValueError("payload.lo and payload.hi are required with codes")
        if not 1 <= self.bits_per_element <= 32:
            raise ValueError(
                f"payload.bits_per_element must be in [1, 32], got "
                f"{self.bits_per_element}"
            )

    @classmethod
    def dense(cls, vector: npt.ArrayLike) -> Payload:
        """Wrap a dense float vector as an unquantized payload.

        Args:
            vector: Model vector, shape (d,), any float dtype (stored as float32).

        Returns:
            A dense payload of 32·d bits.

        Example:
            >>> Payload.dense([1.0, 2.0]).payload_bits
            64
        """
        values = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
        return cls(dim=int(values.shape[0]), values=values)

    @property
    def is_sparse(self) -> bool:
        """Whether only the kept coordinates are carried."""
        return self.indices is not None

    @property
    def payload_bits(self) -> float:
        """Uplink size in bits: value bits plus the index overhead when sparse.

        Value bits are ``bits_per_element`` per carried value. A sparse payload
        adds min(k·⌈log2 d⌉, d) bits (index list or bitmap, see module notes).
        """
        return payload_size_bits(
            dim=self.dim,
            carried=int(self.values.shape[0]),
            bits_per_element=self.bits_per_element,
            sparse=self.indices is not None,
        )

    def to_dense(self) -> npt.NDArray[np.float32]:
        """Decode into a dense model vector.

        Returns:
            float32 array of shape (dim,): ``scale·values`` at ``indices`` (or
            everywhere when dense) and 0 at dropped coordinates.

        Example:
            >>> import numpy as np
            >>> p = Payload(dim=3, values=np.array([2.0], np.float32),
            ...             indices=np.array([1], np.int32), scale=0.5)
            >>> p.to_dense().tolist()
            [0.0, 1.0, 0.0]
        """
        scaled = self.values * np.float32(self.scale)
        if self.indices is None:
            return scaled.astype(np.float32, copy=True)
        dense = np.zeros(self.dim, dtype=np.float32)
        dense[self.indices] = scaled
        return dense

    def with_codes(self, new_codes: npt.NDArray[np.unsignedinteger]) -> Payload:
        """Return a copy carrying ``new_codes`` (e.g. after channel bit flips).

        The values are recomputed by dequantizing ``new_codes`` over [lo, hi]
        with ``bits_per_element`` bits; only the low R bits of each code are used.

        Args:
            new_codes: Unsigned integer codes, same shape as ``codes``.

        Returns:
            A new payload with the same indices, range and scale.

        Raises:
            ValueError: If this payload is not quantized or shapes differ.

        Example:
            >>> import numpy as np
            >>> p = Payload(dim=2, values=np.array([-1.0, -1.0], np.float32),
            ...             codes=np.array([0, 0], np.uint8), bits_per_element=1,
            ...             lo=-1.0, hi=1.0)
            >>> p.with_codes(np.array([0, 1], np.uint8)).to_dense().tolist()
            [-1.0, 1.0]
        """
        if self.codes is None or self.lo is None or self.hi is None:
            raise ValueError("payload.with_codes needs a quantized payload")
        codes = np.asarray(new_codes)
        if codes.shape != self.codes.shape:
            raise ValueError(
                f"new_codes must have shape {self.codes.shape}, got {codes.shape}"
            )
        mask = (1 << self.bits_per_element) - 1
        codes = (codes & mask).astype(self.codes.dtype, copy=False)
        values = dequantize(codes, lo=self.lo, hi=self.hi, bits=self.bits_per_element)
        return replace(self, values=values, codes=codes)
