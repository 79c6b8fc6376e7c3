"""Uniform R-bit quantization: deterministic round-to-nearest or stochastic.

The quantizer has 2^R levels χ_i = lo + i·Δ, i = 0..2^R − 1, with step
Δ = (hi − lo)/(2^R − 1) (seed 000 eq. 6-8). Values outside [lo, hi] are clamped
to the end levels (saturation, as seed 000's privacy proof assumes, eq. 43).

Symbol table:

| paper symbol | code name | meaning |
|---|---|---|
| R (seed 000 §2.4) | ``bits`` | bits per element |
| Δ_L, Δ_G (seed 000 eq. 6-7) | ``quantize_step`` | level spacing (hi − lo)/(2^R − 1) |
| A_L = C + 3σ_DP (seed 000 eq. 6) | ``uplink_range`` | uplink range ±A_L |
| χ_i (seed 000 eq. 6) | ``dequantize(codes)`` | reconstruction levels |
| E_L^max = Δ_L/2 (seed 000 eq. 7) | – | worst-case error of round-to-nearest |

``quantize_step`` and ``dequantize`` live in :mod:`rayfl.compression.payload`
(a quantized payload decodes its own codes) and are re-exported here.

Implementation details:

1. Deterministic rounding is round-half-up, ⌊t + 1/2⌋ with t = (x − lo)/Δ, so the
   error inside [lo, hi] is at most Δ/2 (seed 000 eq. 7).
2. Stochastic rounding is ⌊t + U⌋ with U ~ U[0, 1): it rounds up with probability
   equal to the fractional part, hence E[Q(x)] = x for x in [lo, hi], and the
   error is below one step. Clamping happens before rounding, so it is unbiased
   only inside the range.
3. Arithmetic is float64; decoded values are float32, which adds a relative
   rounding error of about 6e-8 of the range (below Δ/2 for R ≤ 22).
4. A degenerate range (hi == lo, e.g. ``minmax`` of a constant vector) gives code
   0 everywhere and decodes to lo exactly.
5. The uplink range is ±(C + 3σ_DP) with σ_DP the noise added on the client; with
   the noise moved to the server (hierarchical DP) σ_DP = 0 and the range is ±C.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rayfl.compression.payload import Payload, dequantize, quantize_step

__all__ = [
    "code_dtype",
    "dequantize",
    "minmax_range",
    "quantize",
    "quantize_codes",
    "quantize_step",
    "uplink_range",
]


def code_dtype(bits: int) -> np.dtype[np.unsignedinteger]:
    """Return the smallest unsigned dtype that holds R-bit codes.

    Args:
        bits: R, integer in [1, 32].

    Returns:
        ``uint8`` for R ≤ 8, ``uint16`` for R ≤ 16, else ``uint32``.

    Raises:
        ValueError: If R is outside [1, 32].

    Example:
        >>> code_dtype(16)
        dtype('uint16')
    """
    if not 1 <= bits <= 32:
        raise ValueError(f"bits must be in [1, 32], got {bits}")
    if bits <= 8:
        return np.dtype(np.uint8)
    if bits <= 16:
        return np.dtype(np.uint16)
    return np.dtype(np.uint32)


def uplink_range(*, clip_norm: float, noise_std: float) -> tuple[float, float]:
    """Return the uplink range ±A_L with A_L = C + 3σ_DP, seed 000 eq. 6.

    Args:
        clip_norm: C, the L2 clipping threshold.
        noise_std: σ_DP, per-coordinate std of the noise added on the client.

    Returns:
        (lo, hi) = (−A_L, A_L).

    Example:
        >>> uplink_range(clip_norm=3.0, noise_std=0.5)
        (-4.5, 4.5)
    """
    amplitude = float(clip_norm) + 3.0 * float(noise_std)
    return -amplitude, amplitude


def quantize_codes(
    values: npt.ArrayLike,
    *,
    lo: float,
    hi: float,
    bits: int,
    rng: np.random.Generator | None = None,
) -> npt.NDArray[np.unsignedinteger]:
    """Map values to R-bit integer codes over [lo, hi] (values outside are clamped).

    Args:
        values: Values to quantize, shape (k,), float.
        lo: Lower end of the range.
        hi: Upper end of the range (≥ lo).
        bits: R, integer in [1, 32].
        rng: Generator for stochastic rounding; ``None`` = deterministic
            round-to-nearest.

    Returns:
        Codes in [0, 2^R − 1], shape (k,), dtype ``code_dtype(bits)``.

    Raises:
        ValueError: If hi < lo or the range is not finite.

    Example:
        >>> quantize_codes([-1.0, 0.2, 5.0], lo=-1.0, hi=1.0, bits=2).tolist()
        [0, 2, 3]
    """
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi < lo:
        raise ValueError(
            f"quantizer range must be finite with lo <= hi, got [{lo}, {hi}]"
        )
    dtype = code_dtype(bits)
    x = np.asarray(values, dtype=np.float64)
    top = float((1 << bits) - 1)
    step = quantize_step(lo=lo, hi=hi, bits=bits)
    if step == 0.0:
        return np.zeros(x.shape, dtype=dtype)
    scaled = (np.clip(x, lo, hi) - lo) / step
    offset = 0.5 if rng is None else rng.random(x.shape)
    codes = np.clip(np.floor(scaled + offset), 0.0, top)
    return codes.astype(dtype)


def quantize(
    data: npt.ArrayLike | Payload,
    *,
    lo: float,
    hi: float,
    bits: int,
    rng: np.random.Generator | None = None,
) -> Payload:
    """Quantize a dense vector or the values of an unquantized payload.

    Args:
        data: Dense vector, shape (d,), float; or an unquantized ``Payload``
            (its indices and scale are kept).
        lo: Lower end of the range; values below are clamped to it.
        hi: Upper end of the range; values above are clamped to it.
        bits: R, integer in [1, 32].
        rng: Generator for stochastic (unbiased) rounding; ``None`` =
            deterministic round-to-nearest.

    Returns:
        A payload with ``codes`` (unsigned, R bits used), dequantized float32
        ``values`` and ``bits_per_element = R``.

    Raises:
        ValueError: If ``data`` is already quantized or the range is invalid.

    Example:
        >>> quantize([0.0, 1.0], lo=0.0, hi=1.0, bits=4).payload_bits
        8
    """
    base = data if isinstance(data, Payload) else Payload.dense(data)
    if base.codes is not None:
        raise ValueError("payload is already quantized")
    codes = quantize_codes(base.values, lo=lo, hi=hi, bits=bits, rng=rng)
    return Payload(
        dim=base.dim,
        values=dequantize(codes, lo=lo, hi=hi, bits=bits),
        indices=base.indices,
        codes=codes,
        bits_per_element=bits,
        lo=float(lo),
        hi=float(hi),
        scale=base.scale,
    )


def minmax_range(values: npt.ArrayLike) -> tuple[float, float]:
    """Return (min, max) of the values, the ``quantize_range="minmax"`` rule.

    Args:
        values: Values to be quantized, shape (k,); empty gives (0.0, 0.0).

    Returns:
        (lo, hi) as Python floats.

    Example:
        >>> minmax_range([3.0, -1.0, 2.0])
        (-1.0, 3.0)
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return 0.0, 0.0
    return float(x.min()), float(x.max())
