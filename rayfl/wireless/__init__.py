"""Wireless channel models: OFDMA uplink, QAM errors, device costs and D2D links."""

from rayfl.wireless.channel import (
    ChannelState,
    WirelessChannel,
    fading_power_gain,
    noise_power_w,
    path_loss_db,
    place_clients,
    shannon_rate_bps,
    snr_linear,
)
from rayfl.wireless.config import WirelessConfig
from rayfl.wireless.cost import (
    computation_energy_j,
    computation_latency_s,
    transmission_time_s,
    uplink_energy_j,
    uplink_latency_s,
)
from rayfl.wireless.d2d import (
    d2d_gain_linear,
    d2d_sinr_linear,
    free_space_reference_loss_db,
    pairwise_distances_m,
    place_nodes_square,
)
from rayfl.wireless.effects import UplinkOutcome, drop_packets, flip_bits, uplink_round
from rayfl.wireless.modulation import (
    element_error_probability,
    outage,
    packet_error_rate,
    qam_bit_error_rate,
)
from rayfl.wireless.units import (
    db_to_linear,
    dbm_to_w,
    linear_to_db,
    power_levels_w,
    w_to_dbm,
)

__all__ = [
    "ChannelState",
    "UplinkOutcome",
    "WirelessChannel",
    "WirelessConfig",
    "computation_energy_j",
    "computation_latency_s",
    "d2d_gain_linear",
    "d2d_sinr_linear",
    "db_to_linear",
    "dbm_to_w",
    "drop_packets",
    "element_error_probability",
    "fading_power_gain",
    "flip_bits",
    "free_space_reference_loss_db",
    "linear_to_db",
    "noise_power_w",
    "outage",
    "packet_error_rate",
    "pairwise_distances_m",
    "path_loss_db",
    "place_clients",
    "place_nodes_square",
    "power_levels_w",
    "qam_bit_error_rate",
    "shannon_rate_bps",
    "snr_linear",
    "transmission_time_s",
    "uplink_energy_j",
    "uplink_latency_s",
    "uplink_round",
    "w_to_dbm",
]
