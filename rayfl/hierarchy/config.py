"""The ``topology`` config section: flat (default) or hierarchical H2FDP.

``topology.kind: star`` (the default) keeps the classic star run untouched.
``kind: hierarchical`` runs devices → edge servers → cloud (H2FDP, from the paper
"Differentially-Private Hierarchical Federated Learning", Lin and Brinton,
arXiv:2401.11592): the engine runs
:class:`rayfl.hierarchy.round.HierarchicalRound`, and
``rounds`` counts global aggregations K_g.

Symbol table (the H2FDP paper's system model):

| paper symbol | code name |
|---|---|
| N | ``num_edges`` |
| s_c | ``clients_per_edge`` (or the assignment's subnet sizes) |
| N_T, p_c | ``trusted_edges``, ``trusted_fraction`` |
| τ_k (τ_0) | ``tau`` |
| m_k | ``local_period`` |
| G | ``dp.grad_bound`` |
| c_2, v_2 | ``dp.edge_constant``, ``dp.device_constant`` |
| q (eq. 15's input only) | ``dp.calibration_sample_rate`` (default B / mean D_i) |
| γ | ``lr.gamma`` |
| τ_max, α_1, α_2, α_3, M | ``control.tau_max``, ``control.alpha_*``, ``control.model_dim`` |
| p̄, R̄ | ``cost.backhaul_power_dbm``, ``cost.backhaul_rate_bps`` |
| S_c^k, K_e | chosen by ``scheduler.policy`` on ``scheduling.subchannels_per_edge`` |
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rayfl.algorithms.config import MAX_LR

__all__ = [
    "MAX_DB",
    "MAX_SUBCHANNELS",
    "ControlConfig",
    "CostConfig",
    "HierDPConfig",
    "HierSchedulingConfig",
    "LearningRateConfig",
    "TopologyConfig",
]


MAX_SUBCHANNELS = 100_000
"""Largest K_e, as the star's ``wireless.num_subchannels``: a round draws an
(n_c, K_e) float64 fading matrix per edge (10^5 subchannels × 100 devices =
80 MB) and offers the edge's policy K_e slots; no OFDMA band has more."""


MAX_DB = 300.0
"""Largest magnitude of a dB or dBm field of ``topology.cost``: 10^(300/10) = 1e30
W stays finite through the rate and energy formulas (1e308 dBm would be ∞ W,
and the run's latency and energy NaN)."""

MAX_PHYSICAL = 1e15
"""Upper bound of the positive physical quantities (Hz, bit/s, m): far above any
radio, small enough that their products in the cost model stay finite."""

