"""DP-SparFL's Lyapunov drift-plus-penalty scheduler (Wei et al. 2023, Sec. V).

Each round the policy updates two kinds of virtual queues (the paper's Sec. IV)

- fairness, per available client: Q_i ← [Q_i + 1_i^{t−1} − β_i]^+ (as printed),
  or Q_i ← [Q_i + β_i − 1_i^{t−1}]^+ with cost −Q_i (``fairness_queue=
  "lower_bound"``: the printed queue enforces participation ≤ β_i, while the
  paper's constraint C7 asks ≥ β_i);
- delay: Q^de ← [Q^de + d^{t−1} − d^Avg]^+ (seconds),

then minimises the drift-plus-penalty objective of the round (eq. 14, §4.4)
J = Σ_{scheduled} (Q_i − V p̂_i s_i) + Q^de·max d_i over the channel assignment,
the sparsification rates s_i (sent to the clients as the control ``sparsity``)
and the powers (sent as the env's power level), with
:mod:`policies.lyapunov_solver` (alternating three-block solver, or the exact
sweep).

| paper symbol | code name |
|--------------|-----------|
| λ (Neely's V) | ``V`` |
| Q_i^fa, Q^de | ``fairness_queue_values``, ``delay_queue_value`` |
| β_i (eq. 12) | ``beta`` (the engine's accountant, through the run context) |
| d^Avg | ``d_avg_s`` |
| s^th | ``min_sparsity`` |
| p̂_i (§4.4, [AMBIG-15]) | ``abs(D_i)/(N_sel·mean abs(D))`` |
| z_i, z0 ([AMBIG-6]) | ``payload_mode`` |
| E^max | ``energy_max_j`` |

Implementation details:
    1. The queues are updated with the policy's own model of the previous round's
       delay d^{t−1} (the env does not return the realised latency to the
       policy); the realised one differs only by the downlink fading, which the
       policy does not observe (estimated by the mean uplink gain, as
       ``delay_min`` does).
    2. [AMBIG-11] ``d_avg_s=None`` calibrates d^Avg on the first observation:
       ``d_avg_factor`` × the mean dense (s = 1) round delay of 200 random
       schedules of the eligible clients.
    3. Run constants come from the :class:`rayfl.observation.SystemContext`
       (``context=``): abs(w), the link and CPU constants, τ·abs(b) and β_i (T̂_i
       of the ledger's accountant, eq. 12), each only where the parameter was
       left at its default; without β_i from either, β_i = min(1, N/abs(Û)).
       On the hierarchy each edge's link is ``topology.cost``'s (no downlink,
       no compute term).
    4. Powers are quantised down to the env's L levels P^max·(l+1)/L.
    5. Clients outside Û keep their queue values frozen.
    6. Large systems only (more than ``max_candidates`` available clients, never
       at the paper's U = 20): the solver sees the union over channels of the
       N clients with the largest λp̂_i − Q_i and the N with the smallest dense
       delay on that channel — a heuristic prefilter, not part of the paper.
    7. Without a ``controls`` part in the action (the hierarchy; the star
       without ``scheduler.controls``), or when the run's controls
       (``context.control_names``) have no ``sparsity`` column (FedAvg's are
       ``lr`` only: the policy then sends no controls, so the lr stays the
       run's), the policy cannot send s: every upload
       keeps the run's sparsity (``fixed_sparsity``, from the context: the
       algorithm's ``sparsity`` or ``compression.sparsify_fraction``; 1 =
       dense), and the problem is solved with s pinned there (payload z·s,
       penalty term V·p̂·s), scheduling and power only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal, cast

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from policies.base import (
    Action,
    Count,
    Fraction,
    NonNegative,
    Observation,
    Policy,
    Positive,
    context_constants,
    run_constants,
)
from policies.lyapunov_params import DEFAULTS, check_choices
from policies.lyapunov_solver import (
    RoundProblem,
    Solution,
    solve_alternating,
    solve_sweep,
)
from rayfl.observation import SystemContext

__all__ = ["LyapunovPolicy"]


def _dbm_to_w(dbm: float) -> float:
    return float(10.0 ** ((dbm - 30.0) / 10.0))


def _run_values(context: SystemContext) -> dict[str, Any]:
    """The run constants ``context`` supplies (absent: the run does not say)."""
    values = context_constants(context)
    if context.privacy.participation_target is not None:
        values["beta"] = context.privacy.participation_target
    if context.training.sparsity is not None:
        values["fixed_sparsity"] = context.training.sparsity
    return values


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


class LyapunovPolicy(Policy):
    """Drift-plus-penalty scheduling with sparsification control (the DP-SparFL paper).

    Args:
        observation_space: The env's observation space.
        action_space: The env's action space (``controls`` needed to set s).
        V: Penalty weight λ > 0 (paper: 50).
        min_sparsity: s^th in (0, 1].
        d_avg_s: d^Avg in s; None = calibrated (detail 2).
        d_avg_factor: Calibration factor (spec §5.5: 0.6).
        fairness_queue: "as_printed" (the paper's queue, which bounds
            participation from above) or "lower_bound" (participation ≥ β_i, as
            its constraint C7 states).
        solver: "alternating" (paper) or "sweep" (exact at P^max).
        payload_mode: "sec2" (z = 32·abs(w), z0 = abs(w)) or "paper_sec5".
        model_dim: abs(w). This and the other run constants below (None:
            the run's, from ``context``, else ``policies.lyapunov_params.DEFAULTS``,
            e.g. the paper's FMNIST CNN for abs(w), §5.2) are resolved by
            :meth:`apply_context`.
        max_candidates: With more available clients than this, keep only the
            union over channels of the ``num_subchannels`` best clients by
            penalty weight and by dense delay (detail 6); None = never.
        bandwidth_hz: B per channel.
        noise_psd_dbm_hz: N0 (σ² = N0·B).
        tx_power_dbm: P^max.
        downlink_power_dbm: AP power; None = no downlink term.
        cycles_per_sample: Φ.
        cpu_freq_hz: f (the policy does not observe f_i^t).
        compute_samples: Samples per round in d^lo (τ·abs(b) or τ·abs(D_i));
            None = τ·abs(D_i) with τ = 0, i.e. no compute term.
        energy_max_j: E^max; None = C6 inactive.
        effective_capacitance: χ.
        control_index: Column of ``sparsity`` in the controls table, when the
            context does not name the columns (it does in a run: detail 7).
        fixed_sparsity: s when the action has no ``controls`` part (a run
            constant: the run's sparsity).
        beta: β_i per client (eq. 12); None: from the context, else
            min(1, N/abs(Û)).
        context: The run context; run constants not passed are taken from it
            (:meth:`apply_context`).
    """

    topologies: ClassVar[frozenset[str]] = frozenset({"star", "hierarchical"})
    optional_parts: ClassVar[frozenset[str]] = frozenset({"power", "controls"})

    required_keys: ClassVar[tuple[str, ...]] = ("channel_gain", "eligible", "data_size")
    #: λ (Neely's V), the paper's control of the drift-plus-penalty trade-off:
    #: any V > 0 (0 itself is refused by the constructor, so the range, whose
    #: limits the self-tuning may try, starts at 1e-3).
    tunable: ClassVar[Mapping[str, tuple[float, float, float]]] = {
        "V": (50.0, 1e-3, float("inf"))
    }

    def __init__(
        self,
        observation_space: spaces.Space[Any],
        action_space: spaces.Space[Any],
        *,
        V: Positive = 50.0,
        min_sparsity: Fraction = 0.1,
        d_avg_s: Positive | None = None,
        d_avg_factor: Positive = 0.6,
        fairness_queue: Literal["as_printed", "lower_bound"] = "as_printed",
        solver: Literal["alternating", "sweep"] = "alternating",
        payload_mode: Literal["sec2", "paper_sec5"] = "sec2",
        model_dim: Count | None = None,
        bandwidth_hz: Positive | None = None,
        noise_psd_dbm_hz: float | None = None,
        tx_power_dbm: float | None = None,
        downlink_power_dbm: float | None = None,
        cycles_per_sample: NonNegative | None = None,
        cpu_freq_hz: Positive | None = None,
        compute_samples: NonNegative | None = None,
        energy_max_j: Positive | None = None,
        effective_capacitance: NonNegative | None = None,
        control_index: int = 0,
        beta: list[float] | None = None,
        max_candidates: Count | None = 100,
        fixed_sparsity: Fraction | None = None,
        context: SystemContext | None = None,
    ) -> None:
        check_choices(V, min_sparsity, fairness_queue, solver, payload_mode)
        self.V = float(V)
        self.min_sparsity = float(min_sparsity)
        self.d_avg_param = d_avg_s
        self.d_avg_factor = float(d_avg_factor)
        self.fairness_queue = fairness_queue
        self.solver = solver
        self.payload_mode = payload_mode
        self.energy_max_j = energy_max_j
        self.control_index = int(control_index)
        self.max_candidates = max_candidates
        # the run constants passed (None: the run's, else DEFAULTS)
        self._given = {
            "model_dim": model_dim,
            "bandwidth_hz": bandwidth_hz,
            "noise_psd_dbm_hz": noise_psd_dbm_hz,
            "tx_power_dbm": tx_power_dbm,
            "downlink_power_dbm": downlink_power_dbm,
            "cycles_per_sample": cycles_per_sample,
            "cpu_freq_hz": cpu_freq_hz,
            "compute_samples": compute_samples,
            "effective_capacitance": effective_capacitance,
            "beta": beta,
            "fixed_sparsity": fixed_sparsity,
        }
        self.apply_context(context)
        check_choices(fixed_sparsity=self.fixed_sparsity)
        super().__init__(observation_space, action_space, context=context)
        #: False when the action has no ``controls``: s is then not the policy's
        #: to choose, and the problem is solved at s = ``fixed_sparsity``.
        self.sends_sparsity = isinstance(action_space, spaces.Dict) and (
            "controls" in action_space.spaces
        )
        names = tuple(getattr(context, "control_names", ()) or ())
        if self.sends_sparsity and names:  # the run names its controls (detail 7)
            if "sparsity" in names:
                self.control_index = names.index("sparsity")
            else:  # e.g. FedAvg's lr only: s is not the policy's to send
                self.sends_sparsity = False
        if self.beta_param is not None and self.beta_param.shape != (self.num_clients,):
            raise ValueError(f"beta must have {self.num_clients} entries")

    # ------------------------------------------------------------ run context
    def apply_context(self, context: SystemContext | None) -> None:
        """Resolve the run constants (module detail 3): passed > the run's > DEFAULTS.

        From ``context``: ``model_dim`` (abs(w)); from ``context.link``,
        ``bandwidth_hz``, ``noise_psd_dbm_hz``, ``tx_power_dbm``,
        ``downlink_power_dbm`` (the BS power when the round time includes the
        downlink, else None), ``cycles_per_sample``, ``cpu_freq_hz``,
        ``effective_capacitance``; ``compute_samples`` = τ·abs(b) and
        ``fixed_sparsity`` from ``context.training``; ``beta`` from
        ``context.privacy``.

        Args:
            context: The run context; None = only the passed values and DEFAULTS.
        """
        run = {} if context is None else _run_values(context)
        v = run_constants(self._given, run, DEFAULTS)
        self.model_dim = int(v["model_dim"])
        self.bandwidth_hz = float(v["bandwidth_hz"])
        self.noise_psd_dbm_hz = float(v["noise_psd_dbm_hz"])
        self.tx_power_dbm = float(v["tx_power_dbm"])
        self.downlink_power_dbm: float | None = _float_or_none(v["downlink_power_dbm"])
        self.cycles_per_sample = float(v["cycles_per_sample"])
        self.cpu_freq_hz = float(v["cpu_freq_hz"])
        self.compute_samples: float | None = _float_or_none(v["compute_samples"])
        self.effective_capacitance = float(v["effective_capacitance"])
        self.fixed_sparsity = float(v["fixed_sparsity"])
        beta = v["beta"]
        self.beta_param = None if beta is None else np.asarray(beta, np.float64)

    def reset(self, seed: int | None = None) -> None:
        """Zero the queues, forget the calibration and the last decision."""
        super().reset(seed)
        n = getattr(self, "num_clients", 0)
        self.fairness_queue_values = np.zeros(n)
        self.delay_queue_value = 0.0
        self.d_avg_s = self.d_avg_param
        self.beta: npt.NDArray[np.float64] | None = None
        self._last: (
            tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_], float] | None
        ) = None
        self._solution: Solution | None = None

    # ------------------------------------------------------------ model
    def _noise_power_w(self) -> float:
        return _dbm_to_w(self.noise_psd_dbm_hz) * self.bandwidth_hz

    def _fixed_delay_s(self, gain: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """c_i = d^do + d^lo (seed_002 §2.6-2.8), shape (N,)."""
        dim = self.model_dim
        fixed = np.zeros(self.num_clients)
        if self.downlink_power_dbm is not None:
            snr = _dbm_to_w(self.downlink_power_dbm) * gain.mean(axis=1)
            rate = self.bandwidth_hz * np.log2(1.0 + snr / self._noise_power_w())
            fixed += 32.0 * dim / rate
        samples = 0.0 if self.compute_samples is None else self.compute_samples
        fixed += samples * self.cycles_per_sample / self.cpu_freq_hz
        return fixed

    def problem(self, obs: Observation) -> tuple[RoundProblem, npt.NDArray[np.int64]]:
        """Return this round's problem over the eligible clients and their ids."""
        eligible = np.flatnonzero(self.eligible_mask(obs))
        gain = np.power(10.0, self.field(obs, "channel_gain") / 10.0)
        size = self.field(obs, "data_size")
        n_sel = max(1, min(self.num_subchannels, eligible.size))
        mean_size = float(size[eligible].mean()) if eligible.size else 1.0
        p_hat = size / (n_sel * mean_size)
        dim = float(self.model_dim)
        if self.payload_mode == "sec2":
            z, z0 = (
                np.full(self.num_clients, 32.0 * dim),
                np.full(self.num_clients, dim),
            )
        else:
            z, z0 = 32.0 * dim * p_hat, np.zeros(self.num_clients)
        sign = 1.0 if self.fairness_queue == "as_printed" else -1.0
        s_min, s_fixed = self.min_sparsity, 1.0
        if not self.sends_sparsity:  # every upload keeps the run's s: pin it
            s_min, s_fixed = 1.0, self.fixed_sparsity
            z = z * s_fixed  # bits at s = 1 of the pinned problem = bits at s_fixed
        budget = np.full(self.num_clients, np.inf)
        if self.energy_max_j is not None:
            samples = 0.0 if self.compute_samples is None else self.compute_samples
            compute_j = (
                self.effective_capacitance
                * samples
                * self.cycles_per_sample
                * self.cpu_freq_hz**2
                / 2.0
            )
            budget = np.full(self.num_clients, self.energy_max_j - compute_j)
        fixed = self._fixed_delay_s(gain)
        e = eligible
        if self.max_candidates is not None and e.size > self.max_candidates:
            e = self._prefilter(e, gain, fixed, z, z0, p_hat, sign)
        return (
            RoundProblem(
                client_cost=sign * self.fairness_queue_values[e],
                sparsity_weight=self.V * p_hat[e] * s_fixed,
                delay_queue=self.delay_queue_value,
                fixed_delay_s=fixed[e],
                bits_per_kept=z[e],
                bits_fixed=z0[e],
                gain=gain[e],
                noise_power_w=self._noise_power_w(),
                bandwidth_hz=self.bandwidth_hz,
                max_power_w=_dbm_to_w(self.tx_power_dbm),
                min_sparsity=s_min,
                energy_budget_j=budget[e],
            ),
            e,
        )

    def _prefilter(
        self,
        eligible: npt.NDArray[np.int64],
        gain: npt.NDArray[np.float64],
        fixed: npt.NDArray[np.float64],
        z: npt.NDArray[np.float64],
        z0: npt.NDArray[np.float64],
        p_hat: npt.NDArray[np.float64],
        sign: float,
    ) -> npt.NDArray[np.int64]:
        """Candidate clients of a large system (module detail 6)."""
        k = self.num_subchannels
        score = self.V * p_hat - sign * self.fairness_queue_values
        keep = set(eligible[np.argsort(-score[eligible], kind="stable")[:k]].tolist())
        snr = _dbm_to_w(self.tx_power_dbm) * gain[eligible] / self._noise_power_w()
        rate = self.bandwidth_hz * np.log2(1.0 + snr)
        dense = fixed[eligible, None] + (z[eligible, None] + z0[eligible, None]) / rate
        for j in range(k):
            keep.update(eligible[np.argsort(dense[:, j], kind="stable")[:k]].tolist())
        return np.array(sorted(keep), dtype=np.int64)

    def round_delay_s(self, problem: RoundProblem, solution: Solution) -> float:
        """d^t = max over scheduled clients of d^do + d^lo + d^up (§2.8)."""
        rate = problem.rate(
            solution.power_w, problem.gain[solution.rows, solution.cols]
        )
        return float(np.max(problem.delay_s(solution.rows, rate, solution.sparsity)))

    # ------------------------------------------------------------ queues
    def update_queues(
        self,
        scheduled: npt.NDArray[np.bool_],
        available: npt.NDArray[np.bool_],
        delay_s: float,
    ) -> None:
        """Apply the virtual-queue updates of Sec. V-B for one finished round."""
        beta = self.beta if self.beta is not None else np.zeros(self.num_clients)
        served = scheduled.astype(np.float64)
        if self.fairness_queue == "as_printed":
            new = np.maximum(self.fairness_queue_values + served - beta, 0.0)
        else:
            new = np.maximum(self.fairness_queue_values + beta - served, 0.0)
        self.fairness_queue_values = np.where(
            available, new, self.fairness_queue_values
        )
        assert self.d_avg_s is not None
        self.delay_queue_value = max(
            self.delay_queue_value + delay_s - self.d_avg_s, 0.0
        )

    def _calibrate(self, problem: RoundProblem) -> float:
        """d^Avg = factor × mean dense delay of 200 random schedules (detail 2)."""
        u, n = problem.shape
        k = min(u, n)
        rate = problem.rate(problem.max_power_w, problem.gain)
        dense = problem.delay_s(np.s_[:, None], rate)
        total = 0.0
        for _ in range(200):
            rows = self.np_random.choice(u, size=k, replace=False)
            cols = self.np_random.permutation(n)[:k]
            total += float(np.max(dense[rows, cols]))
        return self.d_avg_factor * total / 200

    # ------------------------------------------------------------ decision
    def schedule(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Update the queues with the last round, then solve this round."""
        available = self.eligible_mask(obs)
        if self.beta is None:
            self.beta = (
                self.beta_param
                if self.beta_param is not None
                else np.full(
                    self.num_clients,
                    min(1.0, self.num_subchannels / max(1, available.sum())),
                )
            )
        if self._last is not None:
            self.update_queues(*self._last)
        problem, ids = self.problem(obs)
        assignment = np.full(self.num_subchannels, self.num_clients, dtype=np.int64)
        self._solution = None
        if ids.size == 0:
            self._last = None
            return assignment
        if self.d_avg_s is None:
            self.d_avg_s = self._calibrate(problem)
        solve = solve_alternating if self.solver == "alternating" else solve_sweep
        solution = solve(problem)
        if solution is None:  # no feasible schedule: idle round
            self._last = None
            return assignment
        self._solution = solution
        assignment[solution.cols] = ids[solution.rows]
        scheduled = np.zeros(self.num_clients, dtype=bool)
        scheduled[ids[solution.rows]] = True
        self._last = (scheduled, available, self.round_delay_s(problem, solution))
        self._ids = ids
        return assignment

    def to_action(self, assignment: npt.ArrayLike) -> Action:
        """Add the chosen sparsity (controls) and power level to the action."""
        action = super().to_action(assignment)
        if not isinstance(action, dict):
            return action
        space = cast(spaces.Dict, self.action_space)
        sol, ids = self._solution, getattr(self, "_ids", None)
        if self.sends_sparsity:  # s = 1 for everyone not scheduled
            box = cast(spaces.Box, space["controls"])
            table = np.ones(box.shape, dtype=box.dtype)
            if sol is not None and ids is not None:
                table[ids[sol.rows], self.control_index] = sol.sparsity
            action["controls"] = table
        if sol is None or ids is None:
            return action
        if self.num_power_levels is not None:
            levels = np.full(self.num_subchannels, self.num_power_levels - 1)
            pmax = _dbm_to_w(self.tx_power_dbm)
            chosen = np.floor(sol.power_w / pmax * self.num_power_levels + 1e-9) - 1
            levels[sol.cols] = np.clip(chosen, 0, self.num_power_levels - 1)
            action["power"] = levels.astype(space["power"].dtype)
        return action
