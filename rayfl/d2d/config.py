"""``D2DTopologyConfig``: the ``topology: {kind: d2d, ...}`` section (pFedWN).

A server-free device-to-device network (pFedWN: A Personalized Federated Learning
Framework for D2D Wireless Networks with Heterogeneous Data, arXiv:2501.09822):
nodes dropped in a square, each target client selects neighbors by the analytic
link error probability and aggregates their models itself. Defaults are Table I of
the paper; where the paper leaves a choice open, the default is the reading that
reproduces its selected-neighbor counts, and the alternatives are options.

| parameter | default | paper symbol / source |
|-----------|---------|-----------------------|
| method | pfedwn | pFedWN, Local, or the ``algorithm`` section run over the group (FedAvg, FedProx…) |
| target | random | the target client n (TC); ``all``: every client is a target (an extension: the paper has one) |
| side_m | 50 | square side (50 × 50 m², §2.2) |
| num_subchannels | 14 | abs(F), ISM 2.4 GHz sub-channels |
| rayleigh_factor | 2 | Γ |
| path_loss_exponent | 3 | α_s |
| reference_distance_m | 1 | d_0 |
| tx_power_w | 0.2 | P_s |
| carrier_frequency_hz | 2.4e9 | f_c (λ_w = c/f_c) |
| bandwidth_hz | 1e8 | W (σ² = κTW) |
| noise_temperature_k | 290 | T |
| fading_threshold | 2 | β_s |
| sinr_threshold | 5 | γ_th (linear): 5, 10, 15 in Cases 1–3 |
| epsilon | 0.05 | ε (not given for Tables II/III; 0.05 as in Figs. 5–6) |
| interference_var | paper | D̃ as printed (p_r² in the self term) or the Bernoulli variance |
| fading_pdf | single | pdf in the P^err integral: one sub-channel's (as printed) or the best of F |
| participants | selected | baselines over {TC} ∪ M_n or {TC} ∪ G_n (the paper says both) |
| link_model | ideal | every model arrives (the paper) / Bernoulli(1 − P^err) / per-round SINR |
| on_loss | renormalize | lost packet: renormalise π, or reuse the last model received |
| scheduler.policy | channel_threshold | neighbor-selection policy (policies registry) |
| selection_via | once | select once at t = 0, or every round through the D2DNeighbor-v0 env (envs.d2d) |
| alpha | 0.5 | α of eq. 1 (not given in the paper) |
| em_mode | two_phase | π frozen once EM converged, or re-estimated every round |
| em_stop, em_tol, em_max_rounds, em_steps_per_round | l1, 1e-3, 50, 1 | stopping rule [§2.6] |
| neighbor_model | local | what neighbors send in all-targets mode |
| primary | post_aggregation | which accuracy is ``test_acc`` (after eq. 1, or after local training) |
| mobility | static | nodes fixed (the paper), or moving in the square: random_waypoint, gauss_markov (issue 48, :mod:`rayfl.d2d.motion`) |
| round_duration_s | None | T, s a node moves between two rounds (a moving mobility only) |
| mobility_speed_min_mps, mobility_speed_max_mps, mobility_pause_s | None, None, 0 | random waypoint: v_min, v_max, T_p |
| mobility_memory, mobility_speed_mean_mps, mobility_speed_std_mps, mobility_direction_std_rad | None | Gauss-Markov: α, s̄, σ_s, σ_θ |
| fading_dynamics, fading_correlation | iid, None | links' fading i.i.d. per round (the paper) or an AR(1) of lag-1 correlation ρ (issue 48, :mod:`rayfl.d2d.devices`) |
| availability, mean_on_rounds, mean_off_rounds, availability_trace* | always | nodes that come and go: on/off Markov chain or a trace file, as the star's ``wireless.availability`` |
| cpu_cycles_per_sample, cpu_frequency_hz | 2e5, 2.4e9 | Φ, f: a node's local training time d^lo = τ·abs(D_s)·Φ/f_s (the star's defaults) |
| cpu_frequency_distribution, cpu_frequency_low_hz, cpu_frequency_high_hz, cpu_frequency_sigma | constant | f_s per node: constant, uniform or log-normal |
| round_deadline_s | None | D: a neighbour's model arrives only if d^lo + its D2D airtime ≤ D (stragglers) |

The mobility fields are the star's ``wireless.mobility*`` and
``round_duration_s`` (same names, bounds and rules,
:func:`rayfl.wireless.config_rules.check_mobility_fields`); the area is the
square [0, side_m]² instead of the disk. The device fields (availability,
CPU frequencies) are the star's ``wireless`` ones too
(:func:`rayfl.wireless.config_rules.check_device_fields`); the target is the
device that runs the experiment and is always on.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rayfl.wireless.config_rules import (
    CpuHigh,
    CpuLaw,
    CpuLow,
    CpuSigma,
    DirectionStd,
    MeanOff,
    MeanOn,
    Memory,
    Pause,
    SpeedMax,
    SpeedMean,
    SpeedMin,
    SpeedStd,
    TraceAbsent,
    TracePath,
    TracePeriod,
    check_device_fields,
    check_mobility_fields,
)

__all__ = ["D2DTopologyConfig"]


class D2DTopologyConfig(BaseModel):
    """Server-free D2D topology of pFedWN (arXiv:2501.09822); see the module table."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    kind: Literal["d2d"] = "d2d"
    method: Literal["pfedwn", "local", "federated"] = Field(
        "pfedwn",
        description="pfedwn (EM weights + eq. 1 at the target), local (the target "
        "trains alone), or federated: the `algorithm` section (fedavg, fedprox, ... "
        "and any algorithm in the registry) run over the target's group with the "
        "target as the aggregator.",
    )
    target: int | Literal["random", "all"] = Field(
        "random",
        description="Target client id (>= 0), `random` (uniform, from the seed) or "
        "`all` (every client is a target with its own neighbors).",
    )
    side_m: float = Field(
        50.0, gt=0, le=1e6, description="Side of the square area in m, ≤ 1e6."
    )
    num_subchannels: int = Field(
        14,
        ge=1,
        le=100_000,
        description="|F|: ISM sub-channels, 1..1e5 (the star's "
        "wireless.num_subchannels bound).",
    )
    rayleigh_factor: float = Field(
        2.0, gt=0, le=1e6, description="Γ: Rayleigh factor, ≤ 1e6."
    )
    path_loss_exponent: float = Field(
        3.0, gt=0, le=10.0, description="α_s: path-loss exponent, in (0, 10]."
    )
    reference_distance_m: float = Field(
        1.0, ge=1e-3, le=1e6, description="d_0 in m, in [1e-3, 1e6]."
    )
    tx_power_w: float = Field(
        0.2, gt=0, le=1e6, description="P_s: transmit power in W, ≤ 1e6."
    )
    carrier_frequency_hz: float = Field(
        2.4e9, ge=1.0, le=1e15, description="f_c in Hz, in [1, 1e15]."
    )
    bandwidth_hz: float = Field(
        1e8, ge=1.0, le=1e15, description="W in Hz (noise κTW), in [1, 1e15]."
    )
    noise_temperature_k: float = Field(
        290.0, gt=0, le=1e6, description="T in K (noise κTW), ≤ 1e6."
    )
    fading_threshold: float = Field(
        2.0, ge=0, le=1e6, description="β: fading threshold, ≤ 1e6."
    )
    sinr_threshold: float = Field(
        5.0, gt=0, le=1e12, description="γ_th, linear (Cases 1/2/3: 5/10/15), ≤ 1e12."
    )
    epsilon: float = Field(0.05, gt=0, le=1, description="ε: select s iff P_s^err < ε.")
    interference_var: Literal["paper", "bernoulli"] = Field(
        "paper", description="D̃ as printed in App. A, or the Bernoulli variance."
    )
    fading_pdf: Literal["single", "max_of_F"] = Field(
        "single", description="Fading pdf in the P^err integral."
    )
    participants: Literal["selected", "all"] = Field(
        "selected",
        description="Who federates in the local/federated baselines: the target and "
        "its selected neighbors M_n, or all its neighbors G_n. FedAMP and "
        "APPLE (per-client downloads over all N clients) need `all`.",
    )
    link_model: Literal["ideal", "bernoulli", "mc_sinr"] = Field(
        "ideal",
        description="ideal: every model arrives (paper); bernoulli: arrives w.p. "
        "1 − P^err each round; mc_sinr: per-round fading, best sub-channel, SINR ≥ "
        "γ_th.",
    )
    on_loss: Literal["renormalize", "stale"] = Field(
        "renormalize",
        description="pFedWN on a lost model: renormalise π over what arrived, or "
        "reuse the last model received from that neighbor.",
    )
    selection_via: Literal["once", "env"] = Field(
        "once",
        description="once: scheduler.policy selects M_n once, at t = 0, from the "
        "CCM observation (rayfl.d2d.selection; the paper); env: every round the "
        "runner steps the D2DNeighbor-v0 env (envs.d2d) and the policy re-selects M_n from "
        "its observation (per-round CSI, P^err, previous π).",
    )
    alpha: float = Field(
        0.5, ge=0, le=1, description="α of eq. 1 (self weight); 1 = local training."
    )
    em_mode: Literal["two_phase", "online"] = Field(
        "two_phase",
        description="two_phase: one E/M step per round until the stopping rule "
        "fires, then π* is frozen; online: re-estimate π every round.",
    )
    em_stop: Literal["l1", "loglik"] = Field(
        "l1",
        description="EM stopping rule: ‖Δπ‖₁ < em_tol, or mean log-likelihood "
        "change < em_tol.",
    )
    em_tol: float = Field(1e-3, gt=0, description="Tolerance of the EM stopping rule.")
    em_max_rounds: int = Field(
        50, ge=1, description="Rounds after which π is frozen even if not converged."
    )
    em_steps_per_round: int = Field(
        1, ge=1, description="E/M steps per round on the freshly received models."
    )
    neighbor_model: Literal["local", "personalized"] = Field(
        "local",
        description="What a neighbor sends when it is also a target (target=all): "
        "its pure local model (paper) or its personalized pFedWN model.",
    )
    primary: Literal["post_aggregation", "post_training"] = Field(
        "post_aggregation",
        description="Which target accuracy is reported as test_acc (both are logged).",
    )

    mobility: Literal["static", "random_waypoint", "gauss_markov"] = Field(
        "static",
        description="How nodes move in the square [0, side_m]²: 'static' (the "
        "paper's: dropped once), "
        "'random_waypoint' (straight legs to waypoints uniform in the square at "
        "a speed in [mobility_speed_min_mps, mobility_speed_max_mps], pausing "
        "mobility_pause_s) or 'gauss_markov' (AR(1) speed and direction with "
        "mobility_memory, reflected at the square's edges). Round t's distances, "
        "path gains, P^err, link draws and observation follow the nodes; moving "
        "needs round_duration_s (T).",
    )
    round_duration_s: float | None = Field(
        None,
        gt=0.0,
        le=1e6,
        description="T: how long nodes move between two rounds, in s, in (0, 1e6]; "
        "a moving mobility only.",
    )
    mobility_speed_min_mps: SpeedMin = None
    mobility_speed_max_mps: SpeedMax = None
    mobility_pause_s: Pause = None
    mobility_memory: Memory = None
    mobility_speed_mean_mps: SpeedMean = None
    mobility_speed_std_mps: SpeedStd = None
    mobility_direction_std_rad: DirectionStd = None

    fading_dynamics: Literal["iid", "gauss_markov"] = Field(
        "iid",
        description="How a link's fading evolves over rounds: 'iid' (the "
        "paper's: drawn afresh each round) or 'gauss_markov' (an AR(1) on the "
        "complex gain of each link and sub-channel, h_t = ρ·h_(t-1) + "
        "sqrt(1 - ρ²)·w_t, with ρ = fading_correlation). With link_model "
        "bernoulli a link fails when its fade is among the worst P^err of its "
        "law, so losses come in bursts; with mc_sinr the fading is the AR(1)'s.",
    )
    fading_correlation: float | None = Field(
        None,
        ge=-1.0,
        le=1.0,
        description="ρ: lag-1 (one round) correlation of a link's complex "
        "gain, in [-1, 1]; 0 is i.i.d. fading. gauss_markov only, and needed "
        "there.",
    )
    availability: Literal["always", "markov", "trace"] = Field(
        "always",
        description="Which nodes can send each round: 'always' (the paper's), "
        "'markov' (an on/off Markov chain per node with mean on and off "
        "periods mean_on_rounds and mean_off_rounds, started in its stationary "
        "law) or 'trace' (the client,start,end rows of the CSV "
        "availability_trace, in rounds). An away node is not eligible as a "
        "neighbour: the observation says so, a choice naming it is repaired, "
        "and a selected neighbour that is away sends nothing (rejected "
        "'unavailable'). The target is always on.",
    )
    availability_trace: TracePath = None
    availability_trace_absent: TraceAbsent = None
    availability_period_rounds: TracePeriod = None
    mean_on_rounds: MeanOn = None
    mean_off_rounds: MeanOff = None
    cpu_cycles_per_sample: float = Field(
        2e5,
        gt=0,
        le=1e15,
        description="Φ: CPU cycles per training sample, > 0 (local training "
        "time d^lo = local_epochs·abs(D_s)·Φ/f_s); read with round_deadline_s.",
    )
    cpu_frequency_hz: float = Field(
        2.4e9,
        gt=0,
        le=1e12,
        description="f: a node's CPU frequency in Hz, in (0, 1e12] (the "
        "median of lognormal).",
    )
    cpu_frequency_distribution: CpuLaw = "constant"
    cpu_frequency_low_hz: CpuLow = None
    cpu_frequency_high_hz: CpuHigh = None
    cpu_frequency_sigma: CpuSigma = None
    round_deadline_s: float | None = Field(
        None,
        gt=0,
        le=1e9,
        description="D: deadline in s on a neighbour's local training plus its "
        "D2D airtime (32·dim bits at the link's Shannon rate W·log2(1 + "
        "P·ĥ²/σ²) on round t's distances), in (0, 1e9]. A model that misses "
        "it is a straggler: it does not arrive (rejected 'straggler'). None = "
        "no deadline.",
    )

    @model_validator(mode="after")
    def _check(self) -> D2DTopologyConfig:
        if isinstance(self.target, int) and self.target < 0:
            raise ValueError(
                f"topology.target must be >= 0, 'random' or 'all', got {self.target}"
            )
        check_mobility_fields(self, "topology")
        check_device_fields(self, "topology")
        if (self.fading_dynamics == "gauss_markov") != (
            self.fading_correlation is not None
        ):
            raise ValueError(
                "topology.fading_correlation goes with "
                "topology.fading_dynamics=gauss_markov: set both or neither, got "
                f"fading_dynamics={self.fading_dynamics}, fading_correlation="
                f"{self.fading_correlation}"
            )
        if self.mobility == "static" and self.round_duration_s is not None:
            raise ValueError(
                "topology.round_duration_s is read only with a moving "
                "topology.mobility (random_waypoint or gauss_markov), got static"
            )
        return self