MAX_WEIGHT = 1e6
"""Largest control weight α and DP constant: beyond it one term swamps the rest."""


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class HierDPConfig(_Section):
    """Hierarchical DP (the H2FDP paper): who adds noise depends on the edge's trust.

    Sensitivity (``rayfl.privacy.sensitivity``): each device clips its
    accumulated step over s SGD steps to η·s·G, so a device release moves by at
    most 2η·s·G between any two of its datasets; a trusted edge's equal-weight
    mean of s_c such steps moves by at most 2η·s·G/s_c. The mode
    ``per_sample_mean`` (Δ/B) is refused: it would need per-sample clipping, and
    even then 2G/B bounds only one step of the mean gradient — over τ noise-free
    local steps the two trajectories differ, so every other sample's gradient
    may differ too (by up to 2G each), and the accumulated step is only bounded
    by 2η·τ·G.
    """

    enabled: bool = Field(True, description="Add DP noise (False: HFL without DP).")
    epsilon: float = Field(
        1.0,
        gt=0,
        le=MAX_WEIGHT,
        description="ε per semi-honest observer, whole run, in (0, 1e6].",
    )
    delta: float = Field(1e-5, gt=0, lt=1, description="δ.")
    grad_bound: float | None = Field(
        1.0,
        gt=0,
        le=MAX_WEIGHT,
        description="G: each device's accumulated step over s SGD steps is clipped to "
        "η·s·G (so ‖u_i‖ ≤ η τ G as Lemma 3.2 needs); None = no clipping, "
        "allowed only without DP (enabled false or baseline hfl).",
    )
    edge_constant: float = Field(
        1.5, gt=0, le=MAX_WEIGHT, description="c_2 of eq. 15 (trusted edge), ≤ 1e6."
    )
    device_constant: float = Field(
        1.5, gt=0, le=MAX_WEIGHT, description="v_2 of eq. 15 (device), ≤ 1e6."
    )
    calibration: Literal["closed_form", "accountant"] = Field(
        "closed_form",
        description="closed_form: σ = c q Δ √(L ln(1/δ))/ε (eq. 15); accountant: σ = z Δ "
        "with z from dp-accounting's RDP calibration for (q, L, ε, δ).",
    )
    calibration_sample_rate: float | None = Field(
        None,
        gt=0,
        le=1,
        description="q in the paper's noise formula only (eq. 15, and the "
        "accountant-free control's DP term): sets σ, never the ledger. None = "
        "batch_size / mean |D_i|. The ledger uses q = 1: device batches are epoch "
        "permutations, not Poisson samples.",
    )
    sample_rate: float | None = Field(
        None,
        description="Not settable: replaced by calibration_sample_rate (the ledger's "
        "q comes from the code path, never from the config).",
    )
    local_sensitivity_steps: Literal["tau", "period"] = Field(
        "tau",
        description="Steps in Δ of a local release: tau (paper, conservative) or the "
        "local period m_k (less conservative; the paper does not say which).",
    )
    sensitivity_mode: Literal["paper", "per_sample_mean"] = Field(
        "paper",
        description="paper: Δ = 2ητG (a device's step clipped to ητG; an edge's "
        "mean of s_c such steps: 2ητG/s_c). per_sample_mean (Δ/B) is "
        "refused: devices clip the accumulated step, not per-sample gradients, "
        "and even per-sample clipping bounds only one mean-gradient step by 2G/B.",
    )
    strict_accounting: bool = Field(
        False,
        description="Calibrate each stream to ε/2 so an untrusted edge (which "
        "sees both streams) stays within ε. The ledger composes every release "
        "either way (q = 1).",
    )

    @model_validator(mode="after")
    def _check_dp(self) -> HierDPConfig:
        if self.sample_rate is not None and self.sample_rate != 1.0:
            raise ValueError(
                f"topology.dp.sample_rate={self.sample_rate} is not accepted: the "
                "ledger takes its sample rate from the code path (q = 1: device "
                "batches are epoch permutations, not Poisson samples). For eq. 15's "
                "q, set topology.dp.calibration_sample_rate (it sets sigma, never "
                "the ledger)."
            )
        if self.sensitivity_mode == "per_sample_mean":
            raise ValueError(
                "topology.dp.sensitivity_mode=per_sample_mean is refused: devices "
                "clip the accumulated local step to eta*steps*G, not per-sample "
                "gradients, so one record can move a release by 2*eta*steps*G; even "
                "per-sample clipping bounds only ONE mean-gradient step by 2G/B (over "
                "tau steps the trajectories differ). Use sensitivity_mode: paper."
            )
        return self


class LearningRateConfig(_Section):
    """Step size η_k: constant, a manual schedule, or the H2FDP paper's rule (Sec. 5.1)."""

    mode: Literal["constant", "manual", "theory"] = Field(
        "manual",
        description="constant: η = algorithm.lr; manual: η_k = γ/√(k+1); theory: "
        "γ_k = min{1/τ_{k−1}, 1/K_g}/β̂_k (Sec. 5.1), β̂ estimated each round.",
    )
    gamma: float = Field(
        0.05,
        gt=0,
        le=MAX_LR,
        description=f"γ of the manual mode, in (0, {MAX_LR:g}] (algorithm.lr's bound).",
    )


class ControlConfig(_Section):
    """Adaptive control of τ and the subnet sizes (Algorithm 1 Part II of the H2FDP paper)."""

    enabled: bool = Field(False, description="True: Algorithm 1; False: Algorithm 2.")
    tau_max: int = Field(
        40, ge=1, le=1_000_000, description="τ_max, upper bound of the τ search, ≤ 1e6."
    )
    alpha_energy: float = Field(
        1.0, ge=0, le=MAX_WEIGHT, description="α_1 (energy weight), in [0, 1e6]."
    )
    alpha_delay: float = Field(
        1.0, ge=0, le=MAX_WEIGHT, description="α_2 (delay weight), in [0, 1e6]."
    )
    alpha_dp: float = Field(
        1.0,
        ge=0,
        le=MAX_WEIGHT,
        description="α_3 (DP stationarity weight), in [0, 1e6].",
    )
    model_dim: int | None = Field(
        None, ge=1, description="M in ν; None = the model's true dimension."
    )
    normalize_costs: bool = Field(
        True,
        description="Divide (a), (b), (c) by their values at (τ_0, full s) at k = 0, "
        "so α's of order 1 balance (φ = ν_0/((a)+(b))_0 when False).",
    )


