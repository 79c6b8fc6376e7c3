"""Analytic error probability of a D2D link under log-normal interference (pFedWN).

Implements §2.3 of spec seed_003 (Ni, Ghazikor & Hashemi, "pFedWN", Sec. III-B and
App. A) literally: a transmitter s uses its best of |F| ISM sub-channels and sends
only if its fading amplitude there is at least the threshold β (eq. 4 and [35]);
the interference at the target from the other sessions is approximated by a
log-normal with the moments of App. A (eq. 6 / 17); the error probability is

    P_s^err = ∫_β^∞ (2x/Γ) e^{−x²/Γ} · v_s(P_s ĥ_s² x²/γ_th − σ²) dx,

where v_s(x) = P(I > x) is the log-normal CCDF. Neighbors with P_s^err < ε are the
PFL-selected neighbors (spec §2.4).

Symbol table (paper symbol → code name):

| Symbol                  | Code name                   | Unit / shape     |
|-------------------------|-----------------------------|------------------|
| Γ                       | ``rayleigh_factor``         | –                |
| β_s                     | ``fading_threshold``        | – (amplitude)    |
| abs(F)                  | ``num_subchannels``         | –                |
| P_s (ĥ_s)²              | ``signal_gain_w``           | W                |
| g_r = P_r (ĥ_r)²        | ``interferer_gain_w``       | W, (R,)          |
| p_r                     | ``collision_probability``   | –                |
| I₃(β), I₅(β)            | ``rayleigh_tail_moments``   | –                |
| Ẽ, D̃                    | ``interference_moments``    | W, W²            |
| μ, σ_I                  | ``lognormal_parameters``    | –                |
| γ_th                    | ``sinr_threshold``          | – (linear)       |
| σ² = κ·T·W              | ``noise_power_w``           | W                |
| P_s^err                 | ``link_error_probability``  | –                |

Implementation details:
    1. D̃ uses p_r² in its self term, as printed in App. A (spec A1,
       ``interference_var="paper"``); ``"bernoulli"`` gives the variance of
       Bernoulli(p_r)-gated interferers, g_r²(p_r I₅ − p_r² I₃²).
    2. The integral uses the single-sub-channel Rayleigh pdf (spec A2,
       ``pdf="single"``); ``"max_of_F"`` uses the pdf of the best of |F|.
    3. Without interferers (Ẽ = 0) the interference is 0 and the CCDF is the
       indicator 1[P ĥ² x²/γ_th < σ²] (spec §2.3 guard); a non-positive CCDF
       argument gives v = 1.
    4. By construction P^err ≤ e^{−β²/Γ} (mass below β is not an error), so
       ε ≥ e^{−β²/Γ} selects every neighbor (faithful; spec §2.3 note).
    5. The interferers of link s → n are all other neighbors G_n minus s
       (spec A13).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import integrate, special

__all__ = [
    "BOLTZMANN_J_K",
    "collision_probability",
    "error_probabilities_to_target",
    "interference_moments",
    "link_error_probability",
    "lognormal_parameters",
    "monte_carlo_link_error",
    "rayleigh_tail_moments",
    "square_gains",
    "thermal_noise_w",
]

FloatArray = npt.NDArray[np.float64]
BOLTZMANN_J_K = 1.38e-23
"""κ as printed in Table I of pFedWN (spec seed_003 §4.1)."""

InterferenceVar = Literal["paper", "bernoulli"]
FadingPdf = Literal["single", "max_of_F"]


def thermal_noise_w(*, bandwidth_hz: float, temperature_k: float = 290.0) -> float:
    """Return σ² = κ·T·W in W (spec seed_003 §2.3).

    Example:
        >>> f"{thermal_noise_w(bandwidth_hz=100e6):.4g}"
        '4.002e-13'
    """
    return BOLTZMANN_J_K * temperature_k * bandwidth_hz


def rayleigh_tail_moments(
    *, fading_threshold: float, rayleigh_factor: float
) -> tuple[float, float]:
    """Return I₃(β) and I₅(β), the closed forms of App. A's integrals.

    I₃(β) = ∫_β^∞ (2x³/Γ) e^{−x²/Γ} dx = (β² + Γ) e^{−β²/Γ} and
    I₅(β) = ∫_β^∞ (2x⁵/Γ) e^{−x²/Γ} dx = (β⁴ + 2Γβ² + 2Γ²) e^{−β²/Γ}
    (spec seed_003 §2.3).

    Args:
        fading_threshold: β ≥ 0 (amplitude).
        rayleigh_factor: Γ > 0.

    Returns:
        ``(I3, I5)``.

    Example:
        >>> [round(v, 5) for v in rayleigh_tail_moments(fading_threshold=2.0,
        ...                                             rayleigh_factor=2.0)]
        [0.81201, 5.41341]
    """
    beta2, gamma = fading_threshold**2, rayleigh_factor
    tail = math.exp(-beta2 / gamma)
    return (beta2 + gamma) * tail, (beta2**2 + 2 * gamma * beta2 + 2 * gamma**2) * tail


def collision_probability(
    *, fading_threshold: float, rayleigh_factor: float, num_subchannels: int
) -> float:
    """Return p_r = (1/|F|)(1 − (1 − e^{−β²/Γ})^{|F|}) (App. A).

    P(interferer r has a sub-channel above β) × P(it picks the target's one).

    Example:
        >>> round(collision_probability(fading_threshold=2.0, rayleigh_factor=2.0,
        ...                             num_subchannels=14), 6)
        0.062102
    """
    if num_subchannels < 1:
        raise ValueError(f"num_subchannels must be >= 1, got {num_subchannels}")
    above = math.exp(-(fading_threshold**2) / rayleigh_factor)
    return (1.0 - (1.0 - above) ** num_subchannels) / num_subchannels


def interference_moments(
    interferer_gain_w: npt.ArrayLike,
    *,
    fading_threshold: float,
    rayleigh_factor: float,
    num_subchannels: int,
    interference_var: InterferenceVar = "paper",
) -> tuple[float, float]:
    """Return (Ẽ, D̃), the interference mean and variance of App. A (eq. 17).

    Ẽ = Σ_r g_r I₃ p_r;  D̃ = Σ_r g_r² p_r² (I₅ − I₃²) ("paper", as printed) or
    Σ_r g_r² (p_r I₅ − p_r² I₃²) ("bernoulli").

    Args:
        interferer_gain_w: g_r = P_r ĥ_r², W, shape (R,).
        fading_threshold: β.
        rayleigh_factor: Γ.
        num_subchannels: |F|.
        interference_var: See implementation detail 1.

    Returns:
        ``(mean_w, variance_w2)``.
    """
    gain = np.asarray(interferer_gain_w, dtype=np.float64).reshape(-1)
    i3, i5 = rayleigh_tail_moments(
        fading_threshold=fading_threshold, rayleigh_factor=rayleigh_factor
    )
    p = collision_probability(
        fading_threshold=fading_threshold,
        rayleigh_factor=rayleigh_factor,
        num_subchannels=num_subchannels,
    )
    mean = float(np.sum(gain) * i3 * p)
    if interference_var == "paper":
        var = float(np.sum(gain**2) * p**2 * (i5 - i3**2))
    elif interference_var == "bernoulli":
        var = float(np.sum(gain**2) * (p * i5 - p**2 * i3**2))
    else:
        raise ValueError(
            f"interference_var must be 'paper' or 'bernoulli', got {interference_var!r}"
        )
    return mean, var


def lognormal_parameters(*, mean: float, variance: float) -> tuple[float, float]:
    """Return (μ, σ_I) of the log-normal with this mean and variance (eq. 6).

    Example:
        >>> mu, s = lognormal_parameters(mean=1.0, variance=0.0)
        >>> (mu, s)
        (0.0, 0.0)
    """
    if mean <= 0:
        raise ValueError(f"mean must be > 0, got {mean:g}")
    ratio = math.log1p(variance / mean**2)
    return math.log(mean) - 0.5 * ratio, math.sqrt(ratio)


def _fading_pdf(
    x: float, *, rayleigh_factor: float, num_subchannels: int, pdf: FadingPdf
) -> float:
    single = 2 * x / rayleigh_factor * math.exp(-(x**2) / rayleigh_factor)
    if pdf == "single":
        return single
    cdf = 1.0 - math.exp(-(x**2) / rayleigh_factor)
    return num_subchannels * cdf ** (num_subchannels - 1) * single


def link_error_probability(
    *,
    signal_gain_w: float,
    interferer_gain_w: npt.ArrayLike,
    sinr_threshold: float,
    noise_power_w: float,
    fading_threshold: float = 2.0,
    rayleigh_factor: float = 2.0,
    num_subchannels: int = 14,
    interference_var: InterferenceVar = "paper",
    pdf: FadingPdf = "single",
) -> float:
    """Return P_s^err of one link (Sec. III-B of pFedWN, spec seed_003 §2.3).

    Args:
        signal_gain_w: P_s ĥ_s² of the link s → target, W.
        interferer_gain_w: g_r of every other session at the target, W, (R,).
        sinr_threshold: γ_th, linear.
        noise_power_w: σ² in W.
        fading_threshold: β (Table I: 2).
        rayleigh_factor: Γ (Table I: 2).
        num_subchannels: |F| (Table I: 14).
        interference_var: ``"paper"`` or ``"bernoulli"`` (detail 1).
        pdf: ``"single"`` or ``"max_of_F"`` (detail 2).

    Returns:
        The error probability in [0, e^{−β²/Γ}] for ``pdf="single"``.
    """
    if pdf not in ("single", "max_of_F"):
        raise ValueError(f"pdf must be 'single' or 'max_of_F', got {pdf!r}")
    gains = np.asarray(interferer_gain_w, dtype=np.float64).reshape(-1)
    mean, var = interference_moments(
        gains,
        fading_threshold=fading_threshold,
        rayleigh_factor=rayleigh_factor,
        num_subchannels=num_subchannels,
        interference_var=interference_var,
    )
    scale = signal_gain_w / sinr_threshold

    def density(x: float) -> float:
        return _fading_pdf(
            x,
            rayleigh_factor=rayleigh_factor,
            num_subchannels=num_subchannels,
            pdf=pdf,
        )

    beta = fading_threshold
    if mean <= 0.0:  # no interferers: error iff the SNR is below γ_th
        edge = math.sqrt(noise_power_w / scale)  # P ĥ² x²/γ = σ²
        if edge <= beta:
            return 0.0
        value, _ = integrate.quad(density, beta, edge)
        return float(value)
    mu, sigma = lognormal_parameters(mean=mean, variance=var)

    def integrand(x: float) -> float:
        arg = scale * x * x - noise_power_w
        if arg <= 0.0:
            ccdf = 1.0
        elif sigma == 0.0:
            ccdf = float(math.log(arg) < mu)
        else:
            ccdf = 0.5 * special.erfc((math.log(arg) - mu) / (math.sqrt(2) * sigma))
        return density(x) * ccdf

    # The CCDF drops from ~1 to ~0 around x² ≈ (Ẽ + σ²)/scale: split there so
    # quad sees the transition.
    knee = math.sqrt((mean + noise_power_w) / scale)
    upper = max(beta, 10.0 * math.sqrt(rayleigh_factor) + knee)
    points = sorted({beta, max(beta, knee), upper})
    total = 0.0
    for lo, hi in zip(points[:-1], points[1:], strict=True):
        if hi > lo:
            total += integrate.quad(integrand, lo, hi, limit=200)[0]
    total += integrate.quad(integrand, upper, np.inf)[0]
    return float(min(max(total, 0.0), 1.0))


def square_gains(gain_linear: npt.ArrayLike, target: int) -> FloatArray:
    """Return the (N, N) path gains as float64, checking ``0 <= target < N``."""
    gain = np.asarray(gain_linear, dtype=np.float64)
    n = gain.shape[0]
    if gain.shape != (n, n) or not 0 <= target < n:
        raise ValueError(f"need (N, N) gains and 0 <= target < N, got {gain.shape}")
    return gain


def error_probabilities_to_target(
    gain_linear: npt.ArrayLike,
    target: int,
    *,
    tx_power_w: float,
    sinr_threshold: float,
    noise_power_w: float,
    fading_threshold: float = 2.0,
    rayleigh_factor: float = 2.0,
    num_subchannels: int = 14,
    interference_var: InterferenceVar = "paper",
    pdf: FadingPdf = "single",
) -> FloatArray:
    """Return P_s^err of every link s → target (interferers: G_n minus s).

    Args:
        gain_linear: (N, N) path-loss power gains ĥ², entry [i, j] for i → j
            (``d2d_gain_linear`` without fading).
        target: Target client n.
        tx_power_w: P, the common transmit power (Table I: 0.2 W).
        sinr_threshold: γ_th, linear.
        noise_power_w: σ².
        fading_threshold: β.
        rayleigh_factor: Γ.
        num_subchannels: |F|.
        interference_var: See :func:`link_error_probability`.
        pdf: See :func:`link_error_probability`.

    Returns:
        (N,) float64; entry ``target`` is 1.0 (a node is not its own neighbor).
    """
    gain = square_gains(gain_linear, target)
    n = gain.shape[0]
    received = tx_power_w * gain[:, target]
    out = np.ones(n, dtype=np.float64)
    for s in range(n):
        if s == target:
            continue
        others = [r for r in range(n) if r not in (s, target)]
        out[s] = link_error_probability(
            signal_gain_w=float(received[s]),
            interferer_gain_w=received[others],
            sinr_threshold=sinr_threshold,
            noise_power_w=noise_power_w,
            fading_threshold=fading_threshold,
            rayleigh_factor=rayleigh_factor,
            num_subchannels=num_subchannels,
            interference_var=interference_var,
            pdf=pdf,
        )
    return out


def monte_carlo_link_error(
    *,
    signal_gain_w: float,
    interferer_gain_w: npt.ArrayLike,
    sinr_threshold: float,
    noise_power_w: float,
    rng: np.random.Generator,
    num_samples: int = 100_000,
    fading_threshold: float = 2.0,
    rayleigh_factor: float = 2.0,
    num_subchannels: int = 14,
    interference: Literal["lognormal", "gated"] = "lognormal",
    interference_var: InterferenceVar = "paper",
) -> float:
    """Estimate P_s^err by sampling, to check :func:`link_error_probability`.

    The signal amplitude x has the single-sub-channel Rayleigh law (h̃² ~ Exp(Γ));
    an error is x ≥ β and P ĥ² x²/(σ² + I) < γ_th. The interference I is drawn

    * ``"lognormal"``: from the log-normal of eq. 6 (checks the integral);
    * ``"gated"``: as the sum the moments of App. A describe, Σ_r g_r h_r²
      1[h_r ≥ β] B_r with h_r² ~ Exp(Γ) and B_r ~ Bernoulli(p_r) (checks the
      log-normal approximation; its exact variance is the ``"bernoulli"`` D̃).

    Args:
        signal_gain_w: P_s ĥ_s², W.
        interferer_gain_w: g_r, W, (R,).
        sinr_threshold: γ_th.
        noise_power_w: σ².
        rng: Source of the samples.
        num_samples: Monte-Carlo trials.
        fading_threshold: β.
        rayleigh_factor: Γ.
        num_subchannels: |F|.
        interference: ``"lognormal"`` or ``"gated"``.
        interference_var: D̃ variant of the ``"lognormal"`` draw.

    Returns:
        The fraction of trials in error.
    """
    gains = np.asarray(interferer_gain_w, dtype=np.float64).reshape(-1)
    h2 = rng.exponential(rayleigh_factor, size=num_samples)
    if interference == "lognormal":
        mean, var = interference_moments(
            gains,
            fading_threshold=fading_threshold,
            rayleigh_factor=rayleigh_factor,
            num_subchannels=num_subchannels,
            interference_var=interference_var,
        )
        mu, sigma = lognormal_parameters(mean=mean, variance=var)
        interference_w = rng.lognormal(mu, sigma, size=num_samples)
    elif interference == "gated":
        p = collision_probability(
            fading_threshold=fading_threshold,
            rayleigh_factor=rayleigh_factor,
            num_subchannels=num_subchannels,
        )
        hr2 = rng.exponential(rayleigh_factor, size=(num_samples, gains.size))
        active = rng.random((num_samples, gains.size)) < p
        above = hr2 >= fading_threshold**2
        interference_w = np.sum(gains * hr2 * (active & above), axis=1)
    else:
        raise ValueError(
            f"interference must be 'lognormal' or 'gated', got {interference!r}"
        )
    sinr = signal_gain_w * h2 / (noise_power_w + interference_w)
    error = (h2 >= fading_threshold**2) & (sinr < sinr_threshold)
    return float(np.mean(error))
