"""Min-max fair scheduling: Algorithm 2 of the WPFL paper (Zhao et al., arXiv:2506.02422).

"Enhancing Convergence, Privacy and Fairness for Wireless Personalized FL:
Quantization-Assisted Min-Max Fair Scheduling" minimises, each round, the largest
per-client PL bound term max_n Φ_n (eq. 32, problem P). The problem decouples
(P1): the uplink error term Θ_L is the only link between clients, so

1. all clients transmit at full power P^th (P2: rate grows and ρ falls with P);
2. client selection and subchannel assignment minimise Σ ρ_{n,L} over the
   eligible clients (Υ_n < T0) and the pairs meeting the rate constraint C5,
   r_{n,k} = B·log2(1 + γ_{n,k}) ≥ r_min = abs(ω)·b/τ_max (eq. 10-11), by
   Kuhn-Munkres (P3, ``linear_sum_assignment``), maximum cardinality first
   [AMBIG-9];
3. the FL learning rate is η_F = μ/(2(1 + ϕ1)L²) (P5), and each client's PL
   learning rate η_{P,n} and weight λ_n minimise Φ_n by a bounded 1-D convex
   search with λ = λ(η) from the equal-contraction constraint C1 (P6/P7,
   :mod:`policies.minmax_bound`).

The rates and weights reach the clients through the env's per-client
``controls`` (``WirelessFLEnv(controls=True)`` with an algorithm that declares
``lr``, ``personal_lr``, ``lam``, e.g. Ditto). Per-pair error probability:
γ = P·h/(N0·B) (eq. 12), BER of M-QAM e = [(2√M − 2)/(√M log2 √M)]·
Q(√(3γ log2 M/(M − 1))) (eq. 13, as printed), ρ = 1 − (1 − e)^R (eq. 14).

Symbol table (paper symbol → code name):

| Symbol | Code name | Default (seed_000 Table I, CNN-FMNIST) |
|--------|-----------|-----------------------------------------|
| N, K | ``num_clients``, ``num_subchannels`` | from the spaces |
| h_{n,k} [dB] | ``obs["channel_gain"][n, k]`` | – |
| P^th, P_BS | ``tx_power_dbm``, ``bs_tx_power_dbm`` | the run's link, else 23, 30 dBm |
| N0, B | ``noise_psd_dbm_hz``, ``bandwidth_hz`` | the run's link, else −169 dBm/Hz, 1 MHz |
| M_ω, R | ``qam_order``, ``bits_per_element`` | the run's link, else 256; 16 |
| τ_max, b | ``max_latency_s``, ``rate_bits_per_param`` | None (no C5), 16 |
| ρ_{n,k,L}, ρ_{n,G} | :func:`element_error_probability` | – |
| c^t | the assignment | – |
| η_F, η_{P,n}, λ_n | controls ``lr``, ``personal_lr``, ``lam`` | – |
| μ, L, G0, M, ϕ, φ, ε_P, C, σ_DP, abs(ω) | see :class:`policies.minmax_bound.PLBound` | – |

Implementation details:
    1. [AMBIG-9] Maximum-cardinality minimum-cost matching: infeasible pairs
       (C5) cost K + 1 > Σρ of any matching, so the Hungarian solution first
       uses as few infeasible pairs as possible (the most feasible pairs), then
       minimises Σρ; infeasible pairs are then dropped (their subchannels idle).
       This keeps the costs O(K), so ρ differences of 1e−15 still count.
    2. [AMBIG-3] r_min = abs(ω)·b/τ_max with ``rate_bits_per_param`` b = 16 = R
       by default (paper-literal); the spec recommends the effective bits
       b_eff = min(16, B_q + B_o) of Table III (≈ 8.9). ``max_latency_s=None``
       drops C5 (the env's ``wireless.max_latency_s`` default).
    3. [AMBIG-2] The downlink gain of round t + 1 is not observed when the BS
       schedules; ρ_{n,G} in Φ_n is estimated from the client's mean linear
       uplink gain over the subchannels (its path loss, up to fading) at P_BS
       over one subchannel. Φ_n barely depends on it (spec §3.3).
    4. The env applies a round's controls to the scheduled clients' FL and PL
       steps of that round, so η_{P,n}, λ_n of step 6 of spec §3.4 are solved
       before the round, from this round's Θ_{L,min} (no extra signalling). All
       N rows are filled (the parfor over all clients of Algorithm 2).
    5. ``adjust=False`` is the Non-Adjustment baseline (``non_adjustment``):
       the same KM scheduling and no controls, so the algorithm's configured
       η_F, η_P, λ (0.01, 0.01, 0.5 in the paper) apply. ``assume_error_free``
       sets ρ = 0 in Θ_L and Φ_n (the "Proposed with error-free channel" run,
       together with ``wireless.effects: none``); KM still uses the real ρ.
    6. Without a ``controls`` entry in the action space (e.g. the contract
       tests, or a runner env without controls) only steps 1-2 act. The
       hierarchy has no per-device controls, so minmax is meant for the star
       only; ``non_adjustment`` (steps 1-2) runs on each edge.
    7. The last solution (ρ, Θ_L, η_F, ε_F, η_P, λ, Φ, max Φ) is kept in
       ``last_solution`` for logging the bound (spec §8 "bound bookkeeping").
    8. The names of the ``controls`` columns come from the run's algorithm
       (``control_names`` of the star's context, ``rayfl.star.context.
       StarContext``) unless ``control_names`` is given:
       with FedAvg minmax sets ``lr`` = η_F only, with Ditto all three. An
       algorithm whose controls minmax cannot set (e.g. sparse DP's
       ``sparsity``) is refused when the policy is built, which ``rayfl
       compare`` and ``rayfl bench policies`` do before any run starts.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from gymnasium import spaces
from scipy.optimize import linear_sum_assignment
from scipy.special import erfc

from policies.base import Action, Count, Observation, Policy, Positive, run_constants
from policies.minmax_bound import PLBound

__all__ = [
    "MinMaxPolicy",
    "NonAdjustmentPolicy",
    "element_error_probability",
    "min_error_assignment",
]

FloatArray = npt.NDArray[np.float64]
CONTROL_NAMES = ("lr", "personal_lr", "lam")


def element_error_probability(
    snr_linear: npt.ArrayLike, *, qam_order: int, bits_per_element: int
) -> FloatArray:
    """Return ρ = 1 − (1 − e)^R with e the M-QAM BER of eq. (13), eq. (14).

    e = [(2√M − 2)/(√M·log2 √M)]·Q(√(3γ·log2 M/(M − 1))), Q(x) = erfc(x/√2)/2,
    implemented as printed (γ multiplies log2 M; spec seed_000 §2.5).

    Args:
        snr_linear: Linear SNR γ ≥ 0, any shape.
        qam_order: M, a power of 4.
        bits_per_element: R ≥ 1.

    Returns:
        Per-element error probability, same shape, float64.

    Example:
        >>> float(element_error_probability(0.0, qam_order=4, bits_per_element=2))
        0.75
    """
    bits = int(round(math.log2(qam_order)))
    if qam_order < 4 or 2**bits != qam_order or bits % 2:
        raise ValueError(f"qam_order must be a power of 4, got {qam_order}")
    if bits_per_element < 1:
        raise ValueError(f"bits_per_element must be >= 1, got {bits_per_element}")
    root = math.sqrt(qam_order)
    prefactor = (2 * root - 2) / (root * math.log2(root))
    snr = np.maximum(np.asarray(snr_linear, dtype=np.float64), 0.0)
    ber = (
        prefactor * 0.5 * erfc(np.sqrt(3 * snr * bits / (qam_order - 1)) / math.sqrt(2))
    )
    return -np.expm1(bits_per_element * np.log1p(-ber))  # type: ignore[no-any-return]  # numpy stubs: Any


def min_error_assignment(
    rho: npt.ArrayLike,
    feasible: npt.ArrayLike,
    clients: npt.ArrayLike,
    *,
    idle: int,
) -> npt.NDArray[np.int64]:
    """Solve P3: the most feasible pairs, then the least Σρ (detail 1).

    Args:
        rho: (num_clients, num_subchannels) per-element error probabilities in [0, 1].
        feasible: (num_clients, num_subchannels) bool, True where C5 holds.
        clients: 1-D array of distinct candidate (eligible) client ids.
        idle: Value written on unused subchannels.

    Returns:
        (num_subchannels,) int64: client per subchannel, or ``idle``.

    Example:
        >>> rho = [[0.1, 0.2], [0.3, 0.9]]
        >>> min_error_assignment(rho, [[True, True], [True, False]], [0, 1], idle=2).tolist()
        [1, 0]
    """
    cost = np.asarray(rho, dtype=np.float64)
    allowed = np.asarray(feasible, dtype=bool)
    ids = np.asarray(clients, dtype=np.int64).ravel()
    num_subchannels = cost.shape[1]
    assignment = np.full(num_subchannels, idle, dtype=np.int64)
    if ids.size == 0:
        return assignment
    if np.unique(ids).size != ids.size:
        raise ValueError(f"clients must be distinct ids, got {ids.tolist()}")
    forbidden = float(min(ids.size, num_subchannels) + 1)
    weights = np.where(allowed[ids], np.clip(cost[ids], 0.0, 1.0), forbidden)
    rows, cols = linear_sum_assignment(weights)
    keep = allowed[ids[rows], cols]
    assignment[cols[keep]] = ids[rows[keep]]
    return assignment


class MinMaxPolicy(Policy):
    """Algorithm 2 of Zhao et al. 2025: KM on Σρ, then η_F and per-client (η_P, λ).

    Args:
        observation_space: The env's observation space.
        action_space: The env's action space (``controls`` columns named by
            ``control_names``).
        tx_power_dbm: P^th [dBm], the full power every client uses.
        bs_tx_power_dbm: P_BS [dBm], for the ρ_{n,G} estimate (detail 3).
        bandwidth_hz: B, one subchannel [Hz].
        noise_psd_dbm_hz: N0 [dBm/Hz].
        qam_order: M_ω. These five link constants, when not given, are the
            run's (``context.link``: the star's ``wireless`` section, the
            hierarchy's ``topology.cost``), else Table I's (``TABLE_I_LINK``).
        bits_per_element: R, bits per quantized element (eq. 14).
        max_latency_s: τ_max [s] of C5; None drops C5.
        rate_bits_per_param: b in r_min = abs(ω)·b/τ_max (detail 2).
        adjust: Solve and send η_F, η_P, λ (False: Non-Adjustment).
        assume_error_free: Use ρ = 0 in the bound (detail 5).
        control_names: Names of the ``controls`` columns, in order; None
            (default) takes them from the run: the algorithm's declared
            controls (``context.control_names``: ``lr`` for FedAvg; ``lr``,
            ``personal_lr``, ``lam`` for Ditto), so no hand parameter is
            needed. Without a context, a controls Box of 3 columns is read as
            ``lr, personal_lr, lam``; any other width needs the names.
        **bound: Fields of :class:`policies.minmax_bound.PLBound` (``mu``,
            ``smoothness``, ``grad_bound``, ``model_gap``, ``phi1``, ``phi2``,
            ``varphi1``, ``varphi2``, ``clip_norm``, ``noise_std``,
            ``num_params``, ``pl_contraction``). ``num_params``, ``clip_norm``
            and ``noise_std``, when not given, are the run's (abs(w), C and
            σ_DP of ``context``), else Table I's.

    Example:
        >>> from gymnasium import spaces
        >>> obs_space = spaces.Dict({
        ...     "channel_gain": spaces.Box(-np.inf, np.inf, (3, 2)),
        ...     "eligible": spaces.Box(0, 1, (3,))})
        >>> policy = MinMaxPolicy(obs_space, spaces.MultiDiscrete([4, 4]))
        >>> gain_db = np.array([[-110.0, -104.0], [-100.0, -115.0], [-112.0, -109.0]])
        >>> policy({"channel_gain": gain_db, "eligible": np.ones(3)}).tolist()
        [1, 0]
    """

    topologies: ClassVar[frozenset[str]] = frozenset({"star"})
    optional_parts: ClassVar[frozenset[str]] = frozenset({"power", "controls"})

    allows_idle = True  # only when C5 leaves no feasible client
    uses_controls: ClassVar[bool] = True  # the runner builds its env with controls
    #: The bound's μ, which sets η_F = μ/(2(1 + ϕ1)L²) (P5) and, with Ditto, η_P
    #: and λ: the range where C11 (0 < ε_F < 1) holds at the other constants'
    #: defaults (L = 0.29, ϕ = φ = 1e−3).
    tunable: ClassVar[Mapping[str, tuple[float, float, float]]] = {
        "mu": (0.05, 0.026, 0.58)
    }
    #: The bound's fields, passed through ``**bound`` (types for config checks).
    extra_params: ClassVar[Mapping[str, Any]] = {
        key: kind
        for key, kind in typing.get_type_hints(PLBound, include_extras=True).items()
        if key != "bits_per_element"
    }

    def __init__(
        self,
        observation_space: spaces.Space[Any],
        action_space: spaces.Space[Any],
        *,
        tx_power_dbm: float | None = None,
        bs_tx_power_dbm: float | None = None,
        bandwidth_hz: Positive | None = None,
        noise_psd_dbm_hz: float | None = None,
        qam_order: int | None = None,
        bits_per_element: Count = 16,
        max_latency_s: Positive | None = None,
        rate_bits_per_param: Positive = 16.0,
        adjust: bool = True,
        assume_error_free: bool = False,
        control_names: tuple[str, ...] | list[str] | None = None,
        context: Any = None,
        **bound: Any,
    ) -> None:
        link = _link_constants(
            context,
            tx_power_dbm=tx_power_dbm,
            bs_tx_power_dbm=bs_tx_power_dbm,
            bandwidth_hz=bandwidth_hz,
            noise_psd_dbm_hz=noise_psd_dbm_hz,
            qam_order=qam_order,
        )
        if not link["bandwidth_hz"] > 0:
            raise ValueError(f"bandwidth_hz must be > 0, got {link['bandwidth_hz']}")
        if max_latency_s is not None and not max_latency_s > 0:
            raise ValueError(f"max_latency_s must be > 0 or None, got {max_latency_s}")
        if not rate_bits_per_param > 0:
            raise ValueError(
                f"rate_bits_per_param must be > 0, got {rate_bits_per_param}"
            )
        unknown = set(bound) - set(PLBound.__dataclass_fields__) - {"bits_per_element"}
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got unknown parameters {sorted(unknown)}"
            )
        self.bound = PLBound(
            bits_per_element=bits_per_element, **_bound_constants(context, bound)
        )
        self.tx_power_dbm = float(link["tx_power_dbm"])
        self.bs_tx_power_dbm = float(link["bs_tx_power_dbm"])
        self.bandwidth_hz = float(link["bandwidth_hz"])
        self.noise_psd_dbm_hz = float(link["noise_psd_dbm_hz"])
        self.qam_order = int(link["qam_order"])
        self.bits_per_element = int(bits_per_element)
        element_error_probability(0.0, qam_order=self.qam_order, bits_per_element=1)
        self.min_rate_bps = (
            None
            if max_latency_s is None
            else self.bound.num_params * float(rate_bits_per_param) / max_latency_s
        )
        self.adjust = bool(adjust)
        self.assume_error_free = bool(assume_error_free)
        self.control_names = _control_names(control_names, context)
        self.last_solution: dict[str, Any] = {}
        self._controls: npt.NDArray[np.float32] | None = None
        super().__init__(observation_space, action_space, context=context)
        self.controls_space = self._controls_box(action_space)

    def _controls_box(self, action_space: spaces.Space[Any]) -> spaces.Box | None:
        """The action's ``controls`` Box (None without one), checked against the names."""
        if not (
            isinstance(action_space, spaces.Dict) and "controls" in action_space.spaces
        ):
            return None
        box = action_space["controls"]
        if not isinstance(box, spaces.Box):
            raise ValueError(f"action_space['controls'] must be a Box, got {box!r}")
        if not self.control_names and box.shape == (self.num_clients, 3):
            self.control_names = CONTROL_NAMES  # no run to ask: Ditto's, in order
        expected = (self.num_clients, len(self.control_names))
        if box.shape != expected:
            given = self.control_names or "none (no run context)"
            raise ValueError(
                f"action_space['controls'] has shape {box.shape}, "
                f"expected {expected} for control_names {given}; pass "
                "control_names (the env's control_names, e.g. [lr] for fedavg) "
                "when building minmax outside a run"
            )
        unknown_names = set(self.control_names) - set(CONTROL_NAMES)
        if self.adjust and unknown_names:
            raise ValueError(
                f"control_names {self.control_names}: minmax cannot set "
                f"{sorted(unknown_names)}; it sets {', '.join(CONTROL_NAMES)}"
            )
        return box

    def snr_linear(self, gain_db: npt.ArrayLike, tx_power_dbm: float) -> FloatArray:
        """γ = P·h/(N0·B), eq. (12), for gains in dB."""
        snr_db = (
            np.asarray(gain_db, dtype=np.float64)
            + tx_power_dbm
            - self.noise_psd_dbm_hz
            - 10.0 * math.log10(self.bandwidth_hz)
        )
        return np.power(10.0, snr_db / 10.0)

    def uplink_rho(self, obs: Observation) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
        """Return ρ_{n,k,L} (eq. 12-14) at full power and the C5 mask, both (N, K)."""
        snr = self.snr_linear(self.field(obs, "channel_gain"), self.tx_power_dbm)
        rho = element_error_probability(
            snr, qam_order=self.qam_order, bits_per_element=self.bits_per_element
        )
        if self.min_rate_bps is None:
            return rho, np.ones(rho.shape, dtype=bool)
        rate = self.bandwidth_hz * np.log2(1.0 + snr)
        return rho, rate >= self.min_rate_bps

    def downlink_rho(self, obs: Observation) -> FloatArray:
        """Return the (N,) ρ_{n,G} estimate of detail 3."""
        gain = np.power(10.0, self.field(obs, "channel_gain") / 10.0).mean(axis=1)
        with np.errstate(divide="ignore"):
            gain_db = 10.0 * np.log10(gain)
        snr = self.snr_linear(gain_db, self.bs_tx_power_dbm)
        return element_error_probability(
            snr, qam_order=self.qam_order, bits_per_element=self.bits_per_element
        )

    def schedule(self, obs: Observation) -> npt.NDArray[np.int64]:
        """KM on Σρ (P3); then η_F (P5) and η_P, λ per client (P7) if adjusting."""
        rho, feasible = self.uplink_rho(obs)
        eligible = np.flatnonzero(self.eligible_mask(obs))
        assignment = min_error_assignment(
            rho, feasible, eligible, idle=self.num_clients
        )
        used = np.flatnonzero(assignment < self.num_clients)
        selected_rho = rho[assignment[used], used]
        mean_rho = float(selected_rho.mean()) if used.size else 0.0
        self.last_solution = {"uplink_rho": selected_rho, "mean_uplink_rho": mean_rho}
        self._controls = None
        if self.adjust and self.controls_space is not None:
            self._controls = self._solve_controls(obs, mean_rho)
        return assignment

    def _solve_controls(
        self, obs: Observation, mean_rho: float
    ) -> npt.NDArray[np.float32]:
        bound = self.bound
        downlink = self.downlink_rho(obs)
        if self.assume_error_free:
            mean_rho, downlink = 0.0, np.zeros_like(downlink)
        theta = bound.uplink_error_term(mean_rho)
        eta_p, lam, phi = bound.solve_pl(bound.bracket(theta, downlink))
        eta_f = bound.fl_lr()
        self.last_solution.update(
            theta=theta,
            fl_lr=eta_f,
            fl_contraction=bound.fl_contraction(),
            personal_lr=eta_p,
            lam=lam,
            phi=phi,
            max_phi=float(phi.max()),
            downlink_rho=downlink,
        )
        values = {
            "lr": np.full(self.num_clients, eta_f),
            "personal_lr": eta_p,
            "lam": lam,
        }
        space = self.controls_space
        assert space is not None
        table = np.array([values[name] for name in self.control_names]).T
        low, high = np.asarray(space.low), np.asarray(space.high)
        return np.clip(table, low, high).astype(space.dtype)  # type: ignore[no-any-return]  # numpy stubs: Any

    def to_action(self, assignment: npt.ArrayLike) -> Action:
        """Build the action; add the solved ``controls`` when there are any."""
        action = super().to_action(assignment)
        if self._controls is not None and isinstance(action, dict):
            action["controls"] = self._controls
        return action


