"""Adaptive control of H2FDP, Algorithm 1 (spec §3.3–3.4, paper eqs. 33–35).

Part I: η_k = γ_k/√(k+1), γ_k = min{1/τ_{k−1}, 1/K_g}/β̂_k (Sec. 5.1).
Part II: at each global aggregation choose τ_k and s_c^k minimising problem P:

    α_1 R(τ)(E_Glob + K_ℓ Σ_c E_{c,Loc}) + α_2 R(τ)(Δ_Glob + K_ℓ Σ_c Δ_{c,Loc}) + α_3 ν/φ

with R(τ) = (T − t_k)/τ remaining global rounds and (eq. 33 term (b))

    ν(τ, s) = 4τ(K_ℓ³ + 1) M q² G² ln(1/δ)/(N² ε²) Σ_c (1[c∈N_T] c_2²/s_c² + 1[c∈N_U] v_2²/s_c).

Symbol table:

| paper symbol | code name |
|---|---|
| τ, τ_max | ``tau``, ``tau_max`` |
| s_T, s_U | ``s_trusted``, ``s_untrusted`` |
| K_ℓ | ``num_local`` |
| α_1, α_2, α_3 | ``alpha_energy``, ``alpha_delay``, ``alpha_dp`` |
| φ | ``phi`` |
| β̂ | ``beta_hat`` |

Implementation details:
    1. Per-cluster variables collapse to s_T (all trusted clusters) and s_U
       (all untrusted), s_c^k = min(s, s_c) (paper Sec. 5.2; spec §3.4).
    2. The search is the paper's nested line search: an outer loop over τ and,
       because the objective is separable in s_T and s_U, two independent 1-D
       searches inside (O(τ_max (s_T + s_U)) evaluations); tests check it
       against brute-force enumeration. Ties: larger s, then smaller τ.
    3. K_ℓ is fixed; for τ ≤ K_ℓ the interval holds only τ − 1 local
       aggregations, so K(τ) = min(K_ℓ, τ − 1) is used in the costs and ν.
    4. Normalisation (spec §3.4): with ``normalize`` each of (a), (b), (c) is
       divided by its value at (τ_0, full participation) at k = 0, so α's of
       order 1 balance; otherwise φ = ν_0/((a)+(b))_0.
    5. Energy/delay use the expected per-device upload cost (rate at the mean
       channel); only ν's structure, not β, σ or ζ, enters P (spec §3.5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["ControlProblem", "brute_force", "solve", "step_size"]


def step_size(*, k: int, tau_prev: int, num_global: int, beta_hat: float) -> float:
    """Return η_k = min{1/τ_{k−1}, 1/K_g}/β̂ /√(k+1) (Sec. 5.1, Thm 4.3).

    Example:
        >>> step_size(k=3, tau_prev=20, num_global=10, beta_hat=2.0)
        0.0125
    """
    gamma = min(1.0 / tau_prev, 1.0 / num_global) / beta_hat
    return gamma / math.sqrt(k + 1)


@dataclass(frozen=True)
class ControlProblem:
    """The data of problem P at one global aggregation.

    Attributes:
        trusted: Trust flag per cluster (N,).
        sizes: s_c per cluster (N,).
        energy_j: Expected energy of one upload, mean over each cluster's devices (N,).
        time_s: Expected time of one upload, mean over each cluster's devices (N,).
        backhaul_energy_j: p̄ MQ/R̄ per edge and global aggregation.
        backhaul_delay_s: 2 MQ/R̄ per edge and global aggregation.
        remaining_steps: T − t_k.
        tau_max: τ_max.
        num_local: K_ℓ.
        nu_scale: 4 M q² G² ln(1/δ)/(N² ε²).
        edge_constant: c_2.
        device_constant: v_2.
        alpha_energy: α_1.
        alpha_delay: α_2.
        alpha_dp: α_3.
        energy_ref: Normaliser of (a) (1 = none).
        delay_ref: Normaliser of (b).
        nu_ref: Normaliser (φ) of (c).
    """

    trusted: npt.NDArray[np.bool_]
    sizes: npt.NDArray[np.int64]
    energy_j: npt.NDArray[np.float64]
    time_s: npt.NDArray[np.float64]
    backhaul_energy_j: float
    backhaul_delay_s: float
    remaining_steps: int
    tau_max: int
    num_local: int
    nu_scale: float
    edge_constant: float
    device_constant: float
    alpha_energy: float = 1.0
    alpha_delay: float = 1.0
    alpha_dp: float = 1.0
    energy_ref: float = 1.0
    delay_ref: float = 1.0
    nu_ref: float = 1.0

    def locals_at(self, tau: int) -> int:
        """K(τ) = min(K_ℓ, τ − 1) (detail 3)."""
        return min(self.num_local, tau - 1)

    def terms(
        self, tau: int, s_trusted: int, s_untrusted: int
    ) -> tuple[float, float, float]:
        """Return the raw (a) energy, (b) delay and ν of one candidate."""
        s = np.where(self.trusted, s_trusted, s_untrusted)
        s = np.minimum(s, self.sizes).astype(np.float64)
        k = self.locals_at(tau)
        rounds = self.remaining_steps / tau
        n = len(self.sizes)
        energy = rounds * (
            float(np.sum((k + 1) * s * self.energy_j)) + n * self.backhaul_energy_j
        )
        delay = rounds * (
            float(np.sum((k + 1) * s * self.time_s)) + n * self.backhaul_delay_s
        )
        inv = np.where(
            self.trusted, self.edge_constant**2 / s**2, self.device_constant**2 / s
        )
        nu = tau * (k**3 + 1) * self.nu_scale * float(np.sum(inv))
        return energy, delay, nu

    def objective(self, tau: int, s_trusted: int, s_untrusted: int) -> float:
        """Return the (normalised) objective of P for one candidate."""
        energy, delay, nu = self.terms(tau, s_trusted, s_untrusted)
        return (
            self.alpha_energy * energy / self.energy_ref
            + self.alpha_delay * delay / self.delay_ref
            + self.alpha_dp * nu / self.nu_ref
        )

    def s_max(self) -> tuple[int, int]:
        """Return (max s_c over trusted clusters, over untrusted); 0 if none."""
        t = self.sizes[self.trusted]
        u = self.sizes[~self.trusted]
        return (int(t.max()) if len(t) else 0, int(u.max()) if len(u) else 0)

    def tau_grid(self) -> range:
        """τ ∈ [1, min(τ_max, T − t_k)]."""
        return range(1, max(1, min(self.tau_max, self.remaining_steps)) + 1)


def _side(
    problem: ControlProblem,
    tau: int,
    mask: npt.NDArray[np.bool_],
    s_top: int,
    constant: float,
    trusted: bool,
) -> tuple[int, float]:
    """Best s (and its cost) for the clusters in ``mask`` at this τ (1-D search)."""
    if s_top == 0:
        return 0, 0.0
    k = problem.locals_at(tau)
    rounds = problem.remaining_steps / tau
    s = np.arange(1, s_top + 1, dtype=np.float64)[:, None]
    eff = np.minimum(s, problem.sizes[mask][None, :].astype(np.float64))
    energy = rounds * (k + 1) * (eff * problem.energy_j[mask]).sum(axis=1)
    delay = rounds * (k + 1) * (eff * problem.time_s[mask]).sum(axis=1)
    inv = (constant**2 / eff**2 if trusted else constant**2 / eff).sum(axis=1)
    nu = tau * (k**3 + 1) * problem.nu_scale * inv
    cost = (
        problem.alpha_energy * energy / problem.energy_ref
        + problem.alpha_delay * delay / problem.delay_ref
        + problem.alpha_dp * nu / problem.nu_ref
    )
    best = len(cost) - 1 - int(np.argmin(cost[::-1]))  # ties → larger s
    return best + 1, float(cost[best])


def solve(problem: ControlProblem) -> tuple[int, int, int]:
    """Return (τ, s_T, s_U) minimising P by the nested line search (detail 2).

    Example:
        >>> p = ControlProblem(np.array([True, False]), np.array([5, 5]),
        ...     np.ones(2), np.ones(2), 0.0, 0.0, 100, 10, 1, 1.0, 1.5, 1.5)
        >>> solve(p) == brute_force(p)
        True
    """
    s_top_t, s_top_u = problem.s_max()
    n = len(problem.sizes)
    best: tuple[float, int, int, int] | None = None
    for tau in problem.tau_grid():
        rounds = problem.remaining_steps / tau
        fixed = (
            problem.alpha_energy
            * rounds
            * n
            * problem.backhaul_energy_j
            / problem.energy_ref
            + problem.alpha_delay
            * rounds
            * n
            * problem.backhaul_delay_s
            / problem.delay_ref
        )
        st, ct = _side(
            problem, tau, problem.trusted, s_top_t, problem.edge_constant, True
        )
        su, cu = _side(
            problem, tau, ~problem.trusted, s_top_u, problem.device_constant, False
        )
        value = fixed + ct + cu
        if best is None or value < best[0]:
            best = (value, tau, st, su)
    assert best is not None
    return best[1], best[2], best[3]


def brute_force(problem: ControlProblem) -> tuple[int, int, int]:
    """Return the exhaustive argmin of P over (τ, s_T, s_U) (oracle for tests)."""
    s_top_t, s_top_u = problem.s_max()
    best: tuple[float, int, int, int] | None = None
    for tau in problem.tau_grid():
        for st in range(s_top_t, -1 if s_top_t == 0 else 0, -1):
            for su in range(s_top_u, -1 if s_top_u == 0 else 0, -1):
                value = problem.objective(tau, max(st, 1), max(su, 1))
                if best is None or value < best[0]:
                    best = (value, tau, st, su)
    assert best is not None
    return best[1], best[2], best[3]
