"""The star's :class:`rayfl.observation.SystemContext`: the run constants its policy may read."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from rayfl.observation import (
    LinkConstants,
    PrivacyConstants,
    SystemContext,
    TrainingConstants,
)

__all__ = [
    "StarContext",
    "config_context",
    "star_context",
    "upload_bits",
    "upload_noise_std",
]


@dataclass(frozen=True)
class StarContext(SystemContext):
    """The star's context: :class:`SystemContext` plus the algorithm's controls.

    Attributes:
        control_names: The per-client controls the run's algorithm declares, in
            the column order of the action's ``controls`` (FedAvg: ``("lr",)``),
            which ``minmax`` fills without a hand parameter.
    """

    control_names: tuple[str, ...] = ()


def upload_noise_std(uplink: Any) -> float:
    """σ_DP of one upload: the clients' Gaussian σ, else the server's (central DP), else 0."""
    return float(uplink.noise_std or uplink.server_noise_std or 0.0)


def star_context(system: Any) -> StarContext:
    """Return the context of a built star system (its config, model size, uplink).

    Args:
        system: The star's system (``config``, ``dim``, ``uplink``).
    """
    cfg = system.config
    sparsity = float(
        getattr(cfg.algorithm, "sparsity", cfg.compression.sparsify_fraction)
    )
    link = _link(cfg.wireless, upload_bits(cfg, int(system.dim), sparsity))
    beta = system.uplink.participation_target()
    from rayfl.algorithms.registry import algorithm_controls

    return StarContext(
        topology="star",
        seed=int(cfg.seed),
        rounds=int(cfg.rounds),
        model_dim=int(system.dim),
        link=link,
        control_names=tuple(algorithm_controls(cfg.algorithm)),
        privacy=PrivacyConstants(
            clip_norm=cfg.privacy.clip_norm,
            noise_std=upload_noise_std(system.uplink),
            participation_target=None if beta is None else tuple(map(float, beta)),
        ),
        training=TrainingConstants(
            local_steps=cfg.algorithm.local_steps,
            local_epochs=getattr(cfg.algorithm, "local_epochs", None),
            batch_size=cfg.algorithm.batch_size,
            sparsity=sparsity,
        ),
    )


def upload_bits(cfg: Any, dim: int, sparsity: float) -> float:
    """Z, the expected bits of one upload: ``sparsity``·abs(w) values at the quantizer's bits.

    As the surrogate charges it (:func:`rayfl.compression.payload.payload_size_bits`
    of the ``compression`` section: 32 bits a value unquantized, indices when
    sparse); the dense FedAvg upload is 32·abs(w).
    """
    from rayfl.compression.payload import payload_size_bits

    return float(
        payload_size_bits(
            dim=dim,
            carried=dim * sparsity,
            bits_per_element=cfg.compression.quantize_bits or 32,
            sparse=sparsity < 1,
        )
    )


def _link(wireless: Any, upload: float | None = None) -> LinkConstants | None:
    """The :class:`LinkConstants` of a ``wireless`` section (None: ideal links).

    The fields the section has by name, plus what is derived from it: the
    fading's ρ (:func:`rayfl.wireless.world.fading_rho`; 1 with ``fading:
    none``, whose seen gain never fades), its Rician K-factor (linear; 0 unless
    ``fading: rician``), ``upload`` bits and the airtime model
    (:func:`rayfl.wireless.cost.uplink_airtime_s`).
    """
    if wireless is None:
        return None
    from rayfl.wireless.cost import uplink_airtime_s
    from rayfl.wireless.units import db_to_linear
    from rayfl.wireless.world import fading_rho

    names = [f.name for f in fields(LinkConstants) if hasattr(wireless, f.name)]
    rician = wireless.fading == "rician"
    return LinkConstants(
        **{name: getattr(wireless, name) for name in names},
        fading_rho=1.0 if wireless.fading == "none" else fading_rho(wireless),
        rician_k=float(db_to_linear(wireless.rician_k_db)) if rician else 0.0,
        upload_bits=upload,
        airtime_model=uplink_airtime_s,
    )


def config_context(cfg: Any, model_dim: int = 1) -> StarContext:
    """The star's context from its config alone, before a system is built.

    What :func:`star_context` gives a run, without building the FL system: the
    link constants of ``wireless``, the algorithm's ``control_names``; the
    model size is ``model_dim`` (not known before the model is built), so the
    link's ``upload_bits`` and the DP constants are left unset.
    """
    from rayfl.algorithms.registry import algorithm_controls

    return StarContext(
        topology="star",
        seed=int(cfg.seed),
        rounds=int(cfg.rounds),
        model_dim=model_dim,
        link=_link(cfg.wireless),
        control_names=tuple(algorithm_controls(cfg.algorithm)),
    )