class NonAdjustmentPolicy(MinMaxPolicy):
    """Non-Adjustment baseline of the WPFL paper: KM scheduling, fixed coefficients.

    Same arguments as :class:`MinMaxPolicy` except ``adjust`` (always False):
    no controls are sent, so the algorithm's configured η_F, η_P, λ apply.
    """

    uses_controls: ClassVar[bool] = False
    fixed_params: ClassVar[frozenset[str]] = frozenset({"adjust"})
    tunable: ClassVar[Mapping[str, tuple[float, float, float]]] = {}  # μ unused
    topologies: ClassVar[frozenset[str]] = frozenset({"star", "hierarchical"})
    optional_parts: ClassVar[frozenset[str]] = frozenset({"power"})

    def __init__(
        self,
        observation_space: spaces.Space[Any],
        action_space: spaces.Space[Any],
        **params: Any,
    ) -> None:
        if "adjust" in params:
            raise TypeError("non_adjustment never adjusts; drop the 'adjust' parameter")
        super().__init__(observation_space, action_space, adjust=False, **params)


def _control_names(
    given: tuple[str, ...] | list[str] | None, context: Any
) -> tuple[str, ...]:
    """The ``controls`` column names: those given, else the run's (detail 8)."""
    if given is not None:
        return tuple(given)
    return tuple(getattr(context, "control_names", ()) or ())


