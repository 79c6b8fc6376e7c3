"""DP-Ditto's analysis (spec seed_001 §4): convergence bound, T*, fairness, λ*.

Pure numpy functions for Zhao et al., "Convergence-Privacy-Fairness Trade-Off in
Personalized Federated Learning": the PL convergence bound h(T, λ) of Theorem 1,
the optimal number of aggregations T* for a privacy budget (Sec. IV-B), the
fairness R(λ) of personalized Bayesian linear regression (Theorem 2, eq. 31), its
minimiser λ* from the cubic (32) (Theorem 3), the joint (T, λ) choice (33), and
:func:`tune`, the summary ``rayfl tune-ditto`` prints. The fairness half
(Theorems 2-3: R(λ), λ*) lives in :mod:`rayfl.algorithms.ditto_fairness` and is
re-exported here.

| paper symbol | code name | meaning |
|---|---|---|
| μ, L | ``mu``, ``smoothness`` | strong convexity, smoothness (Assumption 1a) |
| G0, M | ``grad_bound``, ``model_gap`` | Assumption 1(c), 1(d) |
| Ψ1, Ψ2 | ``initial_global_gap``, ``initial_personal_gap`` | F(ω⁰) − F(ω*), ‖ϖ⁰ − ϖ*‖² |
| d, N, abs(D_n) | ``dim``, ``num_clients``, ``dataset_size`` | model size, clients, samples |
| C, ε, δ | ``clip_norm``, ``epsilon``, ``delta`` | clip threshold, DP budget |
| η_G, η_L, λ | ``lr_global``, ``lr_personal``, ``lam`` | learning rates, Ditto weight |
| ε_G, ε_L | ``eps_global``, ``eps_personal`` | contraction factors (eq. 9, Lemma 1) |
| β, c, φ_L | ``beta``, ``c``, ``phi`` | Theorem 1 constants, Lemma 2 noise term |
| σ_u, σ_z² | ``noise_std``, ``summed_noise_var`` | eq. 8 |
| h(T, λ), T, T' | ``bound``, ``rounds``, ``t_upper`` | Theorem 1, eq. 17 |
| b, ρ, σ², ζ² | ``samples``, ``rho``, ``noise_var``, ``prior_var`` | linear model (22)-(24) |
| σ_w², S1, S2, G1, G2, α0 | ``sigma_w_sq``, ``s1``, ``s2``, ``g1``, ``g2``, ``alpha0`` | Theorem 2 |

Implementation details:
    1. h(T, λ) is evaluated by the recursion of spec §4.5 (a_{k+1} = ε_L a_k + c +
       β e_k, e_{k+1} = ε_G e_k + φ_L T, T the planned total): exact and robust
       when ε_L ≈ ε_G. The closed forms (14)/(15) and (16b) are kept for checks.
    2. [AMBIG-11] Eq. (18) is wrong; (15) is used when abs(ε_L − ε_G) ≤ 1e-9.
    3. T* search: the bracket T' solves h_Low(T') = h(0) = Ψ2 (eq. 17), with H0
       bounding each term of (16b) separately (min_T K r^T = min(0, K),
       min_T K T r^T = K/(e ln(1/r)) for K < 0 — the spec's "−K/(e ln(1/r))" has
       a sign typo). Integer search over [1, ⌊T'⌋] ∩ [1, t_max]; it falls back to
       [1, t_max] when the bracket does not apply (ε_L or ε_G outside (0, 1),
       λ = 0, ε = ∞) or its minimum exceeds h(0).
    4. [AMBIG-12] Eq. (9)'s φ is unused; φ_L = σ_z² d L/(2TN²) of Lemma 2 is.
    5. [AMBIG-13] λ* minimises R (Theorem 3 says "maximizes").
    6. [AMBIG-14] ``formula="paper"`` keeps eq. (31)'s 2dσ_B²; "corrected" uses
       2dσ_B⁴ (Var of a sum of d Gaussian squares). Both derivatives are cubic.
    7. λ* = argmin of R over the real roots of dR/dα0 in [0, 1] and the end points
       α0 ∈ {0, 1}: the exact minimiser of the quartic R on [0, 1], whether or not
       Theorem 3's condition C < √d/(2NS1) holds.
    8. [AMBIG-15] μ, L, G0, M, Ψ1, Ψ2 are inputs (the paper gives none); the
       defaults are illustrative (Fig. 2 setting: MLR, ε = 100, λ = 0.1) and
       :func:`check_assumptions` lists violated assumptions.
    9. [AMBIG-4] Δs = 2C/abs(D_n) and σ_u of eq. 8 come from
       ``rayfl.privacy.gaussian.dp_ditto_noise_std``; ε = ∞ means no noise.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.algorithms.ditto_fairness import (
    LinearModelParams,
    alpha0_of_lambda,
    alpha_moments,
    expected_alpha_moments,
    fairness_constants,
    fairness_derivative,
    fairness_risk,
    fairness_variance,
    lambda_of_alpha0,
    optimal_lambda,
)
from rayfl.privacy.gaussian import dp_ditto_noise_std

__all__ = [
    "BoundConstants",
    "LinearModelParams",
    "TheoryParams",
    "alpha0_of_lambda",
    "alpha_moments",
    "bound_coefficients",
    "bound_constants",
    "bound_curve",
    "check_assumptions",
    "convergence_bound",
    "convergence_bound_closed_form",
    "expected_alpha_moments",
    "fairness_constants",
    "fairness_derivative",
    "fairness_risk",
    "fairness_variance",
    "inputs_from_run_config",
    "joint_search",
    "lambda_of_alpha0",
    "min_linear_geometric",
    "optimal_lambda",
    "optimal_rounds",
    "rounds_upper_bound",
    "summed_noise_var",
    "tune",
]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class TheoryParams:
    """Inputs of Theorem 1 and eq. 8 (defaults: illustrative, detail 8)."""

    mu: float = 1.0
    smoothness: float = 100.0
    grad_bound: float = 1.0
    model_gap: float = 1.0
    initial_global_gap: float = 1.0
    initial_personal_gap: float = 1.0
    dim: int = 7850
    num_clients: int = 20
    dataset_size: int = 2625
    clip_norm: float = 20.0
    epsilon: float = 100.0
    delta: float = 0.01
    lr_global: float = 0.005
    lr_personal: float = 0.005
    lam: float = 0.1


@dataclass(frozen=True)
class BoundConstants:
    """Constants of the recursion of Theorem 1 (spec §4.3-4.5)."""

    eps_global: float
    eps_personal: float
    beta: float
    c: float
    phi: float
    psi1: float
    psi2: float


def summed_noise_var(p: TheoryParams, rounds: npt.ArrayLike) -> FloatArray:
    """Return σ_z² = N σ_u² = 2TΔs² ln(1/δ)/ε² for planned T (eq. 8).

    Example:
        >>> p = TheoryParams(clip_norm=20.0, epsilon=10.0, dataset_size=2625)
        >>> round(math.sqrt(float(summed_noise_var(p, 30)) / 20), 5)
        0.00566
    """
    t = np.asarray(rounds, dtype=np.float64)
    if math.isinf(p.epsilon):
        return np.zeros_like(t)
    sigma_1 = dp_ditto_noise_std(
        clip_norm=p.clip_norm,
        dataset_size=p.dataset_size,
        num_rounds=1,
        num_clients=p.num_clients,
        epsilon=p.epsilon,
        delta=p.delta,
    )
    return p.num_clients * sigma_1**2 * t


def bound_constants(p: TheoryParams, lam: float | None = None) -> BoundConstants:
    """Return ε_G (eq. 9), ε_L, β, c (Lemma 1, Theorem 1) and φ_L (Lemma 2).

    Example:
        >>> k = bound_constants(TheoryParams(mu=2.0, lr_personal=0.1), lam=1.3)
        >>> round(k.eps_personal, 12)  # μ = 2: ε_L = 1 − η_L whatever λ
        0.9
    """
    lam = p.lam if lam is None else lam
    eta_g, eta_l, mu = p.lr_global, p.lr_personal, p.mu
    g = ((1 - lam / 2) * p.grad_bound + lam * (p.grad_bound / mu + p.model_gap)) ** 2
    phi = (
        float(summed_noise_var(p, 1.0))
        * p.dim
        * p.smoothness
        / (2.0 * p.num_clients**2)
    )
    return BoundConstants(
        eps_global=1 - 2 * mu * eta_g + mu * eta_g**2 * p.smoothness,
        eps_personal=1 + eta_l - eta_l * (mu + (1 - mu / 2) * lam),
        beta=(4 * eta_l**2 + 2 * eta_l) * lam**2 / mu,
        c=(1 + lam**2) * eta_l**2 * g,
        phi=phi,
        psi1=p.initial_global_gap,
        psi2=p.initial_personal_gap,
    )


def convergence_bound(rounds: int, p: TheoryParams, lam: float | None = None) -> float:
    """Return h(T, λ), Theorem 1's bound on E‖ϖ_n^T − ϖ_n*‖², by recursion.

    a_{k+1} = ε_L a_k + c + β e_k and e_{k+1} = ε_G e_k + φ_L T (Lemmas 1-2),
    a_0 = Ψ2, e_0 = Ψ1 (spec §4.5).

    Example:
        >>> convergence_bound(0, TheoryParams(initial_personal_gap=3.0))
        3.0
    """
    k = bound_constants(p, lam)
    a, e = k.psi2, k.psi1
    for _ in range(int(rounds)):
        a, e = k.eps_personal * a + k.c + k.beta * e, k.eps_global * e + k.phi * rounds
    return float(a)


def convergence_bound_closed_form(
    rounds: int, p: TheoryParams, lam: float | None = None
) -> float:
    """Return h(T, λ) from the closed forms (14) (ε_L ≠ ε_G) or (15) (ε_L = ε_G)."""
    k = bound_constants(p, lam)
    t, el, eg = int(rounds), k.eps_personal, k.eps_global
    head = el**t * k.psi2 + k.c * (el**t - 1) / (el - 1)
    noise = k.phi * t / (eg - 1)
    if abs(el - eg) > 1e-9:
        inner = (el**t - eg**t) / (el - eg) * k.psi1 + (
            (el ** (t - 1) - eg ** (t - 1)) / (el / eg - 1)
            - (el ** (t - 1) - 1) / (el - 1)
        ) * noise
    else:
        inner = (
            t * el ** (t - 1) * k.psi1
            + ((t - 1) * el ** (t - 1) - (el ** (t - 1) - 1) / (el - 1)) * noise
        )
    return float(head + k.beta * inner)


def bound_coefficients(p: TheoryParams, lam: float | None = None) -> dict[str, float]:
    """Return H1..H6 of h = (H1 + H2T)ε_L^T + (H3 + H4T)ε_G^T + H5T + H6 (16b).

    Raises:
        ValueError: If ε_L = ε_G (eq. 16b does not apply) or either equals 1.
    """
    k = bound_constants(p, lam)
    el, eg, b, phi = k.eps_personal, k.eps_global, k.beta, k.phi
    if abs(el - eg) <= 1e-9 or el == 1 or eg == 1:
        raise ValueError(
            f"eq. 16b needs ε_L ≠ ε_G and both ≠ 1, got ε_L={el}, ε_G={eg}"
        )
    return {
        "H1": k.psi2 + b * k.psi1 / (el - eg) - k.c / (1 - el),
        "H2": -b * phi / ((1 - el) * (el - eg)),
        "H3": -b * k.psi1 / (el - eg),
        "H4": b * phi / ((1 - eg) * (el - eg)),
        "H5": b * phi / ((1 - eg) * (1 - el)),
        "H6": k.c / (1 - el),
    }


def min_linear_geometric(k: float, r: float) -> float:
    """Return min over T ≥ 0 of K·T·r^T for 0 < r < 1 (spec §4.6, detail 3).

    K/(e ln(1/r)) at T = 1/ln(1/r) when K < 0, else 0 (the infimum).

    Example:
        >>> round(min_linear_geometric(-1.0, math.exp(-1.0)), 6)  # −1/e at T = 1
        -0.367879
    """
    return k / (math.e * math.log(1.0 / r)) if k < 0 else 0.0


def rounds_upper_bound(p: TheoryParams, lam: float | None = None) -> float | None:
    """Return T' with h_Low(T') = h(0) (eq. 17), or None when no bracket applies."""
    k = bound_constants(p, lam)
    el, eg = k.eps_personal, k.eps_global
    if not (0 < el < 1 and 0 < eg < 1) or abs(el - eg) <= 1e-9:
        return None
    h = bound_coefficients(p, lam)
    if not h["H5"] > 0:
        return None
    h0 = (
        h["H6"]
        + min(0.0, h["H1"])
        + min_linear_geometric(h["H2"], el)
        + min(0.0, h["H3"])
        + min_linear_geometric(h["H4"], eg)
    )
    return (k.psi2 - h0) / h["H5"]


def bound_curve(
    p: TheoryParams, t_max: int, lam: float | npt.ArrayLike | None = None
) -> FloatArray:
    """Return h(T, λ) for T = 0..t_max, vectorised over T.

    Args:
        p: Theory inputs.
        t_max: Largest planned T ≥ 0.
        lam: λ (scalar), or one λ per T, shape (t_max + 1,); default ``p.lam``.

    Returns:
        h, float64 (t_max + 1,); h[0] = Ψ2.
    """
    t = np.arange(t_max + 1, dtype=np.float64)
    lams = np.broadcast_to(np.asarray(p.lam if lam is None else lam, float), t.shape)
    ks = [bound_constants(p, float(v)) for v in np.unique(lams)]
    pick = np.searchsorted(np.unique(lams), lams)
    el = np.array([k.eps_personal for k in ks])[pick]
    beta = np.array([k.beta for k in ks])[pick]
    c = np.array([k.c for k in ks])[pick]
    k0 = ks[0]
    a = np.full_like(t, k0.psi2)
    e = np.full_like(t, k0.psi1)
    for step in range(t_max):
        live = step < t
        a = np.where(live, el * a + c + beta * e, a)
        e = np.where(live, k0.eps_global * e + k0.phi * t, e)
    return a


def optimal_rounds(
    p: TheoryParams, t_max: int, lam: float | None = None
) -> dict[str, Any]:
    """Return T* = argmin_{1 ≤ T ≤ t_max} h(T, λ), searched inside (0, T'] (Sec. IV-B).

    Returns:
        ``t_star``, ``bound`` (h at T*), ``t_upper`` (T' or None) and
        ``bracketed`` (True when the search stayed inside the bracket).
    """
    t_up = rounds_upper_bound(p, lam)
    bracketed = False
    if t_up is not None and t_up >= 1:
        h = bound_curve(p, min(t_max, int(math.floor(t_up))), lam)
        best = int(np.argmin(h[1:])) + 1
        bracketed = bool(h[best] <= h[0])
    if not bracketed:
        h = bound_curve(p, t_max, lam)
        best = int(np.argmin(h[1:])) + 1
    return {
        "t_star": best,
        "bound": float(h[best]),
        "t_upper": t_up,
        "bracketed": bracketed,
    }


def joint_search(p: TheoryParams, lin: LinearModelParams, t_max: int) -> dict[str, Any]:
    """Solve (33): min over T of h(T, λ(T)), λ(T) the fairness optimum (Sec. V-B).

    Returns:
        ``t``, ``lam``, ``bound`` at the optimum, and ``lam_curve``/``bound_curve``
        for T = 0..t_max (λ(0) is taken equal to λ(1); h(0) = Ψ2).
    """
    sz2 = summed_noise_var(p, np.arange(1, t_max + 1))
    lam_t = np.array(
        [
            optimal_lambda(
                lin, dim=p.dim, num_clients=p.num_clients, summed_noise_var=float(v)
            )[0]
            for v in sz2
        ]
    )
    lam_curve = np.concatenate((lam_t[:1], lam_t))
    h = bound_curve(p, t_max, lam_curve)
    best = int(np.argmin(h[1:])) + 1
    return {
        "t": best,
        "lam": float(lam_curve[best]),
        "bound": float(h[best]),
        "lam_curve": lam_curve,
        "bound_curve": h,
    }


def check_assumptions(p: TheoryParams, lam: float | None = None) -> list[str]:
    """Return the violated conditions of Assumption 1(b) and ε_G, ε_L ∈ (0, 1)."""
    lam = p.lam if lam is None else lam
    k = bound_constants(p, lam)
    out = []
    if p.lr_global > 2 / p.smoothness:
        out.append(f"eta_G = {p.lr_global} > 2/L = {2 / p.smoothness:.4g}")
    if lam < 2 and not p.mu > (2 - 2 * lam) / (2 - lam):
        out.append(
            f"mu = {p.mu} <= (2 - 2 lam)/(2 - lam) = {(2 - 2 * lam) / (2 - lam):.4g}"
        )
    for name, value in (("eps_G", k.eps_global), ("eps_L", k.eps_personal)):
        if not 0 < value < 1:
            out.append(f"{name} = {value:.6g} is outside (0, 1): the bound diverges")
    return out


def inputs_from_run_config(config: Any) -> dict[str, Any]:
    """Return the :func:`tune` inputs a run config fixes (ε, δ, C, N, η, λ, T)."""
    algo, privacy = config.algorithm, config.privacy
    out: dict[str, Any] = {
        "num_clients": config.data.num_clients,
        "epsilon": math.inf if privacy.epsilon is None else privacy.epsilon,
        "delta": privacy.delta,
        "lr_global": algo.lr,
        "rounds": config.rounds,
    }
    if privacy.clip_norm is not None:
        out["clip_norm"] = privacy.clip_norm
    for field, name in (("lr_personal", "personal_lr"), ("lam", "lam")):
        if hasattr(algo, name):
            out[field] = getattr(algo, name)
    return out


def tune(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Return T*, λ*, the joint (T, λ) and the bound curves for ``rayfl tune-ditto``.

    Args:
        inputs: Field names of :class:`TheoryParams` and :class:`LinearModelParams`,
            plus ``t_max`` (default 200) and ``rounds`` (the planned T at which λ*
            is reported; default t_max). Unknown keys raise.

    Returns:
        ``t_star``, ``t_upper``, ``bracketed``, ``bound_at_t_star``,
        ``lambda_star``/``alpha0_star`` (at ``rounds``), ``joint_t``,
        ``joint_lambda``, ``joint_bound``, ``noise_std`` (σ_u at ``rounds``),
        arrays over T = 0..t_max: ``rounds_axis``, ``bound``, ``lower_bound``
        (h_Low, NaN without a bracket), ``lambda_curve``, ``joint_bound_curve``,
        and ``warnings``.

    Raises:
        ValueError: For an unknown input name.
    """
    theory_fields = {f.name for f in dataclasses.fields(TheoryParams)}
    linear_fields = {f.name for f in dataclasses.fields(LinearModelParams)}
    unknown = set(inputs) - theory_fields - linear_fields - {"t_max", "rounds"}
    if unknown:
        raise ValueError(
            f"unknown tune-ditto input(s) {sorted(unknown)}; allowed: "
            f"{', '.join(sorted(theory_fields | linear_fields | {'t_max', 'rounds'}))}"
        )
    p = TheoryParams(**{k: v for k, v in inputs.items() if k in theory_fields})
    lin = LinearModelParams(**{k: v for k, v in inputs.items() if k in linear_fields})
    t_max = int(inputs.get("t_max", 200))
    rounds = int(inputs.get("rounds", t_max))
    found = optimal_rounds(p, t_max)
    curve = bound_curve(p, t_max)
    axis = np.arange(t_max + 1)
    low = np.full(t_max + 1, np.nan)
    if found["t_upper"] is not None:
        h5 = bound_coefficients(p)["H5"]
        low = p.initial_personal_gap + h5 * (axis - found["t_upper"])
    noise_var = float(summed_noise_var(p, rounds))
    lam_star, alpha_star = optimal_lambda(
        lin, dim=p.dim, num_clients=p.num_clients, summed_noise_var=noise_var
    )
    joint = joint_search(p, lin, t_max)
    return {
        "t_star": found["t_star"],
        "t_upper": found["t_upper"],
        "bracketed": found["bracketed"],
        "bound_at_t_star": found["bound"],
        "lambda_star": lam_star,
        "alpha0_star": alpha_star,
        "joint_t": joint["t"],
        "joint_lambda": joint["lam"],
        "joint_bound": joint["bound"],
        "noise_std": math.sqrt(noise_var / p.num_clients),
        "rounds_axis": axis,
        "bound": curve,
        "lower_bound": low,
        "lambda_curve": joint["lam_curve"],
        "joint_bound_curve": joint["bound_curve"],
        "warnings": check_assumptions(p),
    }
