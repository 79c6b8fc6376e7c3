"""Cross-section rules of a run config that the runtime would otherwise break.

Each rule here is something that used to be accepted at validation and then
either failed after Ray started or ran differently from what was asked (issue
45): a field the chosen topology does not read, a value the runtime capped, or
a combination the hierarchy's or the uplink's set-up refuses. They run in
:class:`rayfl.config.RunConfig`'s cross-section validator, so each is a one-line
:class:`rayfl.config.ConfigError` naming the field, before Ray starts.

The rule behind them: a value the user set is applied as given or refused,
never replaced or dropped without a word.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rayfl.text_checks import check_text

__all__ = ["MAX_UPLOAD_PARAMS", "check_semantics"]

MAX_UPLOAD_PARAMS = 10**9
"""Model coordinates assumed when the hierarchy's cost model is checked at
validation (the model's true size is known only once it is built)."""

_FADING = (1e-12, 1.0, 100.0)
"""Rayleigh power gains |u|² the cost model is checked at: a draw below 1e-12 or
above 100 has probability about 1e-12 and e^-100."""

_UNUSED_K = {
    "hierarchical": "each edge's scheduler.policy chooses its devices, at most "
    "topology.scheduling.subchannels_per_edge per edge per global round "
    "(topology.clients_per_edge or topology.assignment sets the subnets)",
    "d2d": "scheduler.policy selects each target's neighbors (channel_threshold: "
    "P^err < topology.epsilon) and every selected neighbor sends each round",
}


def check_semantics(cfg: Any) -> None:
    """Apply every rule of this module to a validated ``RunConfig``.

    Raises:
        ValueError: On the first rule broken, one line naming the field(s).
    """
    check_text("name", cfg.name)
    _check_topology_fields(cfg)
    if cfg.topology.kind == "hierarchical":
        _check_subnets(cfg.topology, cfg.data.num_clients, cfg.seed)
        _check_cost(cfg.topology.cost)
    _check_quantizer(cfg)
    _check_calibration(cfg)


def _check_topology_fields(cfg: Any) -> None:
    """``eval_clients`` and ``scheduler.clients_per_round``: applied or refused."""
    kind, n = cfg.topology.kind, cfg.data.num_clients
    if cfg.eval_clients is not None:
        if kind != "flat":
            evaluated = {"hierarchical": "every device", "d2d": "its targets"}
            raise ValueError(
                f"eval_clients is read by the star only: topology.kind={kind} "
                f"evaluates {evaluated.get(kind, 'its own clients')}; remove "
                "eval_clients"
            )
        if cfg.eval_clients > n:
            raise ValueError(
                f"eval_clients must be <= data.num_clients ({n}), got "
                f"{cfg.eval_clients} (null evaluates every client)"
            )
    k = cfg.scheduler.clients_per_round
    if k is not None and kind in _UNUSED_K:
        raise ValueError(
            f"scheduler.clients_per_round={k} is not read on topology.kind={kind}: "
            f"{_UNUSED_K[kind]}; remove it"
        )


def _check_subnets(topology: Any, num_clients: int, seed: int) -> None:
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


def _check_cost(cost: Any) -> None:
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


def _check_quantizer(cfg: Any) -> None:
    """``compression.quantize_range: clip`` quantizes in ±(C + 3σ): it needs C."""
    compression = cfg.compression
    if (
        compression.quantize_bits is not None
        and compression.quantize_range == "clip"
        and cfg.privacy.clip_norm is None
    ):
        raise ValueError(
            "compression.quantize_bits with quantize_range=clip (the default) "
            "quantizes in ±(C + 3σ) and needs privacy.clip_norm: set "
            "privacy.clip_norm=C or compression.quantize_range=minmax"
        )


def _check_calibration(cfg: Any) -> None:
    """What the uplink's noise calibration (``rayfl.uplink``) needs from the config.

    A WPFL DP baseline calibrates its own noise (``algorithm.dp_mechanism``);
    otherwise ``privacy.calibration: wpfl`` (Theorem 1 of the WPFL paper) needs
    the quantizer's R.
    """
    privacy = cfg.privacy
    if privacy.placement == "edge":  # the hierarchy has its own DP (topology.dp)
        raise ValueError(
            "privacy.placement=edge needs edge servers adding the noise: "
            f"topology.kind={cfg.topology.kind} has none here (the hierarchy's "
            "edges use topology.dp); use client or cloud"
        )
    mechanism = getattr(cfg.algorithm, "dp_mechanism", None)
    if mechanism is not None:
        from rayfl.algorithms.wpfl_sections import check_mechanism_sections

        check_mechanism_sections(cfg)
        if mechanism != "proposed":
            return
    formula = (
        privacy.mechanism != "none"
        and privacy.noise_std is None
        and privacy.noise_multiplier is None
        and privacy.epsilon is not None
    )
    if formula and privacy.calibration == "wpfl" and not cfg.compression.quantize_bits:
        raise ValueError(
            "privacy.calibration=wpfl (Theorem 1 of the WPFL paper) needs the "
            "quantizer's R: set compression.quantize_bits, or another "
            "privacy.calibration"
        )
