"""The per-round drift-plus-penalty problem of DP-SparFL and its two solvers.

Wei et al. 2023 (spec seed_002 §4.4, Sec. V-B): for the available clients Û and
the N channels, choose the assignment a, sparsification rates s and powers P
minimising

    J(a, s, P) = Σ_{i scheduled} (Q_i^fa − λ p̂_i s_i) + Q^de · max_{i scheduled} d_i,

with d_i = c_i + (z_i s_i + z0_i)/R_{i,j(i)}(P_i), R = B·log2(1 + P h/σ²),
c_i = d_i^do + d_i^lo, s_i ∈ [s^th, 1], P_i ≤ P^max, the per-round energy
P_i·(z_i s_i + z0_i)/R ≤ E^max − E_i^cp (C6), one client per channel and exactly
min(N, abs(Û)) clients scheduled (C1-C3 as read in [AMBIG-2]).

Solvers:

- :func:`solve_alternating`: the paper's three blocks, iterated — power
  min(P^max, P^th) (eqs. 18-19), sparsification by the one-variable form of
  Theorem 2 (§4.4.2, :func:`solve_sparsity`), channel allocation by Hungarian
  matching after pruning the edges that violate the epigraph constraint C9
  (eqs. 20-24).
- :func:`solve_sweep`: the exact threshold sweep of §4.4.3 at P = P^max (exact
  when E^max = ∞): for every candidate bottleneck delay D, Hungarian on the
  edge-specific rates s_{i,j}(D).

| paper symbol | code name |
|--------------|-----------|
| Q_i^fa (signed cost) | ``client_cost`` |
| λ p̂_i | ``sparsity_weight`` |
| Q^de | ``delay_queue`` |
| c_i = d^do + d^lo | ``fixed_delay_s`` |
| z_i, z0 | ``bits_per_kept``, ``bits_fixed`` |
| h_{i,j}, σ², B | ``gain``, ``noise_power_w``, ``bandwidth_hz`` |
| P^max | ``max_power_w`` |
| E^max − E_i^cp | ``energy_budget_j`` |
| s^th | ``min_sparsity`` |
| μ | ``Q^de · bottleneck`` in :func:`solve_alternating` |

Implementation details:
    1. [AMBIG-16] P* = min{P^max, P^th} (the paper prints max); P^th solves
       eq. 19 by ``brentq``; with E^max = ∞, P = P^max.
    2. Sparsity (§4.4.2, the equivalent 1-D form): for a fixed assignment, every
       s_i is the largest rate that fits the bottleneck delay D; J(D) is convex
       piecewise linear, so its minimum is at D_low = max_i d_i(s^th) or at a
       d_i(s_i^cap); ties go to the larger D (larger s).
    3. Channel block: edges (i, j) whose rate s_{i,j}(μ/Q^de) falls below s^th
       are pruned (C9), the rest cost Q_i − λ p̂_i s_{i,j}; scipy's
       ``linear_sum_assignment`` on a large finite cost for pruned edges, and a
       matching that uses one is rejected.
    4. Outside the scheduled edges, the channel block prices edge (i, j) at the
       power min(P^max, P^th_{i,j}(s^th)) (the most power that keeps s^th
       energy-feasible); with E^max = ∞ that is P^max.
    5. The alternating loop (spec §4.4.3) starts twice — from the Hungarian at
       s = 1 and from the min-max-delay assignment — and keeps the better end;
       each start stops when J improves by less than 1e-9·max(1, abs(J)). Further
       starts re-solve the channel block at the breakpoints of the starts'
       sparsity blocks (at most ``max_restarts`` per start), and each start is
       also tried with its clients on their min-max-delay channels.
    6. Above U·N = 2000 (never at the paper's 20 × 5) only the two starts run,
       for at most 4 iterations each, to keep a decision within seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.optimize import brentq, linear_sum_assignment
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching

from policies.delay_min import bottleneck_threshold

__all__ = [
    "RoundProblem",
    "Solution",
    "objective",
    "solve_alternating",
    "solve_sparsity",
    "solve_sweep",
    "threshold_power_w",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
_BIG = 1e30
_LARGE = 2000  # U·N above which the alternating solver runs its cheap variant


@dataclass(frozen=True)
class RoundProblem:
    """One round's problem over the available clients (rows) and channels.

    Attributes:
        client_cost: Per-client cost of being scheduled (Q_i^fa, or −Q_i^fa for
            the lower-bound queue), (U,).
        sparsity_weight: λ·p̂_i, (U,).
        delay_queue: Q^de ≥ 0.
        fixed_delay_s: c_i = d^do + d^lo, (U,).
        bits_per_kept: z_i (payload bits per unit of s), (U,).
        bits_fixed: z0_i (keep-map bits), (U,).
        gain: Linear channel gains h_{i,j}, (U, N).
        noise_power_w: σ².
        bandwidth_hz: B.
        max_power_w: P^max.
        min_sparsity: s^th in (0, 1].
        energy_budget_j: E^max − E_i^cp, (U,); inf = C6 inactive.
    """

    client_cost: FloatArray
    sparsity_weight: FloatArray
    delay_queue: float
    fixed_delay_s: FloatArray
    bits_per_kept: FloatArray
    bits_fixed: FloatArray
    gain: FloatArray
    noise_power_w: float
    bandwidth_hz: float
    max_power_w: float
    min_sparsity: float = 0.1
    energy_budget_j: FloatArray = field(default_factory=lambda: np.array([np.inf]))

    @property
    def shape(self) -> tuple[int, int]:
        """(U, N)."""
        return self.gain.shape

    def rate(self, power_w: npt.ArrayLike, gain: npt.ArrayLike) -> FloatArray:
        """R = B·log2(1 + P h/σ²) [bit/s] (seed_002 §2.6)."""
        snr = (
            np.asarray(power_w, np.float64)
            * np.asarray(gain, np.float64)
            / self.noise_power_w
        )
        return self.bandwidth_hz * np.log1p(snr) / math.log(2.0)

    def delay_s(
        self, rows: Any, rate: npt.ArrayLike, sparsity: npt.ArrayLike = 1.0
    ) -> FloatArray:
        """d_i = c_i + (z_i s_i + z0_i)/R [s] (seed_002 §2.8) of the clients ``rows``.

        ``rows`` indexes the (U,) arrays: ids, or ``(ids, None)`` and
        ``(slice(None), None)`` to broadcast over the channels of ``rate``.
        """
        bits = self.bits_per_kept[rows] * sparsity + self.bits_fixed[rows]
        return self.fixed_delay_s[rows] + bits / rate  # type: ignore[no-any-return]  # numpy stubs: Any

    def budget(self) -> FloatArray:
        """E^max − E^cp per client, broadcast to (U,)."""
        return np.broadcast_to(self.energy_budget_j, (self.shape[0],))


@dataclass(frozen=True)
class Solution:
    """A schedule: rows (client indices) on cols (channels), with s and P."""

    rows: IntArray
    cols: IntArray
    sparsity: FloatArray
    power_w: FloatArray
    objective: float


def threshold_power_w(
    *, bits: float, gain: float, budget_j: float, problem: RoundProblem
) -> float:
    """Return min(P^max, P^th): the most power within the energy budget (eqs. 18-19).

    E^co(P) = P·bits/R(P) increases with P (eq. 17); P^th solves E^co = budget.

    Returns:
        The power in W, or 0.0 if even P → 0 exceeds the budget.
    """
    pmax = problem.max_power_w
    if not math.isfinite(budget_j):
        return pmax

    def excess(p: float) -> float:
        return p * bits / float(problem.rate(p, gain)) - budget_j

    if excess(pmax) <= 0:
        return pmax
    floor = bits * problem.noise_power_w * math.log(2.0) / (problem.bandwidth_hz * gain)
    if budget_j <= floor:
        return 0.0
    return float(brentq(excess, 1e-15, pmax, xtol=1e-15, rtol=1e-12))


def _sparsity_cap(
    problem: RoundProblem, rows: IntArray, power: FloatArray, rate: FloatArray
) -> FloatArray:
    """Largest energy-feasible s at the given power (≤ 1), per row (§4.4.2)."""
    budget = problem.budget()[rows]
    with np.errstate(divide="ignore", invalid="ignore"):
        cap = (budget * rate / np.maximum(power, 1e-300) - problem.bits_fixed[rows]) / (
            problem.bits_per_kept[rows]
        )
    cap = np.where(np.isfinite(budget), cap, 1.0)
    return np.where(power > 0, np.minimum(cap, 1.0), -np.inf)


def solve_sparsity(
    problem: RoundProblem, rows: IntArray, cols: IntArray, power_w: FloatArray
) -> tuple[FloatArray, float]:
    """Optimal s for a fixed assignment and power (Theorem 2, 1-D form of §4.4.2).

    Returns:
        (s per scheduled client, objective); (empty, inf) if infeasible.
    """
    if rows.size == 0:
        return np.zeros(0), 0.0
    rate = problem.rate(power_w, problem.gain[rows, cols])
    z, z0 = problem.bits_per_kept[rows], problem.bits_fixed[rows]
    c = problem.fixed_delay_s[rows]
    cap = _sparsity_cap(problem, rows, power_w, rate)
    s_min = problem.min_sparsity
    if np.any(cap < s_min) or np.any(rate <= 0):
        return np.zeros(0), math.inf
    base = c + z0 / rate
    d_low = float(np.max(base + z * s_min / rate))
    d_cap = base + z * cap / rate
    candidates = np.unique(np.append(d_cap[d_cap >= d_low], d_low))

    levels = np.clip((candidates[:, None] - base) * rate / z, s_min, cap)
    values = (
        np.sum(problem.client_cost[rows] - problem.sparsity_weight[rows] * levels, 1)
        + problem.delay_queue * candidates
    )
    best = float(values.min())
    tol = 1e-12 * max(1.0, abs(best))
    pick = int(np.flatnonzero(values <= best + tol)[-1])  # ties: the larger D
    s = levels[pick]
    return s, objective(problem, rows, cols, s, power_w)


def objective(
    problem: RoundProblem,
    rows: IntArray,
    cols: IntArray,
    sparsity: FloatArray,
    power_w: FloatArray,
) -> float:
    """J(a, s, P) of §4.4 (the drift-plus-penalty terms that depend on the round)."""
    if rows.size == 0:
        return 0.0
    rate = problem.rate(power_w, problem.gain[rows, cols])
    delay = problem.delay_s(rows, rate, sparsity)
    cost = problem.client_cost[rows] - problem.sparsity_weight[rows] * sparsity
    return float(np.sum(cost) + problem.delay_queue * np.max(delay))


def _match(
    cost: FloatArray, feasible: npt.NDArray[np.bool_]
) -> tuple[IntArray, IntArray] | None:
    """Min-cost matching of min(U, N) pairs over feasible edges, or None."""
    size = min(cost.shape)
    if size == 0:
        return None
    matrix = np.where(feasible, cost, _BIG)
    rows, cols = linear_sum_assignment(matrix)
    if rows.size < size or not np.all(feasible[rows, cols]):
        return None
    return rows.astype(np.int64), cols.astype(np.int64)


def _pruned_match(
    problem: RoundProblem, s_edge: FloatArray, tol: float = 1e-12
) -> tuple[IntArray, IntArray] | None:
    """Pruned Hungarian (P32, module detail 3) on the edge rates ``s_edge``."""
    feasible = s_edge >= problem.min_sparsity - tol
    kept = np.where(feasible, s_edge, 0.0)
    cost = problem.client_cost[:, None] - problem.sparsity_weight[:, None] * kept
    return _match(cost, feasible)


def _edge_sparsity(
    problem: RoundProblem, bottleneck_s: float, power: FloatArray
) -> FloatArray:
    """s_{i,j}(D) = min(cap, (D − c_i − z0/R)·R/z_i) for every edge (§4.4.3)."""
    rate = problem.rate(power, problem.gain)
    u = problem.shape[0]
    rows = np.arange(u)
    cap = np.stack(
        [
            _sparsity_cap(problem, rows, power[:, j], rate[:, j])
            for j in range(problem.shape[1])
        ],
        axis=1,
    )
    z = problem.bits_per_kept[:, None]
    base = problem.fixed_delay_s[:, None] + problem.bits_fixed[:, None] / rate
    with np.errstate(invalid="ignore", divide="ignore"):
        s = (bottleneck_s - base) * rate / z
    return np.minimum(s, cap)


def _edge_power(problem: RoundProblem) -> FloatArray:
    """Per-edge power min(P^max, P^th_{i,j}(s^th)) (module detail 4)."""
    u, n = problem.shape
    budget = problem.budget()
    power = np.full((u, n), problem.max_power_w)
    bits = problem.bits_per_kept * problem.min_sparsity + problem.bits_fixed
    for i in np.flatnonzero(np.isfinite(budget)):
        for j in range(n):
            power[i, j] = threshold_power_w(
                bits=float(bits[i]),
                gain=float(problem.gain[i, j]),
                budget_j=float(budget[i]),
                problem=problem,
            )
    return power


def solve_sweep(problem: RoundProblem) -> Solution | None:
    """Exact per-round optimum at P = P^max by the threshold sweep (§4.4.3)."""
    u, n = problem.shape
    power = np.full((u, n), problem.max_power_w)
    rate = problem.rate(power, problem.gain)
    z = problem.bits_per_kept[:, None]
    base = problem.fixed_delay_s[:, None] + problem.bits_fixed[:, None] / rate
    cap = _edge_sparsity(problem, math.inf, power)  # the cap itself
    candidates = np.unique(
        np.concatenate(
            [
                (base + z * problem.min_sparsity / rate).ravel(),
                (base + z * np.maximum(cap, problem.min_sparsity) / rate).ravel(),
            ]
        )
    )
    best: Solution | None = None
    for d in candidates[np.isfinite(candidates)]:
        s = _edge_sparsity(problem, float(d), power)
        feasible = s >= problem.min_sparsity - 1e-12
        cost = problem.client_cost[:, None] - problem.sparsity_weight[:, None] * s
        matched = _match(cost, feasible)
        if matched is None:
            continue
        rows, cols = matched
        sr = np.clip(s[rows, cols], problem.min_sparsity, 1.0)
        value = float(np.sum(cost[rows, cols])) + problem.delay_queue * float(d)
        if best is None or value < best.objective - 1e-12 * max(1.0, abs(value)):
            best = Solution(rows, cols, sr, power[rows, cols], value)
    if best is None:
        return None
    # Report J of the chosen (a, s): never above the sweep value (max delay ≤ D).
    value = objective(problem, best.rows, best.cols, best.sparsity, best.power_w)
    return Solution(best.rows, best.cols, best.sparsity, best.power_w, value)


def _min_max_match(delay: FloatArray, size: int) -> tuple[IntArray, IntArray] | None:
    """Min-max matching of ``size`` pairs (the bottleneck threshold), min-Σ ties."""
    if size == 0 or _matching_size(np.isfinite(delay)) < size:
        return None
    return _match(delay, delay <= bottleneck_threshold(delay, size))


def _matching_size(feasible: npt.NDArray[np.bool_]) -> int:
    matched = maximum_bipartite_matching(csr_matrix(feasible), perm_type="column")
    return int(np.count_nonzero(matched >= 0))


def _bottleneck_start(
    problem: RoundProblem, power: FloatArray
) -> tuple[IntArray, IntArray] | None:
    """The min-max dense-delay assignment (start of the second alternating run)."""
    delay = problem.delay_s(np.s_[:, None], problem.rate(power, problem.gain))
    return _min_max_match(delay, min(problem.shape))


def _alternate(
    problem: RoundProblem,
    start: tuple[IntArray, IntArray],
    edge_power: FloatArray,
    max_iterations: int,
) -> Solution | None:
    rows, cols = start
    power = edge_power[rows, cols].copy()
    best: Solution | None = None
    for _ in range(max_iterations):
        s, value = solve_sparsity(problem, rows, cols, power)  # sparsity block
        if not math.isfinite(value):
            break
        bits = problem.bits_per_kept[rows] * s + problem.bits_fixed[rows]
        power = np.array(  # power block: min(P^max, P^th(s)), eqs. 18-19
            [
                threshold_power_w(
                    bits=float(b),
                    gain=float(problem.gain[i, j]),
                    budget_j=float(problem.budget()[i]),
                    problem=problem,
                )
                for b, i, j in zip(bits, rows, cols, strict=True)
            ]
        )
        s, value = solve_sparsity(problem, rows, cols, power)
        if not math.isfinite(value):
            break
        current = Solution(rows, cols, s, power, value)
        if best is not None and value > best.objective - 1e-9 * max(
            1.0, abs(best.objective)
        ):
            break
        best = current
        # channel block: μ = Q^de·bottleneck (P31), pruned Hungarian (P32)
        rate = problem.rate(power, problem.gain[rows, cols])
        bottleneck = float(np.max(problem.delay_s(rows, rate, s)))
        edge_p = edge_power.copy()
        edge_p[rows, cols] = power
        d = bottleneck if problem.delay_queue > 0 else math.inf
        s_edge = _edge_sparsity(problem, d, edge_p)
        matched = _pruned_match(problem, s_edge)
        if matched is None:
            break
        rows, cols = _min_max_channels(problem, matched[0], edge_p, s_edge)
        power = edge_p[rows, cols]
    return best


def _min_max_channels(
    problem: RoundProblem, rows: IntArray, power: FloatArray, s_edge: FloatArray
) -> tuple[IntArray, IntArray]:
    """Re-assign the chosen clients' channels to minimise their max delay (P31).

    The P32 costs Q_i − λ p̂_i s_{i,j} tie whenever s_{i,j} is capped, so the
    matching alone may leave a slower channel permutation; μ is then lowered by
    a bottleneck assignment of the same clients at their edge rates.
    """
    s = np.clip(np.nan_to_num(s_edge[rows], nan=0.0), problem.min_sparsity, 1.0)
    rate = problem.rate(power[rows], problem.gain[rows])
    delay = problem.delay_s((rows, None), rate, s)
    matched = _min_max_match(delay, rows.size)
    if matched is None or matched[0].size < rows.size:
        return rows, np.arange(rows.size)
    return rows[matched[0]], matched[1]


def solve_alternating(
    problem: RoundProblem, *, max_iterations: int = 20, max_restarts: int = 12
) -> Solution | None:
    """Three-block alternating solver of Sec. V-B (module details 1-5).

    Returns:
        The best schedule found, or None if no feasible schedule exists.
    """
    edge_power = _edge_power(problem)
    cap = _edge_sparsity(problem, math.inf, edge_power)
    starts = []
    dense = _pruned_match(problem, cap, tol=0.0)
    if dense is not None:
        starts.append(dense)
    bottleneck = _bottleneck_start(problem, edge_power)
    if bottleneck is not None:
        starts.append(bottleneck)
    # Restarts of the epigraph level μ/Q^de at the breakpoints of the starts'
    # sparsity blocks (module detail 5): each is a pruned Hungarian (P32).
    large = problem.shape[0] * problem.shape[1] > _LARGE
    if large:  # big systems: the two starts only, few iterations (detail 6)
        max_restarts, max_iterations = 0, min(max_iterations, 4)
    if problem.delay_queue > 0 and max_restarts > 0:
        for rows, cols in list(starts):
            points = _breakpoints(problem, rows, cols, edge_power[rows, cols])
            if points.size > max_restarts:  # large N: evenly spaced subset
                points = points[
                    np.linspace(0, points.size - 1, max_restarts).astype(int)
                ]
            for d in points:
                matched = _pruned_match(problem, _edge_sparsity(problem, d, edge_power))
                if matched is not None:
                    starts.append(matched)
    best: Solution | None = None
    for rows, _cols in list(starts) if not large else []:  # min-max channels
        starts.append(_min_max_channels(problem, rows, edge_power, cap))
    for start in starts:
        found = _alternate(problem, start, edge_power, max_iterations)
        if found is not None and (best is None or found.objective < best.objective):
            best = found
    return best


def _breakpoints(
    problem: RoundProblem, rows: IntArray, cols: IntArray, power: FloatArray
) -> FloatArray:
    """D_low and the d_i(cap) of one assignment: where J(D) may bend (§4.4.2)."""
    rate = problem.rate(power, problem.gain[rows, cols])
    base = problem.fixed_delay_s[rows] + problem.bits_fixed[rows] / rate
    z = problem.bits_per_kept[rows]
    cap = _sparsity_cap(problem, rows, power, rate)
    d_low = float(np.max(base + z * problem.min_sparsity / rate))
    d_cap = base + z * cap / rate
    return np.unique(np.append(d_cap[d_cap >= d_low], d_low))