class CostConfig(_Section):
    """Energy and delay model (Appendix D of the H2FDP paper)."""

    tx_power_dbm: float = Field(
        24.0,
        ge=-MAX_DB,
        le=MAX_DB,
        description="Device transmit power p_i, dBm, in [-300, 300].",
    )
    bandwidth_hz: float = Field(
        1e6, gt=0, le=MAX_PHYSICAL, description="W per device uplink, Hz, ≤ 1e15."
    )
    noise_psd_dbm_hz: float = Field(
        -173.0, ge=-MAX_DB, le=MAX_DB, description="N_0, dBm/Hz, in [-300, 300]."
    )
    ref_gain_db: float = Field(
        -30.0,
        ge=-MAX_DB,
        le=MAX_DB,
        description="β_0: channel gain at d_0 = 1 m, dB, in [-300, 300].",
    )
    path_loss_exponent: float = Field(3.75, gt=0, le=10.0, description="α̂, in (0, 10].")
    distance_min_m: float = Field(
        10.0, gt=0, le=1e7, description="Smallest device-edge distance, m, ≤ 1e7."
    )
    distance_max_m: float = Field(
        100.0, gt=0, le=1e7, description="Largest device-edge distance, m, ≤ 1e7."
    )
    bits_per_param: int = Field(
        32, ge=1, le=64, description="Q, bits per model coordinate, 1..64."
    )
    backhaul_power_dbm: float = Field(
        38.0,
        ge=-MAX_DB,
        le=MAX_DB,
        description="p̄ of the edge→cloud link, dBm, in [-300, 300].",
    )
    backhaul_rate_bps: float = Field(
        1e8, gt=0, le=MAX_PHYSICAL, description="R̄, edge→cloud rate, bit/s, ≤ 1e15."
    )


class HierSchedulingConfig(_Section):
    """The edges' uplink bands: K_e subchannels per edge and their fading.

    ``scheduler.policy`` chooses who uploads in each subnet (S_c^k), one policy
    instance per edge; its default ``uniform`` is the seeded uniform choice of
    s_c^k devices (the H2FDP paper's), with ``subchannels_per_edge`` unset bit
    for bit the paper's behaviour. ``rayfl.hierarchy.scheduling`` documents the
    observation and action of each edge.
    """

    subchannels_per_edge: int | None = Field(
        None,
        ge=1,
        le=MAX_SUBCHANNELS,
        description="K_e, uplink subchannels of each edge's band, 1..1e5 (the "
        "star's wireless.num_subchannels bound: every round draws an (n_c, K_e) "
        "fading matrix per edge and its policy picks from K_e slots); at most K_e "
        "devices of a subnet upload per global round. None: K_e = n_c (every "
        "device of the subnet can get one; with uniform: no cap, s_c^k as today).",
    )
    frequency_selective: bool = Field(
        True,
        description="True: independent Rayleigh fading per (device, subchannel); False: "
        "one fading per device across the band (the subchannels differ only in id).",
    )
    coherence: Literal["interval", "period"] = Field(
        "interval",
        description="interval: a subchannel's fading is constant over the global "
        "interval (the decision sees the uploads' channel); period: redrawn at every "
        "local period, the decision sees the first period's.",
    )


