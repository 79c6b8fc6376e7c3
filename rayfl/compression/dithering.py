"""Subtractive dithered quantization with gamma steps: seed 000's Dithering baseline.

Seed 000 (spec §5.2, [AMBIG-11]) compares its mechanism with P2CEFL's dithering
(Wang et al. TMC'24), which the paper describes only as "subtractive dithered
quantization, the step drawn from gamma random variables, a dither from a seed
shared with the server, a number of bits that varies per client". This module is
the spec's recommended reconstruction, a Laplace mechanism:

1. per coordinate i of a client's clipped model x (abs(x_i) ≤ C), per client, per
   round: Γ_i ~ Gamma(shape 2, scale b), step Δ_i = 2Γ_i, dither
   u_i ~ U(−Δ_i/2, Δ_i/2), all drawn from ``rng_for(seed, "dither", round,
   client)`` — a key the server knows, so Δ and u never travel;
2. the client sends the level index k_i = ⌊(x_i + u_i)/Δ_i + 1/2⌋;
3. the server decodes x̂_i = k_i·Δ_i − u_i. Given Δ_i the error x̂_i − x_i is
   U(−Δ_i/2, Δ_i/2) whatever x_i (subtractive dither), and a uniform on
   (−Γ, Γ) with Γ ~ Gamma(2, b) is Laplace(0, b): x̂ = x + Laplace(b) noise.

With b = Δs/(ε_Q/T0) every *coordinate* of an upload is (ε_Q/T0)-DP at
sensitivity Δs (spec §5.2); the whole d-vector, whose L1 sensitivity under a
C clip is up to 2C·√d, is only (2C·√d/b)-DP per upload. The run's ledger
reports that vector ε (``rayfl.privacy.sensitivity.laplace_vector_epsilon``);
ε_Q is the paper's nominal value, not a guarantee.

Bits. Since abs(x_i + u_i) ≤ C + Δ_i/2, k_i lies in −K_i..K_i with
K_i = ⌊C/Δ_i + 1⌋. The index travels in offset binary, c_i = k_i + K_i, on
w_i = ⌈log2(2K_i + 1)⌉ bits, which equals 1 sign bit + ⌈log2(K_i + 1)⌉
magnitude bits exactly (2K_i + 1 is odd, never a power of two). The server knows
w_i from Δ_i, so no width code is sent: an upload costs Σ_i w_i bits. Small steps
mean long strings — the paper's explanation of why Dithering loses on a noisy
channel.

Bit errors. Each of the w_i bits of c_i flips independently with the link's BER
e (a coordinate is hit with probability 1 − (1 − e)^{w_i}, eq. 14 with R = w_i);
flipping bit j moves the decoded value by ±Δ_i·2^j. A corrupted c_i above 2K_i
decodes literally, to a level just beyond ±(C + Δ_i/2) (at most 2^{w_i}Δ_i away
from x_i), as a receiver that does not range-check would.

Symbol table:

| paper / spec symbol | code name |
|---|---|
| b = Δs/(ε_Q/T0) | ``laplace_scale`` |
| Γ_i, Δ_i = 2Γ_i | ``steps`` |
| u_i | ``dither`` |
| C | ``clip_norm`` |
| k_i, c_i = k_i + K_i | ``codes`` (offset binary) |
| K_i = ⌊C/Δ_i + 1⌋ | ``level_offsets`` |
| w_i = ⌈log2(2K_i + 1)⌉ | ``index_widths`` |

Implementation details:
    1. Steps are floored at C·2^−30 so every index fits 32 bits (w_i ≤ 32); with
       b ≥ 1e−6·C the floor binds with probability below 1e−18 per coordinate.
    2. The payload keeps its (seed, round, client) key and the Laplace scale, and
       the server regenerates Δ and u from them: the emulator never ships them.
    3. The engine's ``bit_flip`` effect flips the low max_i w_i bits of every code
       (``flip_bits``); ``DitheredPayload.with_codes`` then keeps only the low w_i
       bits of coordinate i. Since c_i < 2^{w_i} and bits flip independently, this
       is exactly an i.i.d. Bernoulli(e) flip of each of the w_i bits sent.
    4. Arithmetic is float64; decoded values are float32.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from rayfl.compression.payload import Payload
from rayfl.seeding import rng_for

__all__ = [
    "DitheredPayload",
    "decode_indices",
    "dither_draws",
    "dither_encode",
    "encode_indices",
    "index_widths",
    "level_offsets",
]

#: Smallest step as a fraction of C (module notes item 1): keeps w_i ≤ 32.
MIN_STEP_FRACTION = 2.0**-30


def dither_draws(
    dim: int, *, laplace_scale: float, clip_norm: float, rng: np.random.Generator
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Draw the steps Δ_i = 2Γ_i, Γ_i ~ Gamma(2, b), and dithers u_i ~ U(±Δ_i/2).

    Args:
        dim: Number of coordinates d.
        laplace_scale: b > 0.
        clip_norm: C > 0 (for the step floor, module notes item 1).
        rng: The shared generator (``rng_for(seed, "dither", round, client)``).

    Returns:
        (steps, dither), float64, shape (d,) each.

    Raises:
        ValueError: If b or C is not positive and finite.
    """
    if not (np.isfinite(laplace_scale) and laplace_scale > 0):
        raise ValueError(f"laplace_scale must be finite and > 0, got {laplace_scale}")
    if not (np.isfinite(clip_norm) and clip_norm > 0):
        raise ValueError(f"clip_norm must be finite and > 0, got {clip_norm}")
    gamma = rng.gamma(shape=2.0, scale=laplace_scale, size=dim)
    steps = np.maximum(2.0 * gamma, clip_norm * MIN_STEP_FRACTION)
    dither = (rng.random(dim) - 0.5) * steps
    return steps, dither


