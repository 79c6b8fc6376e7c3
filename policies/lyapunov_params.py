"""The parameters of :class:`policies.lyapunov.LyapunovPolicy`: defaults and checks.

``DEFAULTS`` are the run constants' values when neither the user nor the run
gives them (:meth:`~policies.lyapunov.LyapunovPolicy.apply_context`).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["DEFAULTS", "check_choices"]


#: The run constants' defaults (passed > the run's > these).
DEFAULTS: dict[str, Any] = {
    "model_dim": 1_663_370,
    "bandwidth_hz": 15e3,
    "noise_psd_dbm_hz": -107.0 - 10.0 * math.log10(15e3),
    "tx_power_dbm": 30.0,
    "downlink_power_dbm": 23.0,
    "cycles_per_sample": 2e5,
    "cpu_freq_hz": 1.8e9,
    "compute_samples": None,
    "effective_capacitance": 2e-28,
    "beta": None,
    "fixed_sparsity": 1.0,
}


def check_choices(
    V: float = 1.0,
    min_sparsity: float = 1.0,
    fairness_queue: str = "as_printed",
    solver: str = "alternating",
    payload_mode: str = "sec2",
    fixed_sparsity: float = 1.0,
) -> None:
    """Raise ``ValueError`` for a parameter outside its range or choices."""
    if not V > 0:
        raise ValueError(f"V must be > 0, got {V}")
    for name, value in (
        ("min_sparsity", min_sparsity),
        ("fixed_sparsity", fixed_sparsity),
    ):
        if not 0 < value <= 1:
            raise ValueError(f"{name} must be in (0, 1], got {value}")
    for name, choice, allowed in (
        ("fairness_queue", fairness_queue, ("as_printed", "lower_bound")),
        ("solver", solver, ("alternating", "sweep")),
        ("payload_mode", payload_mode, ("sec2", "paper_sec5")),
    ):
        if choice not in allowed:
            raise ValueError(
                f"{name} must be {allowed[0]!r} or {allowed[1]!r}, got {choice!r}"
            )