def check_d2d_run(cfg: Any) -> None:
    """Check the rules of a ``topology.kind: d2d`` run involving other sections.

    Called by the config's validation (so a bad combination is a config error
    before Ray starts) and again by the D2D runner.

    Args:
        cfg: The run config (a ``RunConfig`` with a d2d topology).

    Raises:
        ValueError: Naming the fields and what to change.
    """
    topo = cfg.topology
    if cfg.data.num_clients < 2:
        raise ValueError(
            "topology.kind=d2d needs data.num_clients >= 2 (a target and at least "
            f"one neighbor), got {cfg.data.num_clients}"
        )
    if isinstance(topo.target, int) and topo.target >= cfg.data.num_clients:
        raise ValueError(
            f"topology.target must be a client id < data.num_clients "
            f"({cfg.data.num_clients}), 'random' or 'all', got {topo.target}"
        )
    if cfg.wireless is not None:
        raise ValueError(
            "topology.kind=d2d has its own channel (topology.*): remove the "
            "`wireless` section"
        )
    from rayfl.algorithms.registry import algorithm_class

    method = topo.method
    if (
        method == "federated"
        and algorithm_class(cfg.algorithm).personalized_downloads
        and topo.participants != "all"
    ):
        raise ValueError(
            f"algorithm.kind={cfg.algorithm.kind} needs per-client downloads from a "
            "server that keeps every upload (FedAMP, APPLE); they read all N clients' "
            "uploads, so topology.kind=d2d runs them over G_n only: set "
            "topology.participants=all (with participants=selected the clients "
            "outside M_n would enter as ω⁰). Per-FedAvg, pFedMe, FedALA, Ditto, "
            "FedProx and FedAvg run over M_n"
        )
    if method != "federated" and cfg.privacy.mechanism != "none":
        raise ValueError(
            f"privacy.mechanism={cfg.privacy.mechanism} applies to the federated "
            f"baselines only; topology.method={method} sends models without it"
        )