def level_offsets(steps: npt.ArrayLike, *, clip_norm: float) -> npt.NDArray[np.int64]:
    """Return K_i = ⌊C/Δ_i + 1⌋, the largest index magnitude of coordinate i.

    Example:
        >>> level_offsets([4.0, 1.0, 0.3], clip_norm=1.0).tolist()
        [1, 2, 4]
    """
    step = np.asarray(steps, dtype=np.float64)
    return np.floor(clip_norm / step + 1.0).astype(np.int64)


def index_widths(steps: npt.ArrayLike, *, clip_norm: float) -> npt.NDArray[np.uint8]:
    """Return w_i = ⌈log2(2K_i + 1)⌉, the bits of coordinate i's index.

    Example:
        >>> index_widths([4.0, 1.0, 0.3], clip_norm=1.0).tolist()  # 3, 5, 9 levels
        [2, 3, 4]
    """
    offsets = level_offsets(steps, clip_norm=clip_norm)
    # bit_length(2K) = ⌈log2(2K + 1)⌉; frexp's exponent is exact for integers.
    _, exponent = np.frexp((2 * offsets).astype(np.float64))
    return exponent.astype(np.uint8)


def encode_indices(
    values: npt.ArrayLike,
    steps: npt.ArrayLike,
    dither: npt.ArrayLike,
    *,
    clip_norm: float,
) -> npt.NDArray[np.uint32]:
    """Return the offset-binary codes c_i = ⌊(x_i + u_i)/Δ_i + 1/2⌋ + K_i.

    Args:
        values: Clipped values x, abs(x_i) ≤ C, shape (d,).
        steps: Δ, shape (d,).
        dither: u, shape (d,).
        clip_norm: C.

    Returns:
        Codes in 0..2K_i, uint32, shape (d,).

    Raises:
        ValueError: If a value lies outside [−C, C] (it was not clipped).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size and float(np.max(np.abs(x))) > clip_norm * (1 + 1e-6):
        raise ValueError(
            f"dithered quantization needs abs(x_i) <= C = {clip_norm} (clip the "
            f"model first), got {float(np.max(np.abs(x)))}"
        )
    step = np.asarray(steps, dtype=np.float64)
    index = np.floor((x + np.asarray(dither, dtype=np.float64)) / step + 0.5)
    offsets = level_offsets(step, clip_norm=clip_norm)
    codes = np.clip(index.astype(np.int64) + offsets, 0, 2 * offsets)
    return codes.astype(np.uint32)  # type: ignore[no-any-return]  # numpy stubs: Any


def decode_indices(
    codes: npt.ArrayLike,
    steps: npt.ArrayLike,
    dither: npt.ArrayLike,
    *,
    clip_norm: float,
) -> npt.NDArray[np.float32]:
    """Return the server's x̂_i = (c_i − K_i)·Δ_i − u_i.

    Example:
        >>> decode_indices([1, 2], [1.0, 1.0], [0.25, -0.25], clip_norm=1.0).tolist()
        [-1.25, 0.25]
    """
    step = np.asarray(steps, dtype=np.float64)
    offsets = level_offsets(step, clip_norm=clip_norm)
    index = np.asarray(codes, dtype=np.int64) - offsets
    return (index * step - np.asarray(dither, dtype=np.float64)).astype(np.float32)


@dataclass(frozen=True, eq=False)
class DitheredPayload(Payload):
    """A dense upload of dithered level indices (codes) of variable width.

    ``codes`` are offset-binary indices, ``values`` their decoding,
    ``bits_per_element`` the widest index (what ``flip_bits`` touches), ``lo``/
    ``hi`` the nominal range ±C (decoding uses the steps, not them).

    Attributes:
        widths: w_i, bits of each index, uint8 (d,).
        laplace_scale: b of the steps' gamma law.
        dither_key: (seed, round, client) of ``rng_for(seed, "dither", ...)``.
    """

    widths: npt.NDArray[np.uint8] | None = None
    laplace_scale: float = 0.0
    dither_key: tuple[int, int, int] = (0, 0, 0)

    def __post_init__(self) -> None:
        """Check the base fields and that every coordinate has a width."""
        super().__post_init__()
        if self.widths is None or self.widths.shape != (self.dim,):
            raise ValueError(f"dithered payload needs widths of shape ({self.dim},)")
        if self.indices is not None or self.codes is None:
            raise ValueError("a dithered payload is dense and carries codes")

    @property
    def payload_bits(self) -> float:
        """Uplink size: Σ_i w_i (the server knows each w_i, no width code)."""
        assert self.widths is not None  # checked in __post_init__
        return float(np.sum(self.widths, dtype=np.int64))

    def draws(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Regenerate (Δ, u) from the shared key, as the server does."""
        seed, round, client = self.dither_key
        return dither_draws(
            self.dim,
            laplace_scale=self.laplace_scale,
            clip_norm=float(self.hi),  # type: ignore[arg-type]
            rng=rng_for(seed, "dither", round=round, client=client),
        )

    def with_codes(self, new_codes: npt.NDArray[np.unsignedinteger]) -> Payload:
        """Return the payload the server decodes from ``new_codes``.

        Only the low w_i bits of code i count (module notes item 3).

        Args:
            new_codes: Received codes, unsigned, shape (d,).

        Returns:
            A new dithered payload with the received codes and their decoding.

        Raises:
            ValueError: If the shape differs.
        """
        codes = np.asarray(new_codes)
        if codes.shape != self.codes.shape:  # type: ignore[union-attr]
            raise ValueError(
                f"new_codes must have shape {self.codes.shape}, got {codes.shape}"  # type: ignore[union-attr]
            )
        widths = self.widths.astype(np.uint64)  # type: ignore[union-attr]
        mask = (np.uint64(1) << widths) - np.uint64(1)
        kept = (codes.astype(np.uint64) & mask).astype(np.uint32)
        steps, dither = self.draws()
        values = decode_indices(kept, steps, dither, clip_norm=float(self.hi))  # type: ignore[arg-type]
        return replace(self, values=values, codes=kept)


