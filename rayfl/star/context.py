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

__all__ = ["StarContext", "config_context", "star_context", "upload_noise_std"]


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
    link = _link(cfg.wireless)
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
            sparsity=float(
                getattr(cfg.algorithm, "sparsity", cfg.compression.sparsify_fraction)
            ),
        ),
    )


def _link(wireless: Any) -> LinkConstants | None:
    """The :class:`LinkConstants` a ``wireless`` section has, by name (None: ideal links)."""
    if wireless is None:
        return None
    names = [f.name for f in fields(LinkConstants) if hasattr(wireless, f.name)]
    return LinkConstants(**{name: getattr(wireless, name) for name in names})


def config_context(cfg: Any, model_dim: int = 1) -> StarContext:
    """The star's context from its config alone, before a system is built.

    What :func:`star_context` gives a run, without building the FL system: the
    link constants of ``wireless``, the algorithm's ``control_names``; the
    model size is ``model_dim`` (not known before the model is built) and the
    DP constants are left unset.
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