class TopologyConfig(_Section):
    """Network topology of the run: flat star (default) or device-edge-cloud."""

    kind: Literal["hierarchical"] = Field(
        "hierarchical",
        description="hierarchical: H2FDP (the `topology` union's other members are "
        "flat, the classic star, and d2d).",
    )
    num_edges: int = Field(10, ge=1, description="N, number of edge servers.")
    clients_per_edge: int | tuple[Annotated[int, Field(ge=1)], ...] | None = Field(
        None,
        description="Subnet sizes s_c (one int for all, or one per edge, contiguous id "
        "blocks; must sum to data.num_clients). None: use `assignment`.",
    )
    assignment: Literal["contiguous", "nearest", "random"] = Field(
        "contiguous",
        description="When clients_per_edge is None: contiguous equal blocks, nearest "
        "edge on a square map (sizes vary), or a seeded random balanced split.",
    )
    trusted_edges: tuple[int, ...] | None = Field(
        None, description="Ids of trusted edges N_T; overrides trusted_fraction."
    )
    trusted_fraction: float = Field(
        0.5,
        ge=0,
        le=1,
        description="p_c: round(p_c N) edges trusted (the paper's p_c is a "
        "probability: see trust_sampling).",
    )
    trust_sampling: Literal["exact", "bernoulli"] = Field(
        "exact",
        description="exact: round(p_c N) random edges; bernoulli: each w.p. p_c.",
    )
    tau: int = Field(
        20, ge=1, description="τ (τ_0 under control): SGD steps per global round."
    )
    local_period: int = Field(
        5, ge=1, description="m: SGD steps between local aggregations."
    )
    local_at_global: bool = Field(
        False,
        description="Also aggregate locally at t_{k+1} (K_ℓ = τ/m; the paper leaves "
        "it open) instead of "
        "the global aggregation replacing it (K_ℓ = τ/m − 1).",
    )
    weighting: Literal["equal", "data_size"] = Field(
        "equal",
        description="ρ_{i,c}, ϱ_c: equal (paper: 1/s_c, 1/N) or by sample counts.",
    )
    baseline: Literal["h2fdp", "hfl", "hfl_dp", "pedpfl"] = Field(
        "h2fdp",
        description="h2fdp; hfl = no DP; hfl_dp = all edges untrusted; pedpfl = one "
        "aggregator, all devices LDP, no local aggregation (the paper's baselines).",
    )
    edge_eval: bool = Field(
        True, description="Evaluate each edge's model on its subnet's test data."
    )
    dp: HierDPConfig = Field(default_factory=HierDPConfig)
    lr: LearningRateConfig = Field(default_factory=LearningRateConfig)
    control: ControlConfig = Field(default_factory=ControlConfig)
    cost: CostConfig = Field(default_factory=CostConfig)
    scheduling: HierSchedulingConfig = Field(default_factory=HierSchedulingConfig)

    @model_validator(mode="after")
    def _check(self) -> TopologyConfig:
        if self.trusted_edges is not None:
            bad = [e for e in self.trusted_edges if not 0 <= e < self.num_edges]
            if bad:
                raise ValueError(
                    f"topology.trusted_edges must be edge ids in [0, {self.num_edges}), "
                    f"got {bad}"
                )
        if (
            isinstance(self.clients_per_edge, tuple)
            and len(self.clients_per_edge) != self.num_edges
        ):
            raise ValueError(
                f"topology.clients_per_edge lists {len(self.clients_per_edge)} sizes "
                f"but num_edges={self.num_edges}"
            )
        if self.local_period > self.tau:
            raise ValueError(
                f"topology.local_period ({self.local_period}) must be <= tau ({self.tau})"
            )
        if self.cost.distance_min_m > self.cost.distance_max_m:
            raise ValueError("topology.cost.distance_min_m must be <= distance_max_m")
        if self.dp.enabled and self.baseline != "hfl" and self.dp.grad_bound is None:
            raise ValueError(
                "topology.dp.grad_bound is required when topology.dp.enabled is true "
                f"(baseline {self.baseline} adds DP noise calibrated to G), got None; "
                "for no DP set topology.dp.enabled: false or topology.baseline: hfl"
            )
        return self

    def changed(
        self,
        *,
        epsilon: float | None = None,
        control: bool | None = None,
        scheduling: HierSchedulingConfig | None = None,
    ) -> TopologyConfig:
        """Return a copy with a new ε, controller switch or scheduling (None: keep)."""
        topo = self
        if epsilon is not None:
            dp = topo.dp.model_copy(update={"epsilon": float(epsilon)})
            topo = topo.model_copy(update={"dp": dp})
        if control is not None:
            ctl = topo.control.model_copy(update={"enabled": control})
            topo = topo.model_copy(update={"control": ctl})
        if scheduling is not None:
            topo = topo.model_copy(update={"scheduling": scheduling})
        return topo
