"""The hierarchy's rules on a whole run config (called by its plug-in's ``check_run``).

Each is something the hierarchy's set-up would refuse or run differently after
Ray started: sections it replaces by its own (``topology.dp``,
``topology.cost``), subnets that do not fit ``data.num_clients``, a cost
model that gives no finite rate. Each raises a one-line ``ValueError`` naming
the field, which the config turns into a :class:`rayfl.config.ConfigError`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["MAX_UPLOAD_PARAMS", "check_cost", "check_sections", "check_subnets"]

MAX_UPLOAD_PARAMS = 10**9
"""Model coordinates assumed when the cost model is checked at validation (the
model's true size is known only once it is built)."""

_FADING = (1e-12, 1.0, 100.0)
"""Rayleigh power gains |u|² the cost model is checked at: a draw below 1e-12 or
above 100 has probability about 1e-12 and e^-100."""


def check_sections(cfg: Any) -> None:
    """Sections a hierarchical run replaces by its own (topology.dp, .cost...)."""
    if cfg.privacy.mechanism != "none" or cfg.compression.quantize_bits:
        raise ValueError(
            "topology.kind=hierarchical has its own DP (topology.dp): set "
            "privacy.mechanism=none and no compression"
        )
    if cfg.wireless is not None:
        raise ValueError(
            "topology.kind=hierarchical uses topology.cost for the device→edge "
            "links; remove the `wireless` section"
        )


def check_subnets(topology: Any, num_clients: int, seed: int) -> None:
    """The hierarchy's subnets, as ``rayfl.hierarchy.topology.build_topology`` makes them.

    ``assignment: nearest`` draws the device positions from the seed; it is
    checked by building the topology when that is cheap (I·N ≤ 10^7 distances).
    """
    num_edges = 1 if topology.baseline == "pedpfl" else topology.num_edges
    if num_edges > num_clients:
        raise ValueError(
            f"topology.num_edges ({num_edges}) must be <= data.num_clients "
            f"({num_clients}): every edge needs a device"
        )
    sizes = topology.clients_per_edge
    if topology.baseline != "pedpfl" and sizes is not None:
        total = sizes * num_edges if isinstance(sizes, int) else sum(sizes)
        if total != num_clients:
            raise ValueError(
                f"topology.clients_per_edge sums to {total} over {num_edges} edges "
                f"but data.num_clients={num_clients}: they must be equal"
            )
    nearest = sizes is None and topology.assignment == "nearest"
    if nearest and topology.baseline != "pedpfl" and num_clients * num_edges <= 10**7:
        from rayfl.hierarchy.topology import build_topology

        build_topology(topology, num_clients, seed)


def check_cost(cost: Any) -> None:
    """The cost model gives finite, positive rates, times and energies.

    Checked at the nearest and farthest device, at the fading extremes
    ``_FADING``, for an upload of ``MAX_UPLOAD_PARAMS`` coordinates.
    """
    from rayfl.hierarchy.cost import uplink_rate_bps
    from rayfl.wireless.units import dbm_to_w

    bits = MAX_UPLOAD_PARAMS * cost.bits_per_param
    fields = (
        "topology.cost (tx_power_dbm, noise_psd_dbm_hz, ref_gain_db, bandwidth_hz, "
        "path_loss_exponent, distance_*_m)"
    )
    corners = [
        (d, f) for d in (cost.distance_min_m, cost.distance_max_m) for f in _FADING
    ]
    for d, fading in corners:
        with np.errstate(all="ignore"):  # an overflow is the finding, said below
            rate = float(uplink_rate_bps(cost, distance_m=d, fading=fading))
            power_w = float(dbm_to_w(cost.tx_power_dbm))
        energy = power_w * bits / rate if rate > 0 else 0.0
        if not (math.isfinite(rate) and rate > 0 and math.isfinite(energy)):
            raise ValueError(
                f"{fields} give an uplink rate of {rate:g} bit/s at {d:g} m "
                f"(fading {fading:g}): the upload time and energy would not be "
                "finite numbers"
            )
    backhaul = float(dbm_to_w(cost.backhaul_power_dbm)) * bits / cost.backhaul_rate_bps
    if not math.isfinite(backhaul):
        raise ValueError(
            "topology.cost.backhaul_power_dbm and backhaul_rate_bps give a "
            "non-finite backhaul energy"
        )
