"""A D2D lane's run on the driver, and which configs the lanes can run.

:class:`LaneRun` is what :class:`rayfl.d2d.lanes.D2DLanes` keeps per lane (the
seed, the layout, the selection M_n, π and ω⁰); :func:`first_selection` draws
its t = 0 selection as the engine does; :func:`check_d2d_lanes` refuses the
configs the lanes cannot run exactly (listed in :mod:`rayfl.d2d.lanes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.em import EMState
from rayfl.d2d.motion import D2DMotion
from rayfl.d2d.selection import (
    D2DLayout,
    Selection,
    decode_assignment,
    round_observation,
    selection_observation,
    target_policy,
)
from rayfl.observation import ObservationTracker

__all__ = ["LaneRun", "check_d2d_lanes", "first_selection"]


def first_selection(
    cfg: Any,
    layout: D2DLayout,
    data_size: npt.ArrayLike,
    spaces: tuple[Any, Any] | None = None,
    motion: D2DMotion | None = None,
) -> tuple[Selection, dict[str, npt.NDArray[np.float32]]]:
    """The t = 0 selection of the run's target, and its first observation.

    :func:`rayfl.d2d.selection.select_neighbors` for one target, keeping the
    observation (its P^err integrals are the costly part of a restart).
    ``spaces``: the policy's spaces (:func:`rayfl.d2d.selection.selection_spaces`)
    if the caller keeps them; ``motion``: the lane's (its devices' round-0
    availability and compute times, when the topology has them).
    """
    topo, seed = cfg.topology, int(cfg.seed)
    n, (target,) = layout.num_nodes, layout.targets
    policy = target_policy(
        topo,
        n,
        target=target,
        seed=seed,
        name=cfg.scheduler.policy,
        params=cfg.scheduler.params,
        spaces_=spaces,
    )
    first, error = selection_observation(layout, target, topo, seed=seed, motion=motion)
    obs = round_observation(
        layout,
        first,
        ObservationTracker(n),
        None,
        topo,
        data_size=data_size,
        seed=seed,
        round=0,
        motion=motion,
    )
    chosen, _ = decode_assignment(policy(obs), obs["eligible"] > 0.5)
    neighbors = tuple(sorted(chosen))
    selection = Selection(target, neighbors, tuple(chosen[s] for s in neighbors), error)
    return selection, first


def check_d2d_lanes(config: Any) -> None:
    """Raise ``ValueError`` naming why ``config``'s D2D runs cannot share lane hosts."""
    topo = config.topology
    if not isinstance(topo, D2DTopologyConfig):
        raise ValueError(f"D2D lanes need topology.kind=d2d, got {topo.kind}")
    if topo.method != "pfedwn":
        raise ValueError(f"D2D lanes need topology.method=pfedwn, got {topo.method!r}")
    if topo.target == "all":
        raise ValueError("D2D lanes need one target per run, got topology.target=all")
    if topo.on_loss == "stale" and topo.link_model != "ideal":
        raise ValueError(
            "D2D lanes need topology.on_loss=renormalize with a lossy link, got "
            f"on_loss=stale and link_model={topo.link_model!r}"
        )
    if config.model.kind not in ("mlr", "mlp"):
        raise ValueError(
            f"D2D lanes need model.kind mlr or mlp, got {config.model.kind!r}"
        )


@dataclass
class LaneRun:
    """One lane's run on the driver: seed, layout, M_n, π and ω⁰."""

    seed: int
    layout: D2DLayout
    selection: Selection
    em: EMState
    init: npt.NDArray[np.float32]
    #: The target's t = 0 (CCM) observation (:func:`selection_observation`).
    first: dict[str, npt.NDArray[np.float32]]
    #: Round t's layout and P^err (the engine's, :mod:`rayfl.d2d.motion`).
    motion: D2DMotion

    @property
    def target(self) -> int:
        """The run's target n."""
        return self.selection.target
