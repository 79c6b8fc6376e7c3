"""The deciders of a D2D run: one per target, each round's neighbors M_n.

``topology.selection_via: once`` repeats the selection made at t = 0 (the
``scheduler.policy`` on the t = 0 observation, :func:`select_neighbors`);
``env`` asks the policy every round, on the target's ``D2DNeighbor-v0``
observation (:meth:`rayfl.d2d.round.D2DRound.observe`). An action is the
neighbor sending on each sub-channel (N = idle); naming the target itself or a
neighbor twice is dropped, a neighbor keeping its lowest sub-channel (the env's
``invalid_action="repair"``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.d2d.selection import decode_assignment, target_policy
from rayfl.schedule import Schedule
from rayfl.system import Decider, Observation

__all__ = ["RepeatDecider", "selection_deciders", "to_schedule"]


class RepeatDecider:
    """The same schedule every round (``selection_via: once``)."""

    observes = False

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule

    def decide(self, t: int, observation: Observation | None) -> Schedule:
        """Return the fixed schedule."""
        return self.schedule

    def state_dict(self) -> dict[str, Any]:
        """Nothing evolves."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore."""


def to_schedule(
    action: Any, eligible: npt.NDArray[np.bool_]
) -> tuple[Schedule, list[int]]:
    """Turn one target's action into its neighbors M_n (ascending) and sub-channels.

    Args:
        action: As for :func:`decode_assignment`.
        eligible: (N,) the candidates G_n.

    Returns:
        The schedule and the ignored clients (the target, or a repeat).

    Example:
        >>> s, ignored = to_schedule(np.array([2, 0, 2, 3]), np.array([0, 1, 1], bool))
        >>> s.clients.tolist(), s.subchannel.tolist(), ignored
        ([2], [0], [0, 2])
    """
    chosen, dropped = decode_assignment(action, eligible)
    neighbors = sorted(chosen)
    return Schedule(
        np.asarray(neighbors, dtype=np.int64),
        np.asarray([chosen[s] for s in neighbors], dtype=np.int64),
    ), [s for _, s in dropped]


def selection_deciders(
    system: Any, policy_decider: Callable[[Any, Callable[..., Any]], Decider]
) -> list[Decider]:
    """Return one decider per target of a D2D ``system`` (an engine), in target order.

    Args:
        system: The run's engine (``D2DRound`` strategy).
        policy_decider: ``policy_decider(policy, to_schedule)`` wraps a policy
            (``rayfl.engine.deciders.PolicyDecider``).
    """
    if system.config.topology.selection_via == "env":
        cfg, n = system.config, system.num_clients
        policies = [
            target_policy(
                cfg.topology,
                n,
                target=t,
                seed=cfg.seed,
                name=cfg.scheduler.policy,
                params=cfg.scheduler.params,
            )
            for t in system.targets
        ]
        return [policy_decider(policy, to_schedule) for policy in policies]
    return [RepeatDecider(schedule) for schedule in system.decision()]
