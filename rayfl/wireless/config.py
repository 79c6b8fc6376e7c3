"""Typed configuration of the wireless channel (one section of the config tree).

Defaults reproduce Table I of the WPFL paper (Zhao et al., arXiv:2506.02422); the
computation fields default to the values recommended for the DP-SparFL paper (Wei
et al., arXiv:2304.04164).

Symbol table (paper symbol → code name):

| Symbol        | Code name                 | Source              |
|---------------|---------------------------|---------------------|
| K             | ``num_subchannels``       | WPFL, system model  |
| B             | ``bandwidth_hz``          | WPFL, system model  |
| N0            | ``noise_psd_dbm_hz``      | WPFL, channel model |
| P^th          | ``tx_power_dbm``          | WPFL, system model  |
| P_BS          | ``bs_tx_power_dbm``       | WPFL, system model  |
| d_n           | ``distance_min_m``, ``distance_max_m`` | WPFL, channel model |
| PL(1 m), α    | ``path_loss_ref_db``, ``path_loss_exponent`` | WPFL, channel model |
| M_ω           | ``qam_order``             | WPFL eq. (13)       |
| Φ_i           | ``cpu_cycles_per_sample`` | DP-SparFL, energy model |
| f_i           | ``cpu_frequency_hz``      | DP-SparFL, energy model |
| χ_i (κ)       | ``effective_capacitance`` | DP-SparFL, energy model |
| τ_max         | ``max_latency_s``         | WPFL eq. (10)       |
| B_dl          | ``downlink_band``         | WPFL leaves it open |
| ρ = J0(2π f_D T) | ``fading_correlation``, ``doppler_hz``, ``round_duration_s`` | Jakes (issue 48) |
| v, f_c        | ``speed_mps``, ``carrier_hz`` | f_D = v·f_c/c     |
| T_on, T_off   | ``mean_on_rounds``, ``mean_off_rounds`` | on/off device chain |
| D             | ``round_deadline_s``      | compute + airtime deadline (issue 48) |
| v_min, v_max, T_p | ``mobility_speed_min_mps``, ``mobility_speed_max_mps``, ``mobility_pause_s`` | random waypoint |
| α, s̄, σ_s, σ_θ | ``mobility_memory``, ``mobility_speed_mean_mps``, ``mobility_speed_std_mps``, ``mobility_direction_std_rad`` | Gauss-Markov mobility |
| d_corr        | ``shadowing_decorrelation_m`` | Gudmundson's shadowing |

The fields of issue 48 (``fading_dynamics``, ``availability``,
``cpu_frequency_distribution``, ``round_deadline_s``, ``mobility``,
``shadowing_decorrelation_m`` and their parameters) make
the world move over rounds; their defaults are the papers' static world (i.i.d.
fading, every device always reachable, one CPU frequency, no round deadline,
static geometry). Their cross-field rules are in
:mod:`rayfl.wireless.config_rules`.
Device availability lives here, beside the device's CPU model, rather than in a
section of its own: an unreachable device is one the base station cannot
hear, its eligibility is read from the same uplink model as its privacy
budget, and a star without a ``wireless`` section has no schedule to repair.
"""

from __future__ import annotations

from typing import Literal

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
    check_moving_world,
    moving_world_fields,
)

__all__ = ["WirelessConfig", "moving_world_fields"]


