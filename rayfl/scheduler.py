"""Built-in client selection used by the runner: all, random, round-robin.

Selects ``k`` clients among the eligible ones each round (partial participation),
where ``k`` is ``scheduler.clients_per_round``, else the number of subchannels of
the wireless model, else all clients. With a wireless model, the i-th selected
client (by id) gets subchannel i at the maximum transmit power.

| policy | rule |
|--------|------|
| ``all`` | every eligible client (capped at k by id order when k is set) |
| ``random`` | k eligible clients uniformly without replacement, from (seed, "schedule", t) |
| ``round_robin`` | the k eligible clients that come next in a cyclic order of ids |
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rayfl.config import RunConfig
from rayfl.schedule import Schedule
from rayfl.scheduler_config import BUILTIN_POLICIES
from rayfl.seeding import rng_for

if TYPE_CHECKING:
    from rayfl.system import System as FLSystem

__all__ = ["BUILTIN_POLICIES", "Scheduler"]


class Scheduler:
    """Turns a policy name into one :class:`Schedule` per round.

    Args:
        config: The run config.
        system: The system (for eligibility and the client count).

    Raises:
        ValueError: For an unknown policy name.
    """

    def __init__(self, config: RunConfig, system: FLSystem) -> None:
        policy = config.scheduler.policy
        if policy not in BUILTIN_POLICIES:
            raise ValueError(
                f"scheduler.policy must be one of {', '.join(BUILTIN_POLICIES)}; "
                f"got {policy!r}"
            )
        self.config = config
        self.system = system
        self.policy = policy
        self.cursor = 0
        n = system.num_clients
        wireless = config.wireless
        k = config.scheduler.clients_per_round
        if k is None and wireless is not None:
            k = wireless.num_subchannels
        self.k = n if k is None else min(k, n)
        if wireless is not None and self.k > wireless.num_subchannels:
            raise ValueError(
                f"scheduler.clients_per_round ({self.k}) exceeds "
                f"wireless.num_subchannels ({wireless.num_subchannels})"
            )

    def schedule(self, round: int) -> Schedule:
        """Return round ``round``'s schedule."""
        eligible = np.flatnonzero(self.system.uplink.eligible())
        k = min(self.k, len(eligible))
        if self.policy == "all":
            chosen = eligible[:k]
        elif self.policy == "random":
            rng = rng_for(self.config.seed, "schedule", round=round)
            chosen = rng.choice(eligible, size=k, replace=False)
        else:
            n = self.system.num_clients
            order = (np.arange(n) + self.cursor) % n
            order = order[np.isin(order, eligible)]
            chosen = order[:k]
            if k:
                self.cursor = int(chosen[-1]) + 1
        chosen = np.sort(chosen)
        if self.config.wireless is None:
            return Schedule.of(chosen)
        return Schedule(chosen, subchannel=np.arange(len(chosen)))
