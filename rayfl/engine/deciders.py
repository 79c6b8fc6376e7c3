"""Deciders: one per decision unit, an observation in and that unit's schedule out.

:class:`PolicyDecider` wraps a scheduling policy (any callable ``policy(obs) ->
action``) and the topology's action rules (``action → Schedule``). Its state in
a checkpoint is the policy's plain-data attributes (queues, averages,
generators: ``rayfl.rundir.checkpoint.plain_attributes``); the wiring (spaces, context)
is rebuilt from the config on resume.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rayfl.rundir.checkpoint import plain_attributes, restore_attributes
from rayfl.schedule import Schedule
from rayfl.system import Observation

__all__ = ["PolicyDecider"]


class PolicyDecider:
    """A policy deciding one unit's schedule from its observation.

    Args:
        policy: Callable ``policy(observation) -> action``.
        to_schedule: ``to_schedule(action, eligible) -> (Schedule, ignored)``,
            e.g. ``rayfl.star.actions.StarActions.to_schedule``.
        observe: ``observe(t) -> observation``, for a policy that reads a few
            keys the decider builds itself (then the system is not observed);
            None: the loop passes the system's observation.
    """

    def __init__(
        self,
        policy: Any,
        to_schedule: Callable[[Any, np.ndarray], tuple[Schedule, list[int]]],
        observe: Callable[[int], Observation] | None = None,
    ) -> None:
        self.policy = policy
        self.to_schedule = to_schedule
        self.observe = observe
        #: Whether :meth:`decide` needs the system's observation.
        self.observes = observe is None
        #: The last decision's named-but-ineligible clients.
        self.ignored: list[int] = []

    def decide(self, t: int, observation: Observation | None) -> Schedule:
        """Return round ``t``'s schedule: the policy's action, made a schedule."""
        if self.observe is not None:
            observation = self.observe(t)
        if observation is None:
            raise ValueError("a policy decider needs the unit's observation")
        action = self.policy(observation)
        schedule, self.ignored = self.to_schedule(
            action, np.asarray(observation["eligible"]) > 0.5
        )
        return schedule

    def state_dict(self) -> dict[str, Any]:
        """Return the policy's plain-data attributes."""
        return plain_attributes(self.policy)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` onto the rebuilt policy.

        A checkpoint of the former built-in rules holds only ``{"cursor": c}``:
        it becomes the ``round_robin`` cursor (c mod N); ``all`` and ``random``
        had no state.
        """
        if set(state) == {"cursor"}:
            if not hasattr(self.policy, "cursor"):
                return
            state = {"cursor": int(state["cursor"]) % self.policy.num_clients}
        restore_attributes(self.policy, state)