class WirelessConfig(BaseModel):
    """Wireless channel, modulation and device-cost parameters (frozen).

    Example:
        >>> WirelessConfig().num_subchannels
        10
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    num_subchannels: int = Field(
        10, ge=1, le=100_000, description="K: orthogonal OFDMA subchannels, 1..1e5."
    )
    bandwidth_hz: float = Field(
        1e6,
        gt=0,
        le=1e12,
        description="B: bandwidth of one subchannel in Hz, (0, 1e12].",
    )
    noise_psd_dbm_hz: float = Field(
        -169.0,
        ge=-250.0,
        le=0.0,
        description="N0: noise power spectral density in dBm/Hz, in [-250, 0] "
        "(thermal noise is -174).",
    )
    tx_power_dbm: float = Field(
        23.0,
        ge=-100.0,
        le=80.0,
        description="P^th: maximum client transmit power in dBm, in [-100, 80] "
        "(80 dBm = 100 kW).",
    )
    power_levels: int = Field(
        1,
        ge=1,
        le=100_000,
        description=(
            "L: number of discrete client power levels a scheduler may pick, "
            "integer >= 1; level l in 0..L-1 is tx_power·(l+1)/L in W."
        ),
    )
    bs_tx_power_dbm: float = Field(
        30.0,
        ge=-100.0,
        le=80.0,
        description="P_BS: base-station (downlink) transmit power in dBm, in [-100, 80].",
    )
    distance_min_m: float = Field(
        10.0, gt=0, le=1e7, description="Smallest client-BS distance d_n in m, > 0."
    )
    distance_max_m: float = Field(
        100.0,
        gt=0,
        le=1e7,
        description="Largest client-BS distance d_n in m (cell radius), > min.",
    )
    path_loss_ref_db: float = Field(
        30.0,
        ge=-100.0,
        le=300.0,
        description="Path loss at the 1 m reference distance in dB (30 = gain -30 dB), "
        "in [-100, 300].",
    )
    path_loss_exponent: float = Field(
        2.8, gt=0, le=10.0, description="α: path-loss exponent, in (0, 10]."
    )
    fading: Literal["rayleigh", "rician", "none"] = Field(
        "rayleigh",
        description="Small-scale block fading of |h|^2 (unit mean), redrawn per round.",
    )
    rician_k_db: float = Field(
        0.0,
        ge=-100.0,
        le=100.0,
        description="Rician K-factor in dB (LoS/scatter power), in [-100, 100]; "
        "rician only.",
    )
    shadowing_std_db: float = Field(
        0.0,
        ge=0,
        le=50.0,
        description="Log-normal shadowing std in dB, in [0, 50]; drawn once per "
        "client (evolving as it moves with shadowing_decorrelation_m).",
    )
    qam_order: Literal[4, 16, 64, 256, 1024] = Field(
        256, description="M_ω: square QAM order of eq. (13)."
    )
    snr_threshold_db: float | None = Field(
        None,
        ge=-100.0,
        le=100.0,
        description="Outage threshold on SNR in dB, in [-100, 100]; None means no "
        "outage.",
    )
    effects: Literal["none", "bit_flip", "packet_loss"] = Field(
        "bit_flip",
        description=(
            "What the channel does to received payloads: nothing, i.i.d. bit "
            "flips at the BER (as in the WPFL paper), or whole-packet loss at the PER."
        ),
    )
    cpu_cycles_per_sample: float = Field(
        2e5, gt=0, le=1e15, description="Φ_i: CPU cycles per training sample, > 0."
    )
    cpu_frequency_hz: float = Field(
        2.4e9,
        gt=0,
        le=1e12,
        description="f_i: client CPU frequency in cycles/s (Hz), in (0, 1e12].",
    )
    effective_capacitance: float = Field(
        2e-28,
        ge=0,
        le=1.0,
        description=(
            "χ_i (κ): effective switched capacitance, >= 0; energy per round "
            "χ·cycles·f^2/2 in J (the DP-SparFL paper's energy model)."
        ),
    )
    downlink_band: Literal["subchannel", "full"] = Field(
        "subchannel",
        description=(
            "Bandwidth of the BS broadcast of the global model, and so its noise "
            "power: 'subchannel' = one subchannel, B (noise N0·B); 'full' = the "
            "whole band, K·B (noise N0·K·B, 10·log10(K) dB lower SNR at the same "
            "P_BS). The WPFL paper does not say which; sets the downlink BER and "
            "the broadcast time."
        ),
    )
    downlink_latency: bool = Field(
        False,
        description=(
            "Add the broadcast downlink time 32·abs(w)/(B·log2(1 + SNR_do)) of the "
            "dense global model to each scheduled client's latency_s (the DP-SparFL "
            "paper's delay d = d^do + d^lo + d^up)."
        ),
    )
    max_latency_s: float | None = Field(
        None,
        gt=0,
        description=(
            "τ_max: deadline on a scheduled client's uplink transmission time "
            "(payload bits / Shannon rate; computation not counted, as in the "
            "WPFL paper's constraint C5) in s, > 0; an upload that misses it is "
            "lost (never aggregated, still counted as a release). None = no "
            "deadline. "
            "Scheduling policies do not read it: pass it to a policy's own "
            "parameter (e.g. minmax's max_latency_s, its constraint C5)."
        ),
    )

    fading_dynamics: Literal["iid", "gauss_markov"] = Field(
        "iid",
        description=(
            "How fading evolves over rounds: 'iid' (the papers': redrawn each "
            "round) or 'gauss_markov' (an AR(1) on the complex gain per client "
            "and subchannel, h_t = ρ·h_(t-1) + sqrt(1 - ρ²)·w_t, uplink and "
            "downlink; ρ from fading_correlation, or from doppler_hz or "
            "speed_mps with carrier_hz, and round_duration_s by Jakes' "
            "J0(2π·f_D·T)). gauss_markov needs fading rayleigh or rician."
        ),
    )
    fading_correlation: float | None = Field(
        None,
        ge=-1.0,
        le=1.0,
        description=(
            "ρ: lag-1 (one round) correlation of the complex fading gain, in "
            "[-1, 1]; 0 is i.i.d. fading, 1 a frozen channel. gauss_markov only; "
            "set this or doppler_hz or speed_mps, not several."
        ),
    )
    doppler_hz: float | None = Field(
        None,
        ge=0.0,
        le=1e6,
        description=(
            "f_D: maximum Doppler shift in Hz, in [0, 1e6]; with round_duration_s "
            "gives ρ = J0(2π·f_D·T). gauss_markov only."
        ),
    )
    speed_mps: float | None = Field(
        None,
        ge=0.0,
        le=1e4,
        description=(
            "v: device speed in m/s, in [0, 1e4]; with carrier_hz gives f_D = "
            "v·f_c/c, then ρ with round_duration_s. gauss_markov only."
        ),
    )
    carrier_hz: float | None = Field(
        None,
        gt=0.0,
        le=1e12,
        description="f_c: carrier frequency in Hz, in (0, 1e12]; with speed_mps only.",
    )
    round_duration_s: float | None = Field(
        None,
        gt=0.0,
        le=1e6,
        description=(
            "T: time between two rounds' channels in s, in (0, 1e6]; needed with "
            "doppler_hz or speed_mps (the lag of Jakes' correlation) and with a "
            "moving mobility (how long devices move between two rounds)."
        ),
    )
    availability: Literal["always", "markov", "trace"] = Field(
        "always",
        description=(
            "Which devices the base station can reach each round: 'always' (the "
            "papers'), 'markov' (an on/off Markov chain per client with mean "
            "on and off periods mean_on_rounds and mean_off_rounds, started in "
            "its stationary law) or 'trace' (the client,start,end rows of the "
            "CSV availability_trace, in rounds, FedScale style; "
            "rayfl.wireless.availability_trace). An unreachable client is not "
            "eligible: the observation says so and a schedule naming it is "
            "repaired (the client ignored and reported)."
        ),
    )
    availability_trace: TracePath = None
    availability_trace_absent: TraceAbsent = None
    availability_period_rounds: TracePeriod = None
    mean_on_rounds: MeanOn = None
    mean_off_rounds: MeanOff = None
    cpu_frequency_distribution: CpuLaw = "constant"
    cpu_frequency_low_hz: CpuLow = None
    cpu_frequency_high_hz: CpuHigh = None
    cpu_frequency_sigma: CpuSigma = None
    round_deadline_s: float | None = Field(
        None,
        gt=0,
        le=1e9,
        description=(
            "D: deadline in s on a scheduled client's computation plus "
            "transmission time (its latency_s: local training + uplink airtime, "
            "+ the broadcast when downlink_latency is on), in (0, 1e9]. An upload "
            "that misses it is a straggler: lost (never aggregated, still counted "
            "as a release) and marked in the straggler column. None = no "
            "deadline. Independent of max_latency_s (airtime only, WPFL's C5)."
        ),
    )

    mobility: Literal["static", "random_waypoint", "gauss_markov"] = Field(
        "static",
        description=(
            "How devices move in the cell (the disk of radius distance_max_m), "
            "rayfl.wireless.mobility: 'static' (the papers': distances drawn "
            "once), 'random_waypoint' (straight legs to uniform waypoints at "
            "a speed in [mobility_speed_min_mps, mobility_speed_max_mps], "
            "pausing mobility_pause_s) or 'gauss_markov' (AR(1) speed and "
            "direction with mobility_memory). Distances, path loss and SNR "
            "follow each round; moving needs round_duration_s (T)."
        ),
    )
    mobility_speed_min_mps: SpeedMin = None
    mobility_speed_max_mps: SpeedMax = None
    mobility_pause_s: Pause = None
    mobility_memory: Memory = None
    mobility_speed_mean_mps: SpeedMean = None
    mobility_speed_std_mps: SpeedStd = None
    mobility_direction_std_rad: DirectionStd = None
    shadowing_decorrelation_m: float | None = Field(
        None,
        gt=0,
        le=1e7,
        description=(
            "d_corr: Gudmundson's decorrelation distance of the shadowing in m, "
            "in (0, 1e7]: each round a client's shadowing in dB is "
            "a·s + sqrt(1 - a²)·σ·w with a = exp(-Δd/d_corr) over the path Δd "
            "it moved, started from the once-per-client draw (a static device "
            "keeps it). None = drawn once per client. Needs shadowing_std_db > 0."
        ),
    )

    @model_validator(mode="after")
    def _check_cross_fields(self) -> WirelessConfig:
        """Check rules that involve more than one field."""
        if self.distance_min_m >= self.distance_max_m:
            raise ValueError(
                "wireless.distance_min_m must be < distance_max_m, got "
                f"{self.distance_min_m:g} >= {self.distance_max_m:g}"
            )
        check_moving_world(self)
        return self
