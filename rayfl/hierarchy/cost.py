"""Communication energy and delay of the hierarchy (spec §2.7, paper App. D).

Device→edge uplinks use the wireless model of ``rayfl.wireless.channel``
(log-distance path loss, Rayleigh fading, Shannon rate); edge→cloud is a wired
backhaul of fixed rate and power.

Symbol table:

| paper symbol | code name |
|---|---|
| p_i, W, N_0 | ``tx_power_dbm``, ``bandwidth_hz``, ``noise_psd_dbm_hz`` |
| β_0, α̂, d_i | ``ref_gain_db``, ``path_loss_exponent``, ``distance_m`` |
| R_j = W log2(1 + p_j abs(h_j)²/(N_0 W)) | ``uplink_rate_bps`` |
| M Q | ``payload_bits`` |
| p̄, R̄ | ``backhaul_power_dbm``, ``backhaul_rate_bps`` |
| E_{c,Loc}, Δ_{c,Loc}, E_Glob, Δ_Glob | ``local_cost``, ``global_cost`` |

Implementation details:
    1. Per-upload time M Q / R_j and energy p_j M Q / R_j; subnet uplinks are
       sequential (TDMA): Δ_{c,Loc} = Σ_j M Q / R_j (spec §2.7).
    2. E_Glob = Σ_c [Σ_j p_j MQ/R_j + p̄ MQ/R̄], Δ_Glob = Σ_c [Σ_j MQ/R_j + 2 MQ/R̄]
       (device uplinks + edge↔cloud round trip), spec §2.7 verbatim (the sum
       over subnets in Δ_Glob is the spec's formula, i.e. edges do not overlap).
    3. The ledger uses the realised fading (redrawn per transmission from
       (seed, "hier_fading", period, device)); the controller uses the rate at
       the mean channel abs(u)² = 1 (spec: "may use expected rates").
    4. PEDPFL (one aggregator, spec §6): no backhaul hop (``backhaul=False``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rayfl.hierarchy.config import CostConfig
from rayfl.wireless.channel import noise_power_w, shannon_rate_bps, snr_linear
from rayfl.wireless.units import db_to_linear, dbm_to_w

__all__ = ["CostModel", "uplink_rate_bps"]


def uplink_rate_bps(
    cost: CostConfig,
    *,
    distance_m: npt.ArrayLike,
    fading: npt.ArrayLike,
) -> npt.NDArray[np.float64]:
    """Return R_j = W log2(1 + p abs(h)²/(N_0 W)) with abs(h)² = 10^{β/10} abs(u)².

    β [dB] = β_0 − 10 α̂ log10(d/d_0), d_0 = 1 m (paper App. D).

    Example:
        >>> from rayfl.hierarchy.config import CostConfig
        >>> round(float(uplink_rate_bps(CostConfig(), distance_m=10.0, fading=1.0)) / 1e6, 1)
        23.1
    """
    d = np.asarray(distance_m, dtype=np.float64)
    gain_db = cost.ref_gain_db - 10 * cost.path_loss_exponent * np.log10(d)
    gain = db_to_linear(gain_db) * np.asarray(fading, dtype=np.float64)
    snr = snr_linear(
        tx_power_w=float(dbm_to_w(cost.tx_power_dbm)),
        gain_linear=gain,
        noise_power_w=noise_power_w(
            noise_psd_dbm_hz=cost.noise_psd_dbm_hz, bandwidth_hz=cost.bandwidth_hz
        ),
    )
    return shannon_rate_bps(bandwidth_hz=cost.bandwidth_hz, snr_linear=snr)


class CostModel:
    """Energy and delay of uploads in a hierarchy.

    Args:
        cost: The ``topology.cost`` section.
        distance_m: Device-edge distance per device (I,).
        model_dim: M, coordinates per upload.
        backhaul: Whether global aggregations cross an edge→cloud link.
    """

    def __init__(
        self,
        cost: CostConfig,
        *,
        distance_m: npt.NDArray[np.float64],
        model_dim: int,
        backhaul: bool = True,
    ) -> None:
        self.cost = cost
        self.distance_m = np.asarray(distance_m, dtype=np.float64)
        self.payload_bits = float(model_dim * cost.bits_per_param)
        self.tx_power_w = float(dbm_to_w(cost.tx_power_dbm))
        self.backhaul_time_s = (
            self.payload_bits / cost.backhaul_rate_bps if backhaul else 0.0
        )
        self.backhaul_energy_j = (
            float(dbm_to_w(cost.backhaul_power_dbm)) * self.backhaul_time_s
        )
        expected = uplink_rate_bps(cost, distance_m=self.distance_m, fading=1.0)
        #: Expected per-upload time and energy of each device (controller).
        self.expected_time_s = self.payload_bits / expected
        self.expected_energy_j = self.tx_power_w * self.expected_time_s

    def uploads(
        self, devices: npt.ArrayLike, fading: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Return (time_s, energy_j) of one upload by each device, realised fading."""
        ids = np.asarray(devices, dtype=np.int64)
        rate = uplink_rate_bps(
            self.cost, distance_m=self.distance_m[ids], fading=fading
        )
        time_s = self.payload_bits / rate
        return time_s, self.tx_power_w * time_s

    def local_cost(
        self, time_s: npt.ArrayLike, energy_j: npt.ArrayLike
    ) -> tuple[float, float]:
        """Return (E_{c,Loc}, Δ_{c,Loc}) of one subnet's uploads (detail 1)."""
        return float(np.sum(energy_j)), float(np.sum(time_s))

    def global_hop(self) -> tuple[float, float]:
        """Return (energy_j, delay_s) one edge adds at a global aggregation."""
        return self.backhaul_energy_j, 2 * self.backhaul_time_s
