"""Conversions between decibel and linear units, shared by the wireless modules.

Symbol table (paper symbol → code name):

| Symbol        | Code name              | Unit |
|---------------|------------------------|------|
| P [dBm]       | ``power_dbm``          | dBm  |
| P [W]         | ``power_w``            | W    |
| x [dB]        | ``value_db``           | dB   |
| x (linear)    | ``value_linear``       | –    |

Definitions: P[dBm] = 10·log10(P[W] / 1 mW) and x[dB] = 10·log10(x).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["db_to_linear", "dbm_to_w", "linear_to_db", "power_levels_w", "w_to_dbm"]

ArrayLike = npt.ArrayLike
FloatArray = npt.NDArray[np.float64]


def db_to_linear(value_db: ArrayLike) -> FloatArray:
    """Convert a power ratio from dB to linear scale: 10^(x/10).

    Args:
        value_db: Ratio in dB, any shape, float.

    Returns:
        Linear ratio, same shape, float64.

    Example:
        >>> float(db_to_linear(30.0))
        1000.0
    """
    return np.power(10.0, np.asarray(value_db, dtype=np.float64) / 10.0)


def linear_to_db(value_linear: ArrayLike) -> FloatArray:
    """Convert a linear power ratio to dB: 10·log10(x); 0 maps to -inf.

    Args:
        value_linear: Non-negative linear ratio, any shape, float.

    Returns:
        Ratio in dB, same shape, float64.

    Example:
        >>> float(linear_to_db(100.0))
        20.0
    """
    with np.errstate(divide="ignore"):
        return 10.0 * np.log10(np.asarray(value_linear, dtype=np.float64))


def dbm_to_w(power_dbm: ArrayLike) -> FloatArray:
    """Convert a power from dBm to watts: 10^((P - 30)/10).

    Args:
        power_dbm: Power in dBm, any shape, float.

    Returns:
        Power in W, same shape, float64.

    Example:
        >>> float(dbm_to_w(30.0))
        1.0
    """
    return db_to_linear(np.asarray(power_dbm, dtype=np.float64) - 30.0)


def w_to_dbm(power_w: ArrayLike) -> FloatArray:
    """Convert a power from watts to dBm: 10·log10(P) + 30; 0 W maps to -inf.

    Args:
        power_w: Non-negative power in W, any shape, float.

    Returns:
        Power in dBm, same shape, float64.

    Example:
        >>> float(w_to_dbm(0.001))
        0.0
    """
    return linear_to_db(power_w) + 30.0


def power_levels_w(*, tx_power_dbm: float, power_levels: int) -> FloatArray:
    """List the discrete client power levels P·(l+1)/L, l = 0..L-1.

    Args:
        tx_power_dbm: Maximum transmit power P^th in dBm.
        power_levels: L, number of levels, >= 1.

    Returns:
        Power levels in W, shape (L,), increasing, last = P^th.

    Example:
        >>> power_levels_w(tx_power_dbm=30.0, power_levels=4).tolist()
        [0.25, 0.5, 0.75, 1.0]
    """
    if power_levels < 1:
        raise ValueError(f"power_levels must be >= 1, got {power_levels}")
    steps = np.arange(1, power_levels + 1, dtype=np.float64) / power_levels
    return float(dbm_to_w(tx_power_dbm)) * steps
