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
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["WirelessConfig"]


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
        description="Log-normal shadowing std in dB, in [0, 50]; drawn once per client.",
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

    @model_validator(mode="after")
    def _check_cross_fields(self) -> WirelessConfig:
        """Check rules that involve more than one field."""
        if self.distance_min_m >= self.distance_max_m:
            raise ValueError(
                "wireless.distance_min_m must be < distance_max_m, got "
                f"{self.distance_min_m:g} >= {self.distance_max_m:g}"
            )
        return self
