"""Noise of seed 000's DP-mechanism baselines (Fig. 2, Table III; spec §5.2).

Each baseline protects T0 uploads of a clipped model at (ε_Q, δ_Q); they differ
in how σ (or the Laplace scale b) follows from the budget:

| mechanism | noise | formula |
|---|---|---|
| proposed | Gaussian σ_DP | Theorem 1 (``wpfl_noise_std``) or Table II |
| gaussian (NbAFL, Wei et al. TIFS'20) | Gaussian | σ = c·T0·Δs/ε, c = √(2 ln(1.25/δ)) |
| ma (moments accountant) | Gaussian | σ = z(q, T0, ε, δ)·Δs, z from the RDP accountant |
| perfect_gaussian | Gaussian | NbAFL's σ, no quantization, no channel errors |
| dithering (P2CEFL, reconstructed) | Laplace(b) | b = Δs/(ε/T0), from dithered quantization |
| none | – | σ = 0 |

Symbol table:

| paper symbol | code name |
|---|---|
| ε_Q, δ_Q | ``epsilon``, ``delta`` |
| T0 | ``max_uploads`` |
| Δs | ``sensitivity`` |
| q | ``sample_rate`` (``privacy.calibration_sample_rate``: σ only) |
| c | √(2 ln(1.25/δ)) (Dwork & Roth Thm A.1) |
| b | ``laplace_scale`` (dithering) |

Implementation details:
    1. [AMBIG-11] Δs is not stated; the default ``sample_level`` reading is
       Δs = 2C/m with m the smallest local train set (one sample changes a
       clipped model trained on m samples by at most 2C/m); ``clip`` uses C.
    2. NbAFL's per-upload budget is ε/T0 under basic composition, so its σ
       grows linearly in T0; the accountant's z grows roughly like √T0.
    3. Dithering adds no Gaussian noise (σ = 0): its Laplace(b) error comes from
       the subtractive dithered quantizer (``rayfl.compression.dithering``). The
       calibration b = Δs·T0/ε (spec §5.2's reconstruction) makes each
       *coordinate* (ε/T0)-DP at sensitivity Δs; that is not the vector's ε. A
       C-clipped d-vector moves by up to 2C·√d in L1, so the ledger reports
       the honest pure ε = uploads·2C·√d/b
       (``rayfl.privacy.sensitivity.laplace_vector_epsilon``), and ε_Q stays
       the paper's nominal value.
    4. Every baseline's ledger uses Δ = 2C and q = 1 (``rayfl.privacy.sensitivity``);
       Δs and q here only set σ (or b), as the paper's formulas do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rayfl.privacy.gaussian import accountant_noise_multiplier

__all__ = [
    "MechanismNoise",
    "baseline_sensitivity",
    "dither_laplace_scale",
    "ma_noise_std",
    "mechanism_noise",
    "nbafl_noise_std",
]


def nbafl_noise_std(
    *, epsilon: float, delta: float, max_uploads: int, sensitivity: float
) -> float:
    """Return NbAFL's σ = c·T0·Δs/ε with c = √(2 ln(1.25/δ)) (spec §5.2).

    Args:
        epsilon: ε_Q > 0 over the T0 uploads.
        delta: δ_Q in (0, 1).
        max_uploads: T0 ≥ 1.
        sensitivity: Δs > 0.

    Returns:
        σ ≥ 0.

    Example:
        >>> round(nbafl_noise_std(epsilon=1.0, delta=1e-3, max_uploads=20,
        ...                       sensitivity=2 * 7 / 2625), 2)  # spec: ≈ 0.40
        0.4
    """
    if not (epsilon > 0 and 0 < delta < 1 and max_uploads >= 1 and sensitivity > 0):
        raise ValueError(
            "nbafl_noise_std needs epsilon > 0, delta in (0, 1), max_uploads >= 1 and "
            f"sensitivity > 0, got {epsilon}, {delta}, {max_uploads}, {sensitivity}"
        )
    c = math.sqrt(2.0 * math.log(1.25 / delta))
    return c * max_uploads * sensitivity / epsilon


def ma_noise_std(
    *,
    epsilon: float,
    delta: float,
    max_uploads: int,
    sample_rate: float,
    sensitivity: float,
    accountant: str = "rdp",
) -> float:
    """Return the moments-accountant σ = z·Δs for T0 q-subsampled releases.

    Args:
        epsilon: ε_Q > 0.
        delta: δ_Q in (0, 1).
        max_uploads: T0 ≥ 1 (the composed releases).
        sample_rate: q in (0, 1].
        sensitivity: Δs > 0.
        accountant: dp-accounting backend, "rdp" or "pld".

    Returns:
        σ ≥ 0.
    """
    z = accountant_noise_multiplier(
        epsilon=epsilon,
        delta=delta,
        sample_rate=sample_rate,
        steps=int(max_uploads),
        accountant=accountant,
    )
    return z * sensitivity


def dither_laplace_scale(
    *, epsilon: float, max_uploads: int, sensitivity: float
) -> float:
    """Return the Dithering baseline's Laplace scale b = Δs/(ε/T0) (spec §5.2).

    Example:
        >>> dither_laplace_scale(epsilon=1.0, max_uploads=20, sensitivity=0.5)
        10.0
    """
    if not (epsilon > 0 and max_uploads >= 1 and sensitivity > 0):
        raise ValueError(
            "dither_laplace_scale needs epsilon > 0, max_uploads >= 1 and "
            f"sensitivity > 0, got {epsilon}, {max_uploads}, {sensitivity}"
        )
    return sensitivity / (epsilon / max_uploads)


def baseline_sensitivity(
    *, clip_norm: float, num_train: npt.ArrayLike, sensitivity: str
) -> float:
    """Return the baselines' Δs (module notes item 1).

    Args:
        clip_norm: C.
        num_train: Train-set size of every client (N,); m = the smallest.
        sensitivity: "sample_level" (Δs = 2C/m) or "clip" (Δs = C).

    Raises:
        ValueError: For an unknown sensitivity.

    Example:
        >>> baseline_sensitivity(clip_norm=7.0, num_train=[300, 250],
        ...                      sensitivity="sample_level")
        0.056
    """
    m = int(np.min(np.asarray(num_train)))
    if sensitivity == "sample_level":
        return 2.0 * clip_norm / max(m, 1)
    if sensitivity == "clip":
        return float(clip_norm)
    raise ValueError(
        f"sensitivity must be 'sample_level' or 'clip', got {sensitivity!r}"
    )


@dataclass(frozen=True)
class MechanismNoise:
    """The noise a baseline adds per element, and the Δs it was calibrated to.

    Attributes:
        noise_std: Gaussian σ (0 for none and dithering).
        sensitivity: Δs used (for the ledger's z = σ/Δs).
        laplace_scale: b of dithering's Laplace error (0 for the others).
    """

    noise_std: float
    sensitivity: float
    laplace_scale: float = 0.0


def mechanism_noise(
    mechanism: str,
    *,
    epsilon: float | None,
    delta: float,
    max_uploads: int,
    clip_norm: float,
    num_train: npt.ArrayLike,
    sample_rate: float,
    sensitivity: str = "sample_level",
    accountant: str = "rdp",
) -> MechanismNoise:
    """Return the noise of one of the non-proposed baselines of spec §5.2.

    Args:
        mechanism: "gaussian", "perfect_gaussian", "ma", "dithering" or "none".
        epsilon: ε_Q (None = ∞ gives no noise).
        delta: δ_Q.
        max_uploads: T0.
        clip_norm: C.
        num_train: Train-set size of every client (N,); m = the smallest.
        sample_rate: q.
        sensitivity: "sample_level" (Δs = 2C/m) or "clip" (Δs = C).
        accountant: Backend of the MA calibration.

    Returns:
        The baseline's noise.

    Raises:
        ValueError: For an unknown mechanism or sensitivity.
    """
    delta_s = baseline_sensitivity(
        clip_norm=clip_norm, num_train=num_train, sensitivity=sensitivity
    )
    if mechanism == "none" or epsilon is None:
        return MechanismNoise(0.0, delta_s)
    if mechanism in ("gaussian", "perfect_gaussian"):
        sigma = nbafl_noise_std(
            epsilon=epsilon, delta=delta, max_uploads=max_uploads, sensitivity=delta_s
        )
        return MechanismNoise(sigma, delta_s)
    if mechanism == "ma":
        sigma = ma_noise_std(
            epsilon=epsilon,
            delta=delta,
            max_uploads=max_uploads,
            sample_rate=sample_rate,
            sensitivity=delta_s,
            accountant=accountant,
        )
        return MechanismNoise(sigma, delta_s)
    if mechanism == "dithering":
        scale = dither_laplace_scale(
            epsilon=epsilon, max_uploads=max_uploads, sensitivity=delta_s
        )
        return MechanismNoise(0.0, delta_s, laplace_scale=scale)
    raise ValueError(
        "mechanism must be one of gaussian, perfect_gaussian, ma, dithering, none; "
        f"got {mechanism!r}"
    )
