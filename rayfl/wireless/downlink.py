"""The quantized, noisy broadcast of the global model (seed 000 eq. 7, 13-14, 18).

The server quantizes the aggregate to R bits over ±C (Q_G, eq. 7) and broadcasts
it; each client receives its own copy, whose R-bit level indices suffer i.i.d.
bit flips at the client's downlink 256-QAM BER (eq. 13 with the BS power,
[AMBIG-2]), so an element is wrong with probability ρ_{n,G} = 1 − (1 − e)^R
(eq. 14) and stays inside [−C, C] (eq. 18, [AMBIG-1]).

Symbol table:

| paper symbol | code name | meaning |
|---|---|---|
| ω̃_G^t = Q_G(ω̃_L^t) | ``quantize_global`` | quantized global model |
| ω̂_{n,G}^t | ``receive_broadcast`` | client n's received copy |
| C, R | ``clip_norm``, ``bits`` | range ±C, bits per element |
| e_{n,G} | ``downlink_bit_error_rate`` | downlink BER of client n |
| P_BS | ``wireless.bs_tx_power_dbm`` | BS transmit power |

Implementation details:
    1. The downlink SNR is P_BS·abs(h_{n,G})²/(N0·B_dl), the fading drawn per
       (client, round) with the uplink's (``ChannelState``); B_dl is one
       subchannel B by default, or the whole band K·B with
       ``wireless.downlink_band: full`` (the two readings of [AMBIG-2]).
    2. A value already on the Q_G grid (the server's output) is re-coded exactly:
       decoding error is below 1e-7 of the range, far below Δ_G/2.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rayfl.compression.quantize import dequantize, quantize_codes
from rayfl.wireless.channel import ChannelState
from rayfl.wireless.effects import flip_bits
from rayfl.wireless.modulation import qam_bit_error_rate
from rayfl.wireless.units import db_to_linear

__all__ = ["downlink_bit_error_rate", "quantize_global", "receive_broadcast"]


def downlink_bit_error_rate(
    state: ChannelState, *, qam_order: int
) -> npt.NDArray[np.float64]:
    """Return each client's downlink BER of one round, eq. 13 at the BS power.

    Args:
        state: The round's channel realisation (``downlink_snr_db``, (N,)).
        qam_order: M of the square QAM (256 in seed 000).

    Returns:
        BER per client, shape (N,), float64 in [0, 0.5].
    """
    snr = db_to_linear(np.asarray(state.downlink_snr_db, dtype=np.float64))
    return qam_bit_error_rate(snr, qam_order=qam_order)


def quantize_global(
    vector: npt.ArrayLike, *, clip_norm: float, bits: int
) -> npt.NDArray[np.float32]:
    """Return Q_G(ω): round-to-nearest R-bit quantization over [−C, C], eq. 7.

    Args:
        vector: The aggregate ω̃_L, shape (d,).
        clip_norm: C > 0.
        bits: R in [1, 32].

    Returns:
        float32 levels, shape (d,); values outside ±C saturate.

    Example:
        >>> quantize_global([0.3, 5.0], clip_norm=1.0, bits=1).tolist()
        [1.0, 1.0]
    """
    codes = quantize_codes(vector, lo=-clip_norm, hi=clip_norm, bits=bits)
    return dequantize(codes, lo=-clip_norm, hi=clip_norm, bits=bits)


def receive_broadcast(
    vector: npt.ArrayLike,
    *,
    clip_norm: float,
    bits: int,
    bit_error_rate: float,
    rng: np.random.Generator,
) -> tuple[npt.NDArray[np.float32], int]:
    """Return one client's copy of the broadcast Q_G(ω) and its wrong elements, eq. 18.

    Args:
        vector: The broadcast model (normally already on the Q_G grid), (d,).
        clip_norm: C > 0, the downlink range ±C.
        bits: R, bits per element.
        bit_error_rate: The client's downlink BER e in [0, 1].
        rng: Generator keyed (seed, "downlink", round, client).

    Returns:
        The received float32 vector (d,) and the number of corrupted elements.

    Example:
        >>> import numpy as np
        >>> x, wrong = receive_broadcast([0.5], clip_norm=1.0, bits=8,
        ...     bit_error_rate=0.0, rng=np.random.default_rng(0))
        >>> wrong
        0
    """
    codes = quantize_codes(vector, lo=-clip_norm, hi=clip_norm, bits=bits)
    if bit_error_rate > 0:
        received = flip_bits(
            codes, bits_per_element=bits, bit_error_rate=bit_error_rate, rng=rng
        )
    else:
        received = codes
    wrong = int(np.count_nonzero(received != codes))
    return dequantize(received, lo=-clip_norm, hi=clip_norm, bits=bits), wrong