#: Table I of the paper: the link constants when neither the user nor the run
#: gives them.
TABLE_I_LINK: dict[str, float] = {
    "tx_power_dbm": 23.0,
    "bs_tx_power_dbm": 30.0,
    "bandwidth_hz": 1e6,
    "noise_psd_dbm_hz": -169.0,
    "qam_order": 256,
}


def _link_constants(context: Any, **given: float | None) -> dict[str, float]:
    """Each link constant: the one passed, else the run's (``context.link``), else Table I."""
    link = getattr(context, "link", None)
    run = {
        name: value
        for name in TABLE_I_LINK
        if (value := getattr(link, name, None)) is not None
    }
    return run_constants(given, run, TABLE_I_LINK)


def _bound_constants(context: Any, given: Mapping[str, Any]) -> dict[str, Any]:
    """The bound's fields: those passed, else the run's, else Table I's (PLBound's).

    The run's (``context``): ``num_params`` = abs(w) (``model_dim``);
    ``clip_norm`` C and ``noise_std`` σ_DP from ``context.privacy`` when stated.
    """
    defaults = {
        f.name: f.default
        for f in dataclasses.fields(PLBound)
        if f.name in BOUND_FROM_RUN
    }
    run: dict[str, Any] = {}
    if context is not None:
        privacy = context.privacy
        for name, value in (
            ("num_params", int(context.model_dim)),
            ("clip_norm", privacy.clip_norm),
            ("noise_std", privacy.noise_std),
        ):
            if value is not None:
                run[name] = value
    return {**dict(given), **run_constants(given, run, defaults)}


#: The bound's fields a run states (the rest are the paper's constants, §4.6).
BOUND_FROM_RUN = ("num_params", "clip_norm", "noise_std")
