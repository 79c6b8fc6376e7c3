"""Deadline-aware max-weight: predict each channel, schedule the stalest that make it.

The predictive baseline of issue 48's moving world. Each round it predicts
client n's gain on subchannel k from the gain last seen and its age, predicts
whether the upload meets the round deadline D (computation plus airtime), and
solves the max-weight assignment with weight (staleness + 1) on the pairs
predicted to make it. A subchannel no feasible client can use stays idle. In a
static world (no ``channel_age``, no ``compute_time_s``, no deadline) it is
max-weight on staleness with best-channel matching.

Symbol table:

| symbol | meaning | code |
|---|---|---|
| g_{n,k} | last-seen linear gain (from ``channel_gain`` [dB]) | ``seen`` |
| a_n | rounds since row n was measured | ``obs["channel_age"]`` (0 if absent) |
| ḡ_n | client n's mean large-scale gain | ``self.mean_gain`` |
| ρ | lag-1 correlation of the complex fading | ``rho`` |
| K_R | Rician K-factor (linear; 0: Rayleigh) | ``rician_k`` |
| c(a) | shrinkage weight of the seen gain | :func:`shrinkage` |
| ĝ_{n,k} | predicted gain c·g + (1 − c)·ḡ_n | :func:`predict_gain` |
| d^lo_n | local training time | ``obs["compute_time_s"]`` (0 if absent) |
| Z, B, N0, P | upload bits, bandwidth, noise PSD, transmit power | ``payload_bits``, ... |
| D | round deadline | ``round_deadline_s`` |
| s_n | rounds since client n's last delivery | ``obs["staleness"]`` |

Implementation details:
    1. The fading model (:mod:`rayfl.wireless.world`, detail 1): the power gain
       is ḡ·abs(μ + σ·h_t)² with μ = sqrt(K_R/(K_R+1)), σ = sqrt(1/(K_R+1)) (the
       line of sight fixed) and h_t = ρ·h_{t−1} + sqrt(1 − ρ²)·w_t, h_0 ~ CN(0, 1).
       Iterating, h_{t+a} = ρ^a·h_t + sqrt(1 − ρ^{2a})·w with w ~ CN(0, 1)
       independent of h_t. Let x = μ + σ·h_t (seen, so g = ḡ·abs(x)²).
    2. Rayleigh (K_R = 0, μ = 0): E[abs(h_{t+a})² | h_t] = ρ^{2a}·abs(h_t)² +
       (1 − ρ^{2a}), so E[g_{t+a} | g_t] = ρ^{2a}·g_t + (1 − ρ^{2a})·ḡ exactly
       (the conditional mean, issue 48's one-step predictor iterated a rounds).
    3. Rician: E[abs(μ + σh_{t+a})² | h_t] = abs(μ + σρ^a h_t)² + σ²(1 − ρ^{2a})
       depends on Re h_t, not on abs(x)² alone, so the rule of detail 2 is not
       the conditional mean. The policy uses the best *linear* predictor of
       g_{t+a} from g_t instead: with X = Re h ~ N(0, 1/2) and abs(x)² = μ² +
       2μσX + σ²abs(h)², Cov(abs(x_{t+a})², abs(x_t)²) = 2μ²σ²ρ^a + σ⁴ρ^{2a}
       and Var(abs(x)²) = 2μ²σ² + σ⁴ (the odd moments vanish), so
       c(a) = (2K_R·ρ^a + ρ^{2a}) / (2K_R + 1), which is ρ^{2a} at K_R = 0.
       ĝ = c(a)·g_seen + (1 − c(a))·ḡ_n. Age 0 gives c = 1: the seen gain.
    4. ḡ_n: the running mean of the linear gains of client n's fresh rows
       (age 0), over its K subchannels and the rounds seen so far (fading has
       unit mean); before its first fresh row, the mean of the row seen. With
       mobility the large-scale gain drifts, which this mean follows slowly.
       The state lives in the policy (:meth:`reset` clears it); a resumed run
       starts it afresh.
    5. The deadline test is the engine's: d^lo + Z/(B·log2(1 + P·ĝ/(N0·B))) ≤ D
       (an upload ending at D arrives, as :func:`rayfl.wireless.compute.deadline_misses`
       says). The airtime is the run's own model, ``context.link.airtime_model``
       (:func:`rayfl.wireless.cost.uplink_airtime_s`, the chain of the engine's
       uplink: policies reach ``rayfl`` only through the observation and the
       registry), at the predicted mean gain (an optimistic plug-in: the rate
       is concave in the gain). The broadcast time of ``downlink_latency`` is
       not counted (the downlink gain is not observed).
    6. Max-weight: w_{n,k} = (s_n + 1)·1[predicted to meet D], eligible clients
       only; the Hungarian method (:func:`policies.assignment.assign_subchannels`)
       maximises Σ (K + 1)·w + r, where r in [0, 1) ranks ĝ in dB over the
       feasible pairs: with integer staleness the weight decides first, the
       predicted gain breaks ties (best-channel matching). An infeasible pair
       scores 0, so the matching's feasible part is a max-weight feasible
       matching; the infeasible pairs the matcher still fills are dropped, so
       a subchannel no feasible client can use idles
       (``allows_idle`` is True only when a deadline is set).
    7. Constants (:func:`policies.base.run_constants`): the value passed, else
       the run's (``context.link``: ``round_deadline_s``, ``fading_rho``,
       ``rician_k``, ``upload_bits`` (else 32·abs(w)), B, N0, P), else the
       defaults (no deadline, ρ = 0, K_R = 0, ``wireless``'s B, N0, P). A
       deadline without a known upload size or airtime model is refused. Before the model is
       built (:func:`rayfl.star.context.config_context`) the run's abs(w) is
       1: pass ``payload_bits`` there (the surrogate benchmark gives the
       surrogate's model size and upload bits, :func:`rayfl.star.bench.bench_policy`).
    8. In the star as built, an eligible client is reachable and a reachable
       client's row is measured in the round it uploads (age 0), so the
       prediction only moves rows of clients that cannot be scheduled: the
       deadline test is then exact (no straggler is sent). The predictor
       matters where an observed row is older than the upload (a feedback
       delay), which the engine does not model yet.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import numpy as np
import numpy.typing as npt
from annotated_types import Ge, Le
from gymnasium import spaces

from policies.base import (
    NonNegative,
    Observation,
    Policy,
    Positive,
    context_constants,
    run_constants,
)
from rayfl.observation import SystemContext

__all__ = ["DeadlineMaxWeightPolicy", "predict_gain", "shrinkage"]

Correlation = Annotated[float, Ge(-1), Le(1)]
FloatArray = npt.NDArray[np.float64]

#: Where neither the user nor the run says (``wireless``'s defaults for the link).
DEFAULTS: dict[str, Any] = {
    "round_deadline_s": None,
    "rho": 0.0,
    "rician_k": 0.0,
    "payload_bits": None,
    "bandwidth_hz": 1e6,
    "noise_psd_dbm_hz": -169.0,
    "tx_power_dbm": 23.0,
}


def shrinkage(age: npt.ArrayLike, rho: float, rician_k: float = 0.0) -> FloatArray:
    """Return c(a) = (2K·ρ^a + ρ^{2a}) / (2K + 1), the weight of a gain seen a rounds ago.

    Detail 3: the linear predictor's weight; ρ^{2a} for Rayleigh (K = 0).

    Example:
        >>> shrinkage([0, 1, 2], 0.5).tolist()
        [1.0, 0.25, 0.0625]
    """
    a = np.rint(np.asarray(age, dtype=np.float64))
    lag = np.power(float(rho), a)
    return np.asarray((2.0 * rician_k * lag + lag**2) / (2.0 * rician_k + 1.0))


def predict_gain(
    seen: npt.ArrayLike,
    age: npt.ArrayLike,
    mean: npt.ArrayLike,
    *,
    rho: float,
    rician_k: float = 0.0,
) -> FloatArray:
    """Return ĝ = c(a)·g_seen + (1 − c(a))·ḡ, linear gains (detail 3).

    Args:
        seen: (N, K) last-seen linear gains.
        age: (N,) rounds since each row was seen.
        mean: (N,) each client's mean large-scale gain ḡ_n.
        rho: ρ, the fading's lag-1 correlation.
        rician_k: Linear Rician K-factor (0: Rayleigh).

    Example:
        >>> predict_gain([[4.0]], [1], [2.0], rho=0.5).tolist()
        [[2.5]]
    """
    c = shrinkage(age, rho, rician_k)[:, None]
    seen_gain = np.asarray(seen, dtype=np.float64)
    prior = np.asarray(mean, dtype=np.float64)[:, None]
    return np.asarray(c * seen_gain + (1.0 - c) * prior)


class DeadlineMaxWeightPolicy(Policy):
    """Max-weight on staleness over the pairs predicted to meet the round deadline.

    Args:
        observation_space: The unit's observation space (``staleness``; reads
            ``channel_age`` and ``compute_time_s`` when present).
        action_space: The unit's action space.
        round_deadline_s: D [s]; None: the run's, else no deadline.
        rho: ρ of the fading; None: the run's, else 0 (i.i.d.).
        rician_k: Linear Rician K-factor; None: the run's, else 0 (Rayleigh).
        payload_bits: Z, bits of one upload; None: the run's, else 32·abs(w).
        bandwidth_hz: B [Hz]; None: the run's, else 1 MHz.
        noise_psd_dbm_hz: N0 [dBm/Hz]; None: the run's, else −169.
        tx_power_dbm: P [dBm]; None: the run's, else 23.
        context: The run context (module docstring, detail 7).

    Example:
        >>> from gymnasium import spaces
        >>> from rayfl.observation import LinkConstants
        >>> from rayfl.wireless.cost import uplink_airtime_s
        >>> box = spaces.Box(0, np.inf, (3,))
        >>> obs_space = spaces.Dict({
        ...     "channel_gain": spaces.Box(-np.inf, np.inf, (3, 1)),
        ...     "eligible": spaces.Box(0, 1, (3,)), "staleness": box,
        ...     "compute_time_s": box})
        >>> link = LinkConstants(1e6, -169.0, 23.0, round_deadline_s=1.0,
        ...     upload_bits=1e3, airtime_model=uplink_airtime_s)
        >>> context = SystemContext("star", seed=0, rounds=1, model_dim=1, link=link)
        >>> policy = DeadlineMaxWeightPolicy(
        ...     obs_space, spaces.MultiDiscrete([4]), context=context)
        >>> obs = {"channel_gain": np.full((3, 1), -60.0), "eligible": np.ones(3),
        ...        "staleness": np.array([9.0, 4.0, 1.0]),
        ...        "compute_time_s": np.array([2.0, 0.1, 0.1])}
        >>> policy(obs).tolist()  # client 0 is stalest but computes past D
        [1]
    """

    topologies: ClassVar[frozenset[str]] = frozenset({"star", "hierarchical"})

    required_keys: ClassVar[tuple[str, ...]] = ("channel_gain", "eligible", "staleness")

    def __init__(
        self,
        observation_space: spaces.Space[Any],
        action_space: spaces.Space[Any],
        *,
        round_deadline_s: Positive | None = None,
        rho: Correlation | None = None,
        rician_k: NonNegative | None = None,
        payload_bits: Positive | None = None,
        bandwidth_hz: Positive | None = None,
        noise_psd_dbm_hz: float | None = None,
        tx_power_dbm: float | None = None,
        context: SystemContext | None = None,
    ) -> None:
        given = {
            "round_deadline_s": round_deadline_s,
            "rho": rho,
            "rician_k": rician_k,
            "payload_bits": payload_bits,
            "bandwidth_hz": bandwidth_hz,
            "noise_psd_dbm_hz": noise_psd_dbm_hz,
            "tx_power_dbm": tx_power_dbm,
        }
        values = run_constants(given, _run_values(context), DEFAULTS)
        link = None if context is None else context.link
        #: The run's airtime d^up(g, ...) (detail 5); None without a context.
        self.airtime_model = None if link is None else link.airtime_model
        _check(values, self.airtime_model)
        self.round_deadline_s: float | None = values["round_deadline_s"]
        self.rho = float(values["rho"])
        self.rician_k = float(values["rician_k"])
        self.payload_bits: float | None = values["payload_bits"]
        self.link_constants = {
            name: float(values[name])
            for name in ("bandwidth_hz", "noise_psd_dbm_hz", "tx_power_dbm")
        }
        #: Idles a subchannel only when a deadline can rule clients out.
        self.allows_idle = self.round_deadline_s is not None
        super().__init__(observation_space, action_space, context=context)

    def reset(self, seed: int | None = None) -> None:
        """Seed the generator and forget the gains seen (detail 4)."""
        super().reset(seed)
        self.gain_sum = np.zeros(self.num_clients)
        self.gain_count = np.zeros(self.num_clients)

    def predicted_gain(self, obs: Observation) -> FloatArray:
        """Return ĝ (N, K), linear, updating ḡ with this round's fresh rows."""
        seen = np.power(10.0, self.field(obs, "channel_gain") / 10.0)
        age = self._optional(obs, "channel_age")
        fresh = age <= 0
        self.gain_sum[fresh] += seen[fresh].mean(axis=1)
        self.gain_count[fresh] += 1
        counted = self.gain_count > 0
        mean = np.where(
            counted,
            self.gain_sum / np.maximum(self.gain_count, 1),
            seen.mean(axis=1),
        )
        return predict_gain(seen, age, mean, rho=self.rho, rician_k=self.rician_k)

    def feasible(self, obs: Observation, gain: FloatArray) -> npt.NDArray[np.bool_]:
        """Return (N, K): the upload on k at gain ĝ is predicted to meet D (detail 5)."""
        if self.round_deadline_s is None or self.airtime_model is None:
            return np.ones(gain.shape, dtype=bool)
        airtime = np.asarray(
            self.airtime_model(
                gain, payload_bits=self.payload_bits, **self.link_constants
            ),
            dtype=np.float64,
        )
        compute = self._optional(obs, "compute_time_s")[:, None]
        return np.asarray(compute + airtime <= self.round_deadline_s)

    def schedule(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Max-weight assignment over eligible, feasible pairs (detail 6)."""
        gain = self.predicted_gain(obs)
        feasible = self.feasible(obs, gain) & self.eligible_mask(obs)[:, None]
        weight = (self.field(obs, "staleness") + 1.0)[:, None] * feasible
        clients = np.flatnonzero(feasible.any(axis=1))
        if clients.size == 0:
            return np.full(self.num_subchannels, self.num_clients, dtype=np.int64)
        rank = _rank(gain, feasible)
        score = np.where(feasible, (self.num_subchannels + 1.0) * weight + rank, 0.0)
        assignment = self.assign_subchannels(score, clients)
        used = assignment < self.num_clients
        ok = np.zeros(self.num_subchannels, dtype=bool)
        ok[used] = feasible[assignment[used], np.flatnonzero(used)]
        return np.where(ok, assignment, self.num_clients)

    def _optional(self, obs: Observation, key: str) -> FloatArray:
        """``obs[key]`` (N,), or zeros when the run does not observe it."""
        if key not in obs:
            return np.zeros(self.num_clients)
        return np.nan_to_num(self.field(obs, key), nan=0.0)


def _rank(gain: FloatArray, feasible: npt.NDArray[np.bool_]) -> FloatArray:
    """Predicted gains in dB mapped into [0, 1) over the feasible pairs (tie-break)."""
    with np.errstate(divide="ignore"):
        gain_db = 10.0 * np.log10(gain)
    gain_db = np.where(np.isfinite(gain_db) & feasible, gain_db, np.nan)
    if np.all(np.isnan(gain_db)):
        return np.zeros(gain.shape)
    low, high = np.nanmin(gain_db), np.nanmax(gain_db)
    span = max(high - low, 1e-12)
    return np.nan_to_num(0.999 * (gain_db - low) / span, nan=0.0)


def _run_values(context: SystemContext | None) -> dict[str, Any]:
    """The constants the run's context states (detail 7)."""
    if context is None:
        return {}
    values = {
        k: v
        for k, v in context_constants(context).items()
        if k in ("bandwidth_hz", "noise_psd_dbm_hz", "tx_power_dbm")
    }
    values["payload_bits"] = 32.0 * context.model_dim
    link = context.link
    if link is not None:
        for name, value in (
            ("round_deadline_s", link.round_deadline_s),
            ("rho", link.fading_rho),
            ("rician_k", link.rician_k),
            ("payload_bits", link.upload_bits),
        ):
            if value is not None:
                values[name] = value
    return values


def _check(values: dict[str, Any], airtime_model: Any) -> None:
    """Refuse constants out of range, or a deadline the policy cannot test."""
    if not -1.0 <= float(values["rho"]) <= 1.0:
        raise ValueError(f"rho must be in [-1, 1], got {values['rho']}")
    if float(values["rician_k"]) < 0:
        raise ValueError(f"rician_k must be >= 0, got {values['rician_k']}")
    for name in ("round_deadline_s", "payload_bits", "bandwidth_hz"):
        if values[name] is not None and not float(values[name]) > 0:
            raise ValueError(f"{name} must be > 0, got {values[name]}")
    if values["round_deadline_s"] is not None and (
        values["payload_bits"] is None or airtime_model is None
    ):
        raise ValueError(
            "deadline_max_weight needs a run context with an airtime model "
            "(context.link.airtime_model) and payload_bits to predict the "
            "airtime against round_deadline_s"
        )
