"""The star's :class:`rayfl.observation.SystemContext`: the run constants its policy may read."""

from __future__ import annotations

from typing import Any

from rayfl.observation import (
    LinkConstants,
    PrivacyConstants,
    SystemContext,
    TrainingConstants,
)

__all__ = ["star_context"]


def star_context(system: Any) -> SystemContext:
    """Return the context of a built star system (its config, model size, uplink).

    Args:
        system: The star's system (``config``, ``dim``, ``uplink``).
    """
    cfg = system.config
    wireless = cfg.wireless
    link = None
    if wireless is not None:
        link = LinkConstants(
            bandwidth_hz=float(wireless.bandwidth_hz),
            noise_psd_dbm_hz=float(wireless.noise_psd_dbm_hz),
            tx_power_dbm=float(wireless.tx_power_dbm),
            bs_tx_power_dbm=float(wireless.bs_tx_power_dbm),
            qam_order=int(wireless.qam_order),
            max_latency_s=wireless.max_latency_s,
            downlink_latency=bool(wireless.downlink_latency),
            cpu_cycles_per_sample=float(wireless.cpu_cycles_per_sample),
            cpu_frequency_hz=float(wireless.cpu_frequency_hz),
            effective_capacitance=float(wireless.effective_capacitance),
        )
    beta = system.uplink.participation_target()
    return SystemContext(
        topology="star",
        seed=int(cfg.seed),
        rounds=int(cfg.rounds),
        model_dim=int(system.dim),
        link=link,
        privacy=PrivacyConstants(
            participation_target=None if beta is None else tuple(map(float, beta))
        ),
        training=TrainingConstants(
            local_steps=cfg.algorithm.local_steps, batch_size=cfg.algorithm.batch_size
        ),
    )
