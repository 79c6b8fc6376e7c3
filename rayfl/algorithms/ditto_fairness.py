"""DP-Ditto's fairness analysis (spec seed_001 §4.7): R(λ) and λ* (Theorems 2-3).

Pure numpy functions for Zhao et al., "Convergence-Privacy-Fairness Trade-Off in
Personalized Federated Learning", Sec. V: the fairness R(λ) — the expected
variance of the personalized losses — of personalized Bayesian linear
regression (Theorem 2, eq. 31) and its minimiser λ* from the cubic (32)
(Theorem 3). Re-exported by :mod:`rayfl.algorithms.ditto_analysis`, whose
symbol table and implementation details (5-7) cover these functions too.

| paper symbol | code name | meaning |
|---|---|---|
| b, ρ, σ², ζ² | ``samples``, ``rho``, ``noise_var``, ``prior_var`` | linear model (22)-(24) |
| σ_w², S1, S2, G1, G2, α0 | ``sigma_w_sq``, ``s1``, ``s2``, ``g1``, ``g2``, ``alpha0`` | Theorem 2 |
| σ_z² | ``summed_noise_var`` | summed DP noise variance (eq. 8) |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "LinearModelParams",
    "alpha0_of_lambda",
    "alpha_moments",
    "expected_alpha_moments",
    "fairness_constants",
    "fairness_derivative",
    "fairness_risk",
    "fairness_variance",
    "lambda_of_alpha0",
    "optimal_lambda",
]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class LinearModelParams:
    """Personalized Bayesian linear regression of Sec. V-A (X_nᵀX_n = ρI).

    ``g1``/``g2`` None: their expectation under the model's own Gaussians
    (:func:`expected_alpha_moments`); pass :func:`alpha_moments` of real local
    models instead.
    """

    samples: int = 2625
    rho: float = 2625.0
    noise_var: float = 1.0
    prior_var: float = 1.0e-2
    g1: float | None = None
    g2: float | None = None
    formula: Literal["paper", "corrected"] = "paper"


def fairness_variance(losses: npt.ArrayLike) -> float:
    """Return ϱ = var_n F_n(ϖ_n), ddof = 0 (Definition 1, proof eq. 48).

    Example:
        >>> fairness_variance([1.0, 3.0])
        1.0
    """
    return float(np.var(np.asarray(losses, dtype=np.float64)))


def alpha_moments(local_models: npt.ArrayLike) -> tuple[float, float]:
    """Return G1 = mean_n ‖α_n‖², G2 = mean_n ‖α_n‖⁴, α_n = Nû_n − Σ_m û_m (Thm 2).

    Example:
        >>> alpha_moments([[1.0], [3.0]])
        (4.0, 16.0)
    """
    u = np.asarray(local_models, dtype=np.float64)
    alpha = u.shape[0] * u - u.sum(axis=0)
    sq = np.sum(alpha**2, axis=1)
    return float(sq.mean()), float(np.mean(sq**2))


def expected_alpha_moments(
    lin: LinearModelParams, *, dim: int, num_clients: int
) -> tuple[float, float]:
    """Return (G1, G2), or their expectation under (22)-(25) when unset.

    α_n = N(û_n − ū) has i.i.d. N(0, v) coordinates, v = N(N − 1)(ζ² + σ²/ρ), so
    E G1 = d v and E G2 = d(d + 2) v² (moments of a scaled χ²_d).

    Example:
        >>> lin = LinearModelParams(rho=1.0, noise_var=1.0, prior_var=0.0)
        >>> expected_alpha_moments(lin, dim=1, num_clients=2)
        (2.0, 12.0)
    """
    n = num_clients
    v = n * (n - 1) * (lin.prior_var + lin.noise_var / lin.rho)
    g1 = dim * v if lin.g1 is None else lin.g1
    g2 = dim * (dim + 2) * v**2 if lin.g2 is None else lin.g2
    return float(g1), float(g2)


def fairness_constants(
    lin: LinearModelParams, *, num_clients: int
) -> tuple[float, float, float]:
    """Return (σ_w², S1, S2) of eq. (30)-(31).

    σ_w² = ((N − 1)/(σ²/ρ + Nζ²) + ρ/σ²)⁻¹, S1 = σ²/(N(σ² + ρζ²)), S2 = 1/N.
    """
    n, s2, r, z2 = num_clients, lin.noise_var, lin.rho, lin.prior_var
    sigma_w_sq = 1.0 / ((n - 1) / (s2 / r + n * z2) + r / s2)
    return sigma_w_sq, s2 / (n * (s2 + r * z2)), 1.0 / n


def alpha0_of_lambda(lam: npt.ArrayLike, *, samples: int, rho: float) -> FloatArray:
    """Return α0 = bλ/((2 − λ)ρ + bλ) in [0, 1] (Theorem 2).

    Example:
        >>> alpha0_of_lambda([0.0, 2.0], samples=10, rho=5.0).tolist()
        [0.0, 1.0]
    """
    lam = np.asarray(lam, dtype=np.float64)
    return samples * lam / ((2 - lam) * rho + samples * lam)


def lambda_of_alpha0(alpha0: npt.ArrayLike, *, samples: int, rho: float) -> FloatArray:
    """Return λ = 2ρα0/((1 − α0)b + ρα0), the inverse of :func:`alpha0_of_lambda`.

    Example:
        >>> float(lambda_of_alpha0(0.5, samples=10, rho=10.0))
        1.0
    """
    a = np.asarray(alpha0, dtype=np.float64)
    return 2 * rho * a / ((1 - a) * samples + rho * a)


def fairness_risk(
    lam: npt.ArrayLike,
    lin: LinearModelParams,
    *,
    dim: int,
    num_clients: int,
    summed_noise_var: float,
) -> FloatArray:
    """Return R(λ), the expected variance of PL losses (Theorem 2, eq. 31).

    R = 2dσ_B² + 4σ_B²(S1 − S2α0)²G1 + (S1 − S2α0)⁴(G2 − G1²), σ_B² = σ_w² +
    α0²σ_z²/N² (2dσ_B⁴ for ``formula="corrected"``, detail 6).
    """
    sigma_w_sq, s1, s2 = fairness_constants(lin, num_clients=num_clients)
    g1, g2 = expected_alpha_moments(lin, dim=dim, num_clients=num_clients)
    a = alpha0_of_lambda(lam, samples=lin.samples, rho=lin.rho)
    b = sigma_w_sq + a**2 * summed_noise_var / num_clients**2
    first = 2 * dim * (b**2 if lin.formula == "corrected" else b)
    m = s1 - s2 * a
    return first + 4 * b * m**2 * g1 + m**4 * (g2 - g1**2)


def fairness_derivative(
    lin: LinearModelParams, *, dim: int, num_clients: int, summed_noise_var: float
) -> np.polynomial.Polynomial:
    """Return dR/dα0 as a cubic in α0 (eq. 32; detail 6 for "corrected").

    4d s α0 + 8G1 s (S1 − S2α0)² α0 − 8S2G1(σ_w² + α0² s)(S1 − S2α0)
    − 4S2(G2 − G1²)(S1 − S2α0)³, with s = σ_z²/N².
    """
    P = np.polynomial.Polynomial
    sigma_w_sq, s1, s2 = fairness_constants(lin, num_clients=num_clients)
    g1, g2 = expected_alpha_moments(lin, dim=dim, num_clients=num_clients)
    s = summed_noise_var / num_clients**2
    a, m = P([0.0, 1.0]), P([s1, -s2])
    b = P([sigma_w_sq, 0.0, s])
    first = 4 * dim * s * a * (2 * b if lin.formula == "corrected" else 1)
    return (
        first
        + 8 * g1 * s * m**2 * a
        - 8 * s2 * g1 * b * m
        - 4 * s2 * (g2 - g1**2) * m**3
    )


def optimal_lambda(
    lin: LinearModelParams, *, dim: int, num_clients: int, summed_noise_var: float
) -> tuple[float, float]:
    """Return (λ*, α0*) minimising R on λ ∈ [0, 2] (Theorem 3, detail 7)."""
    kw: dict[str, Any] = {
        "dim": dim,
        "num_clients": num_clients,
        "summed_noise_var": summed_noise_var,
    }
    roots = fairness_derivative(lin, **kw).roots()
    real = roots.real[np.abs(roots.imag) <= 1e-9 * np.maximum(1.0, np.abs(roots))]
    cand = np.concatenate(([0.0, 1.0], real[(real >= 0.0) & (real <= 1.0)]))
    lams = lambda_of_alpha0(cand, samples=lin.samples, rho=lin.rho)
    best = int(np.argmin(fairness_risk(lams, lin, **kw)))
    return float(lams[best]), float(cand[best])
