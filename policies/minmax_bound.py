"""The per-round PL convergence bound that Algorithm 2 of Zhao et al. 2025 min-maxes.

Pure numpy/scipy math of spec seed_000 §3.3 and §4 ("Enhancing Convergence,
Privacy and Fairness for Wireless Personalized FL", Zhao et al., IEEE 2025): the
FL learning rate in closed form (P5) and, per client, the PL learning rate η_P
and PL-FL weight λ minimising the per-round PL bound Φ_n (P7) under the equal
contraction constraint C1, by a bounded 1-D convex search.

Symbol table (paper symbol → code name):

| Symbol | Code name | Meaning |
|--------|-----------|---------|
| μ, L | ``mu``, ``smoothness`` | strong convexity, smoothness (§4.6) |
| G0, M | ``grad_bound``, ``model_gap`` | E‖∇F_n‖² ≤ G0², ‖u_n* − ω*‖ ≤ M [AMBIG-6] |
| ϕ1, ϕ2 | ``phi1``, ``phi2`` | Young constants of Lemma 1 [AMBIG-6] |
| φ1, φ2 | ``varphi1``, ``varphi2`` | Young constants of Theorem 2 [AMBIG-6] |
| C, σ_DP | ``clip_norm``, ``noise_std`` | clipping threshold, DP noise std |
| abs(ω) | ``num_params`` | model size |
| R, β_L = β_G | ``bits_per_element``, 1/(2^R − 1) | quantizer bits and constant |
| ε_P | ``pl_contraction`` | common PL contraction factor [AMBIG-7] |
| η_F, ε_F | ``fl_lr()``, ``fl_contraction()`` | eq. P5 and its minimum |
| Θ_L | ``uplink_error_term(mean_rho)`` | eq. 52a (spec §4.2) |
| Γ0, Γ1 | ``gamma0``, ``gamma1`` | eq. 28 (spec §4.3) |
| λ(η) | :func:`pl_weight` | eq. 37 |
| Ω0, Ω1 | :func:`feasible_intervals` | eq. 38 |
| Φ_n | :meth:`PLBound.objective` | eq. 34 (spec §4.4) |

Implementation details:
    1. [AMBIG-6] ϕ1 = ϕ2 = φ1 = φ2 = 1e−3 and G0 = M = 1 by default; the P7
       optimum is nearly insensitive to them (spec §3.3). ``PLBound`` raises if
       they give ε_F ≥ 1 (C11).
    2. [AMBIG-7] ε_P defaults to 1 − μ²/4 + 0.1·μ²/4; ``PLBound`` raises unless
       μ < 2 and 1 − μ²/4 ≤ ε_P < 1 (so Ω0 is non-empty).
    3. Γ0 uses (E_G^max)² in its last bracket, as the derivation (eq. 56) gives;
       the paper prints (E_L^max)² (spec §4.3; numerically negligible).
    4. The bracket of Φ_n after fixing Θ_L (eq. 34-35) is
       Γ2·ρ_{n,G} + Γ3 + (G0²/μ + M)²·mean(ε_F) with the common η_F of P5, so
       mean(ε_F) = ε_F.
    5. The 1-D search is a golden-section search on each interval shrunk by 1e−9
       (Theorem 5: Φ_n is convex there), vectorised over clients; the spec's
       ``minimize_scalar(method="bounded")`` is the same search one client at a
       time. 200 iterations shrink the interval below 1e−15 of its width.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

import numpy as np
import numpy.typing as npt
from annotated_types import Gt, Lt

from policies.base import Count, NonNegative, Positive

__all__ = ["PLBound", "feasible_intervals", "golden_section_min", "pl_weight"]

FloatArray = npt.NDArray[np.float64]
_SHRINK = 1e-9
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def pl_weight(eta: npt.ArrayLike, *, mu: float, pl_contraction: float) -> FloatArray:
    """Return λ(η) that makes the PL contraction factor equal ε_P, eq. (37).

    λ(η) = (1 − μ/2)^{-1}·((1 − ε_P)/η + η − μ), valid for μ < 2; it solves
    ε_P = 1 − η((1 − λ/2)μ + λ) + η² (Theorem 3) for λ.

    Args:
        eta: PL learning rates η_P > 0, any shape.
        mu: Strong-convexity constant μ < 2.
        pl_contraction: ε_P.

    Returns:
        λ, same shape, float64.

    Example:
        >>> float(pl_weight(0.5, mu=1.0, pl_contraction=0.75))
        0.0
    """
    eta = np.asarray(eta, dtype=np.float64)
    return ((1.0 - pl_contraction) / eta + eta - mu) / (1.0 - mu / 2.0)  # type: ignore[no-any-return]  # numpy stubs: Any


def feasible_intervals(
    *, mu: float, pl_contraction: float
) -> list[tuple[float, float]]:
    """Return the open η intervals Ω0, Ω1 where λ(η) ∈ (0, 2) and η ∈ (0, 1), eq. (38).

    η1 = 1 − √ε_P (λ = 2), η2,3 = (μ ∓ √(μ² − 4(1 − ε_P)))/2 (λ = 0);
    Ω0 = (η1, η2) and Ω1 = (η3, 1) if η3 < 1 (i.e. ε_P < 2 − μ), else empty.

    Args:
        mu: μ in (0, 2).
        pl_contraction: ε_P in [1 − μ²/4, 1).

    Returns:
        The non-empty intervals, Ω0 first.

    Raises:
        ValueError: Unless μ in (0, 2) and 1 − μ²/4 ≤ ε_P < 1 (spec §3.3).

    Example:
        >>> feasible_intervals(mu=1.0, pl_contraction=0.75)
        [(0.1339745962155614, 0.5), (0.5, 1.0)]
    """
    if not 0.0 < mu < 2.0:
        raise ValueError(f"mu must be in (0, 2) for eq. (37), got {mu}")
    lowest = 1.0 - mu * mu / 4.0
    if not lowest <= pl_contraction < 1.0:
        raise ValueError(
            f"pl_contraction must be in [1 - mu^2/4, 1) = [{lowest:.6g}, 1), "
            f"got {pl_contraction}"
        )
    root = math.sqrt(max(mu * mu - 4.0 * (1.0 - pl_contraction), 0.0))
    eta1 = 1.0 - math.sqrt(pl_contraction)
    eta2, eta3 = (mu - root) / 2.0, (mu + root) / 2.0
    intervals = [(eta1, eta2)]
    if eta3 < 1.0:
        intervals.append((eta3, 1.0))
    return intervals


def golden_section_min(
    objective: Callable[[FloatArray], FloatArray],
    low: float,
    high: float,
    *,
    size: int,
    iterations: int = 200,
) -> tuple[FloatArray, FloatArray]:
    """Minimise ``size`` unimodal functions of one variable on [low, high] at once.

    Args:
        objective: Callable mapping an (size,) η array to (size,) values.
        low: Left end of the bracket.
        high: Right end of the bracket, > low.
        size: Number of independent problems (clients).
        iterations: Golden-section steps; each shrinks the bracket by 0.618.

    Returns:
        (argmin, min), both (size,) float64.

    Example:
        >>> x, f = golden_section_min(lambda e: (e - 0.3) ** 2, 0.0, 1.0, size=1)
        >>> round(float(x[0]), 6)
        0.3
    """
    a = np.full(size, low)
    b = np.full(size, high)
    c = b - _GOLDEN * (b - a)
    d = a + _GOLDEN * (b - a)
    fc, fd = objective(c), objective(d)
    for _ in range(iterations):
        left = fc < fd  # minimum in [a, d]
        b = np.where(left, d, b)
        a = np.where(left, a, c)
        c_new = np.where(left, b - _GOLDEN * (b - a), d)
        d_new = np.where(left, c, a + _GOLDEN * (b - a))
        fresh = np.where(left, c_new, d_new)
        f_fresh = objective(fresh)
        fc, fd = np.where(left, f_fresh, fd), np.where(left, fc, f_fresh)
        c, d = c_new, d_new
    x = (a + b) / 2.0
    return x, objective(x)


@dataclass(frozen=True)
class PLBound:
    """Constants of the bound of spec seed_000 §4 and the P5 / P7 solutions.

    Attributes:
        mu: μ (paper values §4.6: MLR 0.13, DNN 0.27, CNN-FMNIST 0.05).
        smoothness: L (MLR 0.43, DNN 1.32, CNN-FMNIST 0.29).
        grad_bound: G0.
        model_gap: M.
        phi1: ϕ1.
        phi2: ϕ2.
        varphi1: φ1.
        varphi2: φ2.
        clip_norm: C.
        noise_std: σ_DP.
        num_params: abs(ω).
        bits_per_element: R.
        pl_contraction: ε_P; None means 1 − μ²/4 + 0.1·μ²/4 [AMBIG-7].
    """

    mu: Annotated[float, Gt(0), Lt(2)] = 0.05
    smoothness: Positive = 0.29
    grad_bound: Positive = 1.0
    model_gap: NonNegative = 1.0
    phi1: Positive = 1e-3
    phi2: Positive = 1e-3
    varphi1: Positive = 1e-3
    varphi2: Positive = 1e-3
    clip_norm: Positive = 20.0
    noise_std: NonNegative = 0.009
    num_params: Count = 582_026
    bits_per_element: Count = 16
    pl_contraction: Annotated[float, Gt(0), Lt(1)] | None = None

    def __post_init__(self) -> None:
        """Check the ranges and C11 (ε_F < 1)."""
        positive = {
            "smoothness": self.smoothness,
            "grad_bound": self.grad_bound,
            "phi1": self.phi1,
            "phi2": self.phi2,
            "varphi1": self.varphi1,
            "varphi2": self.varphi2,
            "clip_norm": self.clip_norm,
            "num_params": self.num_params,
            "bits_per_element": self.bits_per_element,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        for name, value in {
            "model_gap": self.model_gap,
            "noise_std": self.noise_std,
        }.items():
            if not value >= 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        feasible_intervals(mu=self.mu, pl_contraction=self.contraction)
        if not 0.0 < self.fl_contraction() < 1.0:
            raise ValueError(
                f"eps_F = {self.fl_contraction():.6g} must be in (0, 1) (C11): "
                "lower phi2 + varphi1 below mu^2 / (4 L^2) = "
                f"{self.mu**2 / (4 * self.smoothness**2):.4g}"
            )

    @property
    def contraction(self) -> float:
        """ε_P, with the [AMBIG-7] default filled in."""
        if self.pl_contraction is not None:
            return float(self.pl_contraction)
        quarter = self.mu * self.mu / 4.0
        return 1.0 - quarter + 0.1 * quarter

    @property
    def beta(self) -> float:
        """β_L = β_G = 1/(2^R − 1)."""
        return 1.0 / (2.0**self.bits_per_element - 1.0)

    def fl_lr(self) -> float:
        """η_F = μ/(2(1 + ϕ1)L²), the minimiser of ε_F over (0, 1) (P5)."""
        return self.mu / (2.0 * (1.0 + self.phi1) * self.smoothness**2)

    def fl_contraction(self, eta: float | None = None) -> float:
        """ε_F = (1 + φ1)((1 + ϕ2) + (1 + ϕ1)L²η² − μη) (Theorem 2), at η_F by default."""
        eta = self.fl_lr() if eta is None else eta
        inner = (1.0 + self.phi2) + (1.0 + self.phi1) * self.smoothness**2 * eta**2
        return (1.0 + self.varphi1) * (inner - self.mu * eta)

    def uplink_error_term(self, mean_rho: float) -> float:
        """Θ_L = [2C² + (2 − β²)abs(ω)(C + 3σ)² − abs(ω)σ²]·mean ρ_{n,L} (eq. 52a)."""
        c, s, w = self.clip_norm, self.noise_std, self.num_params
        scale = 2 * c * c + (2 - self.beta**2) * w * (c + 3 * s) ** 2 - w * s * s
        return scale * float(mean_rho)

    def _error_max(self) -> tuple[float, float]:
        """(E_L^max, E_G^max) = (β(C + 3σ), βC), eq. (6)-(7)."""
        return (
            self.beta * (self.clip_norm + 3 * self.noise_std),
            self.beta * self.clip_norm,
        )

    @property
    def gamma0(self) -> float:
        """Γ0 of eq. (28) (detail 3)."""
        e_l, e_g = self._error_max()
        c, w = self.clip_norm, self.num_params
        inner = (
            2 * (1 + 1 / self.varphi2) * c * c
            + 2 * w * (1 + self.varphi2) * (self.noise_std**2 + e_l**2)
            + 2 * w * (c * c - e_g**2)
        )
        return (1 + 1 / self.varphi1) * inner

    @property
    def gamma1(self) -> float:
        """Γ1 of eq. (28)."""
        e_l, e_g = self._error_max()
        w = self.num_params
        young = (1 + self.varphi1) * (1 + 1 / self.phi1 + 1 / self.phi2)
        return (
            w * young * (self.noise_std**2 + e_l**2)
            + 2 * w * (1 + 1 / self.varphi1) * e_g**2
        )

    def bracket(self, theta: float, downlink_rho: npt.ArrayLike) -> FloatArray:
        """Return Γ2·ρ_{n,G} + Γ3 + (G0²/μ + M)²·ε_F per client (eq. 34-35, detail 4)."""
        gamma2 = 2 * (1 + 1 / self.varphi1) * (1 + self.varphi2) * theta + self.gamma0
        young = (1 + self.varphi1) * (1 + 1 / self.phi1 + 1 / self.phi2)
        gamma3 = young * theta + self.gamma1
        drift = (self.grad_bound**2 / self.mu + self.model_gap) ** 2
        rho = np.asarray(downlink_rho, dtype=np.float64)
        return gamma2 * rho + gamma3 + drift * self.fl_contraction()

    def objective(
        self, eta: npt.ArrayLike, lam: npt.ArrayLike, bracket: npt.ArrayLike
    ) -> FloatArray:
        """Φ_n = (1 + λ³)η²G_n + Ψ_n·bracket (Theorem 3, eq. 30).

        G_n = ((1 − λ/2)G0 + λ(G0/μ + M))², Ψ_n = (η² + 1)λ² + η³/λ.
        """
        eta = np.asarray(eta, dtype=np.float64)
        lam = np.asarray(lam, dtype=np.float64)
        g0 = self.grad_bound
        drift = ((1 - lam / 2) * g0 + lam * (g0 / self.mu + self.model_gap)) ** 2
        with np.errstate(divide="ignore"):
            psi = (eta**2 + 1) * lam**2 + eta**3 / lam
        return (1 + lam**3) * eta**2 * drift + psi * np.asarray(bracket)  # type: ignore[no-any-return]  # numpy stubs: Any

    def pl_contraction_of(self, eta: npt.ArrayLike, lam: npt.ArrayLike) -> FloatArray:
        """ε_{P,n} = 1 − η((1 − λ/2)μ + λ) + η² (Theorem 3)."""
        eta = np.asarray(eta, dtype=np.float64)
        lam = np.asarray(lam, dtype=np.float64)
        return 1 - eta * ((1 - lam / 2) * self.mu + lam) + eta**2  # type: ignore[no-any-return]  # numpy stubs: Any

    def solve_pl(
        self, bracket: npt.ArrayLike
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Solve P7 per client: argmin over η in Ω0 ∪ Ω1 of Φ_n(η, λ(η)).

        Args:
            bracket: (N,) bracket of each client (:meth:`bracket`).

        Returns:
            (η_P*, λ*, Φ_n*), each (N,) float64.
        """
        values = np.atleast_1d(np.asarray(bracket, dtype=np.float64))
        eps_p = self.contraction

        def phi(eta: FloatArray) -> FloatArray:
            lam = pl_weight(eta, mu=self.mu, pl_contraction=eps_p)
            return self.objective(eta, lam, values)

        best_eta = np.full(values.shape, np.nan)
        best_phi = np.full(values.shape, np.inf)
        for low, high in feasible_intervals(mu=self.mu, pl_contraction=eps_p):
            width = high - low
            eta, value = golden_section_min(
                phi, low + _SHRINK * width, high - _SHRINK * width, size=values.size
            )
            better = value < best_phi
            best_eta = np.where(better, eta, best_eta)
            best_phi = np.where(better, value, best_phi)
        lam = pl_weight(best_eta, mu=self.mu, pl_contraction=eps_p)
        return best_eta, lam, best_phi