def dither_encode(
    values: npt.ArrayLike,
    *,
    laplace_scale: float,
    clip_norm: float,
    seed: int,
    round: int,
    client: int,
) -> DitheredPayload:
    """Dither-quantize a client's clipped model with the shared key's draws.

    Args:
        values: Clipped model x, abs(x_i) ≤ C, shape (d,).
        laplace_scale: b > 0.
        clip_norm: C > 0.
        seed: The run's seed.
        round: Round t.
        client: Client n.

    Returns:
        The payload (codes, decoded values x + Laplace(b) noise, widths).

    Example:
        >>> p = dither_encode([0.5, -0.5], laplace_scale=0.1, clip_norm=1.0,
        ...                   seed=0, round=0, client=0)
        >>> p.payload_bits == float(p.widths.sum())
        True
    """
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    steps, dither = dither_draws(
        x.size,
        laplace_scale=laplace_scale,
        clip_norm=clip_norm,
        rng=rng_for(seed, "dither", round=round, client=client),
    )
    codes = encode_indices(x, steps, dither, clip_norm=clip_norm)
    widths = index_widths(steps, clip_norm=clip_norm)
    return DitheredPayload(
        dim=int(x.size),
        values=decode_indices(codes, steps, dither, clip_norm=clip_norm),
        codes=codes,
        bits_per_element=int(widths.max()) if widths.size else 1,
        lo=-float(clip_norm),
        hi=float(clip_norm),
        widths=widths,
        laplace_scale=float(laplace_scale),
        dither_key=(int(seed), int(round), int(client)),
    )
