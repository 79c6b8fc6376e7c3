"""Quantization-assisted Gaussian mechanism: δ_Q(σ) and the σ_DP solver.

Seed 000 (Zhao et al. 2025, WPFL) perturbs the clipped model with N(0, σ_DP²)
and quantizes deterministically to R bits over ±(C + 3σ_DP); Theorem 1 bounds
the privacy loss of T0 such uploads, treating the quantization error as part of
the mechanism (spec seed_000 §2.7, eq. 23-24).

Symbol table:

| paper symbol | code name | meaning |
|---|---|---|
| σ_DP | ``noise_std`` | per-coordinate Gaussian std |
| C | ``clip_norm`` | L2 clip threshold (so abs(u_i) ≤ C) |
| R | ``bits`` | quantization bits per element |
| q | ``sample_rate`` | mini-batch sampling rate |
| T0 | ``max_uploads`` | uploads per client (basic composition) |
| ε_Q, δ_Q | ``epsilon``, ``delta`` | budget over the T0 uploads |
| E_L^max = (C + 3σ)/(2^R − 1) | ``max_error`` | worst quantization error |
| Q(x) | ``scipy.stats.norm.sf`` | Gaussian tail function |

Implementation details:

1. The root search is Brent's method on δ_Q(σ) − δ_target over the bracket
   [1e-7, 10] recommended by the spec (§2.7), widened ×10 up to 1e6 if needed;
   δ_Q decreases in σ (paper, below Theorem 1).
2. ψ1 and ψ1' underflow to 0 for realistic σ; this is harmless (spec §2.7) and
   makes σ_DP independent of ε_Q in practice.
3. ε_Q = ∞ is not accepted: with ε_Q = ∞ the bound is vacuous and σ_DP = 0 is
   the paper's "WPFL w/o DP" configuration; callers handle it.
4. The solved values are 0-8% above Table II for DNN and CNN and 10-83% above
   it for MLR, exactly the recomputation printed in the spec (§6.3); the paper's
   own values may be used through ``PrivacyConfig.noise_std``.
"""

from __future__ import annotations

import math

from scipy.special import ndtr


def quantized_gaussian_delta(
    *,
    noise_std: float,
    epsilon: float,
    max_uploads: int,
    clip_norm: float,
    bits: int,
    sample_rate: float,
) -> float:
    """Return δ_Q of T0 quantization-assisted Gaussian uploads, seed 000 eq. 23-24.

    δ_Q = T0·max{ψ − ψ1·e^{ε_Q/T0}, ψ' − ψ1'·e^{ε_Q/T0}} with
    ψ1 = Q((2C+3σ−E)/σ) − Q((2C+3σ+E)/σ) (24b), ψ1' = Q((2C+3σ−E)/σ) (24d),
    ψ = (1−q)ψ1 + q(1 − 2Q(E/σ)) (24a), ψ' = (1−q)ψ1' + q·Q((3σ−E)/σ) (24c) and
    E = (C + 3σ)/(2^R − 1).

    Args:
        noise_std: σ_DP > 0, per-coordinate std.
        epsilon: ε_Q > 0 over the T0 uploads.
        max_uploads: T0 ≥ 1.
        clip_norm: C > 0.
        bits: R ≥ 1.
        sample_rate: q in (0, 1].

    Returns:
        δ_Q (dimensionless), which decreases as σ_DP grows.

    Example:
        >>> d = quantized_gaussian_delta(noise_std=0.0172, epsilon=1.0,
        ...     max_uploads=20, clip_norm=7.0, bits=16, sample_rate=0.01)
        >>> round(d, 4)  # Table II, DNN, T0 = 20, δ_Q = 1e-3
        0.001
    """
    sigma = float(noise_std)
    max_error = (clip_norm + 3.0 * sigma) / float((1 << bits) - 1)

    def tail(x: float) -> float:  # Q(x) = 1 − Φ(x), as scipy.stats.norm.sf
        return float(ndtr(-x))

    psi1_prime = tail((2.0 * clip_norm + 3.0 * sigma - max_error) / sigma)
    psi1 = psi1_prime - tail((2.0 * clip_norm + 3.0 * sigma + max_error) / sigma)
    psi = (1.0 - sample_rate) * psi1 + sample_rate * (
        1.0 - 2.0 * tail(max_error / sigma)
    )
    psi_prime = (1.0 - sample_rate) * psi1_prime + sample_rate * tail(
        (3.0 * sigma - max_error) / sigma
    )
    growth = math.exp(epsilon / max_uploads)
    return float(
        max_uploads * max(psi - psi1 * growth, psi_prime - psi1_prime * growth)
    )


def wpfl_noise_std(
    *,
    epsilon: float,
    delta: float,
    max_uploads: int,
    clip_norm: float,
    bits: int,
    sample_rate: float,
) -> float:
    """Solve seed 000 Theorem 1 (eq. 23) for σ_DP given (ε_Q, δ_Q, T0, C, R, q).

    Args:
        epsilon: ε_Q > 0 over a client's T0 uploads.
        delta: δ_Q in (0, 1).
        max_uploads: T0 ≥ 1.
        clip_norm: C > 0 (whole-model L2 clip).
        bits: R, quantization bits per element (uplink range ±(C + 3σ_DP)).
        sample_rate: q in (0, 1], mini-batch sampling rate.

    Returns:
        σ_DP, the smallest per-coordinate std with δ_Q(σ_DP) ≤ δ (to 1e-12 abs).

    Raises:
        ValueError: If an argument is out of range or no σ ≤ 1e6 meets δ.

    Example:
        >>> s = wpfl_noise_std(epsilon=1.0, delta=1e-3, max_uploads=20,
        ...                    clip_norm=7.0, bits=16, sample_rate=0.01)
        >>> round(s, 4)  # Table II prints 0.016, spec recomputation 0.0172
        0.0172
    """
    if not (epsilon > 0 and 0 < delta < 1 and max_uploads >= 1 and clip_norm > 0):
        raise ValueError(
            "wpfl_noise_std needs epsilon > 0, delta in (0, 1), max_uploads >= 1 "
            f"and clip_norm > 0, got {epsilon}, {delta}, {max_uploads}, {clip_norm}"
        )
    if not (bits >= 1 and 0 < sample_rate <= 1):
        raise ValueError(
            f"wpfl_noise_std needs bits >= 1 and sample_rate in (0, 1], got "
            f"{bits}, {sample_rate}"
        )

    def excess(sigma: float) -> float:
        return (
            quantized_gaussian_delta(
                noise_std=sigma,
                epsilon=epsilon,
                max_uploads=max_uploads,
                clip_norm=clip_norm,
                bits=bits,
                sample_rate=sample_rate,
            )
            - delta
        )

    low, high = 1e-7, 10.0
    if excess(low) <= 0.0:
        return low
    while excess(high) > 0.0:
        high *= 10.0
        if high > 1e6:
            raise ValueError(
                f"no noise_std <= 1e6 reaches delta={delta} for these parameters"
            )
    from scipy.optimize import brentq

    return float(brentq(excess, low, high, xtol=1e-12, rtol=1e-12))
