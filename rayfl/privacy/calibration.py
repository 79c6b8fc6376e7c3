"""From a privacy config to a noise std, and back to the paper's nominal ε.

``calibrate_noise_std`` dispatches ``PrivacyConfig.calibration`` to the formula of
each paper; ``nominal_epsilon`` is the inverse reading the papers use to report ε
after t of the T planned uploads (the run reports it next to the accountant's ε
from ``PrivacyLedger``).

Symbol table:

| paper symbol | code name | meaning |
|---|---|---|
| σ_DP, σ_u | ``noise_std`` | per-coordinate noise std |
| T (001), T0 (000), L (004) | ``releases``, ``planned_uploads`` | planned |
| Δs, Δ | ``sensitivity`` | L2 sensitivity (default C) |
| abs(D_n), N | ``dataset_size``, ``num_clients`` | seed 001 inputs |
| R | ``quantize_bits`` | seed 000 input |
| s, abs(b) | ``keep_fraction``, ``batch_size`` | seed 002 inputs |
| c_2, v_2 | ``constant`` | seed 004 constant |
| t = Υ_n | ``upload_count`` | uploads so far |

Implementation details:

1. Precedence: mechanism "none" or ε = ∞ → σ = 0; ``noise_std``; "sparse" (σ̂ =
   ``noise_multiplier``, seed 002 eq. 9); ``noise_multiplier`` × sensitivity;
   else the formula of ``calibration`` for ``releases`` (default T0).
2. ``noise_multiplier`` and the 'accountant' calibration use the sensitivity
   the ledger accounts, 2C for a whole update clipped to C
   (``rayfl.privacy.sensitivity``), and the 'accountant' calibration assumes no
   subsampling (q = 1): the ledger then reports ε ≤ the target. The papers'
   formulas keep their own inputs (C in seed 004's eq. 15 when no Δ is passed,
   Δs = 2C/abs(D_n) in seed 001, q = ``calibration_sample_rate``), so they give
   the σ the papers give; their ε is the papers' nominal value, which the
   ledger (at 2C, q = 1) may not confirm.
3. Nominal ε after t uploads: 'wpfl' ε·t/T0, the basic composition of T0 uploads
   of budget ε/T0 each (seed 000 §2.7, Dwork & Roth Thm 3.16); 'dp_ditto' and
   'h2fdp' ε·√(t/T), because σ ∝ √T/ε (seed 001 eq. 8, seed 004 eq. 15). The
   'accountant' and 'sparse' calibrations have no closed form: their nominal ε
   is the accountant's own (``PrivacyLedger.epsilon``).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from rayfl.privacy.config import PrivacyConfig
from rayfl.privacy.gaussian import (
    accountant_noise_multiplier,
    dp_ditto_noise_std,
    h2fdp_noise_std,
    sparse_dp_noise_std,
)
from rayfl.privacy.quantized_gaussian import wpfl_noise_std
from rayfl.privacy.sensitivity import whole_update_sensitivity


def calibrate_noise_std(
    privacy: PrivacyConfig,
    *,
    releases: int | None = None,
    sensitivity: float | None = None,
    dataset_size: int | None = None,
    num_clients: int | None = None,
    quantize_bits: int | None = None,
    keep_fraction: float = 1.0,
    batch_size: int = 1,
    constant: float = 1.5,
) -> float:
    """Return the per-coordinate noise std a ``PrivacyConfig`` asks for.

    Precedence: mechanism "none" or ε = ∞ → 0; ``noise_std``; "sparse"
    (σ̂ = ``noise_multiplier``); ``noise_multiplier`` × sensitivity; else the
    ``calibration`` formula.

    Args:
        privacy: The privacy config.
        releases: Planned releases per client (T, T0, L or steps); defaults to
            ``privacy.max_uploads``.
        sensitivity: L2 sensitivity; defaults to 2C for ``noise_multiplier`` and
            the 'accountant' calibration and to C in seed 004's formula.
        dataset_size: abs(D_n), needed by "dp_ditto".
        num_clients: N, needed by "dp_ditto".
        quantize_bits: R, needed by "wpfl".
        keep_fraction: s, used by "sparse".
        batch_size: abs(b), used by "sparse".
        constant: c_2 or v_2, used by "h2fdp".

    Returns:
        σ ≥ 0.

    Raises:
        ValueError: If an input the chosen formula needs is missing.
    """
    if privacy.mechanism == "none":
        return 0.0
    if privacy.noise_std is not None:
        return privacy.noise_std
    clip_norm = float(privacy.clip_norm)  # type: ignore[arg-type]  # validated
    # The ledger's Δ of a whole clipped update (noise_multiplier, 'accountant').
    ledger_scale = (
        whole_update_sensitivity(clip_norm) if sensitivity is None else sensitivity
    )
    scale = clip_norm if sensitivity is None else sensitivity
    if privacy.calibration == "sparse":
        return sparse_dp_noise_std(
            noise_multiplier=float(privacy.noise_multiplier),  # type: ignore[arg-type]
            clip_norm=clip_norm,
            keep_fraction=keep_fraction,
            batch_size=batch_size,
        )
    if privacy.noise_multiplier is not None:
        return privacy.noise_multiplier * ledger_scale
    if privacy.epsilon is None:
        return 0.0
    planned = releases if releases is not None else privacy.max_uploads
    if planned is None:
        raise ValueError(
            f"calibration {privacy.calibration!r} needs the planned number of "
            "releases: pass releases= or set privacy.max_uploads"
        )
    return _formula_noise_std(
        privacy,
        planned=int(planned),
        ledger_scale=ledger_scale,
        scale=scale,
        dataset_size=dataset_size,
        num_clients=num_clients,
        quantize_bits=quantize_bits,
        constant=constant,
    )


def _formula_noise_std(
    privacy: PrivacyConfig,
    *,
    planned: int,
    ledger_scale: float,
    scale: float,
    dataset_size: int | None,
    num_clients: int | None,
    quantize_bits: int | None,
    constant: float,
) -> float:
    """Return σ of ``privacy.calibration``'s formula for a target ε over ``planned``.

    Args:
        privacy: The privacy config (``epsilon`` set).
        planned: Planned releases per client.
        ledger_scale: The ledger's sensitivity (the 'accountant' calibration).
        scale: The sensitivity of seed 004's formula ('h2fdp').
        dataset_size: abs(D_n) ('dp_ditto').
        num_clients: N ('dp_ditto').
        quantize_bits: R ('wpfl').
        constant: c_2 or v_2 ('h2fdp').
    """
    clip_norm = float(privacy.clip_norm)  # type: ignore[arg-type]  # validated
    eps, delta = privacy.epsilon, privacy.delta
    assert eps is not None  # calibrate_noise_std returns 0 without a target ε
    rate = privacy.calibration_sample_rate  # a paper formula's input only
    if privacy.calibration == "accountant":
        z = accountant_noise_multiplier(
            epsilon=eps,
            delta=delta,
            sample_rate=1.0,
            steps=planned,
            accountant=privacy.accountant,
        )
        return z * ledger_scale
    if privacy.calibration == "dp_ditto":
        if dataset_size is None or num_clients is None:
            raise ValueError(
                "calibration 'dp_ditto' needs dataset_size and num_clients"
            )
        return dp_ditto_noise_std(
            clip_norm=clip_norm,
            dataset_size=dataset_size,
            num_rounds=planned,
            num_clients=num_clients,
            epsilon=eps,
            delta=delta,
        )
    if privacy.calibration == "wpfl":
        if quantize_bits is None:
            raise ValueError("calibration 'wpfl' needs quantize_bits (R)")
        return wpfl_noise_std(
            epsilon=eps,
            delta=delta,
            max_uploads=planned,
            clip_norm=clip_norm,
            bits=quantize_bits,
            sample_rate=rate,
        )
    return h2fdp_noise_std(
        sensitivity=scale,
        sample_rate=rate,
        releases=planned,
        epsilon=eps,
        delta=delta,
        constant=constant,
    )


def nominal_epsilon(
    upload_count: npt.ArrayLike,
    *,
    calibration: Literal["wpfl", "dp_ditto", "h2fdp"],
    epsilon: float,
    planned_uploads: int,
) -> npt.NDArray[np.float64]:
    """Return the paper's nominal ε after t uploads (module notes, item 4).

    Args:
        upload_count: t per client, shape (N,), int ≥ 0.
        calibration: "wpfl" (linear) or "dp_ditto"/"h2fdp" (square root).
        epsilon: ε the noise was calibrated for over ``planned_uploads``.
        planned_uploads: T0 (wpfl) or T (dp_ditto, h2fdp) ≥ 1.

    Returns:
        Nominal ε per client, shape (N,), float64.

    Raises:
        ValueError: If the calibration has no closed-form nominal ε.

    Example:
        >>> nominal_epsilon([0, 5, 20], calibration="wpfl", epsilon=1.0,
        ...                 planned_uploads=20).tolist()
        [0.0, 0.25, 1.0]
    """
    fraction = np.asarray(upload_count, dtype=np.float64) / float(planned_uploads)
    if calibration == "wpfl":
        return epsilon * fraction
    if calibration in ("dp_ditto", "h2fdp"):
        return epsilon * np.sqrt(fraction)
    raise ValueError(
        f"calibration {calibration!r} has no closed-form nominal epsilon; "
        "use PrivacyLedger.epsilon"
    )
