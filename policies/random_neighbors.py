"""Random neighbor selection: a baseline for the D2D selection decision.

``random`` schedules min(K, #eligible) clients — in the D2D network of pFedWN
(N = 11 nodes, F = 14 sub-channels) that is every neighbor, so it cannot serve
as a random *selection*. This policy picks each eligible node independently
with probability ``p`` (an Erdős–Rényi draw of M_n), keeps at most F (a
uniformly random subset of them) and gives the chosen ones sub-channels by the
Hungarian matching on ``channel_gain``, as ``channel_threshold`` does.

Symbol table: p → ``probability``, M_n → the non-idle entries of the action,
abs(F) → ``num_subchannels``.

Implementation details:
    1. Draws come from the policy's own generator (``reset(seed)``), one
       uniform per node per call, so the draw for node s does not depend on the
       others' eligibility.
    2. Works on any observation with ``channel_gain`` and ``eligible`` (the
       OFDMA scheduling env too, where it may leave sub-channels idle).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from policies.base import Observation, Policy, Probability


class RandomNeighborsPolicy(Policy):
    """Select each eligible neighbor independently with probability ``p``.

    Args:
        observation_space: A Dict with ``channel_gain`` (N, F) and ``eligible``.
        action_space: ``MultiDiscrete([N + 1] * F)`` (or its Dict form).
        probability: p in [0, 1] (0.5: every subset equally likely).

    Example:
        >>> obs_space = spaces.Dict({
        ...     "channel_gain": spaces.Box(-np.inf, np.inf, (3, 2)),
        ...     "eligible": spaces.Box(0, 1, (3,))})
        >>> policy = RandomNeighborsPolicy(
        ...     obs_space, spaces.MultiDiscrete([4, 4]), probability=1.0)
        >>> obs = {"channel_gain": np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]]),
        ...        "eligible": np.array([1, 1, 0])}
        >>> policy(obs).tolist()
        [1, 0]
    """

    topologies: ClassVar[frozenset[str]] = frozenset({"d2d"})
    #: p in [0, 1].
    tunable: ClassVar[Mapping[str, tuple[float, float, float]]] = {
        "probability": (0.5, 0.0, 1.0)
    }

    allows_idle = True

    def __init__(
        self,
        observation_space: spaces.Space[Any],
        action_space: spaces.Space[Any],
        *,
        probability: Probability = 0.5,
        context: Any = None,
    ) -> None:
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"probability must be in [0, 1], got {probability}")
        self.probability = float(probability)
        super().__init__(observation_space, action_space, context=context)

    def schedule(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Return the sub-channel of each randomly selected neighbor (N = idle)."""
        eligible = self.eligible_mask(obs)
        draws = self.np_random.random(self.num_clients)
        chosen = np.flatnonzero(eligible & (draws < self.probability))
        if chosen.size > self.num_subchannels:
            chosen = np.sort(
                self.np_random.choice(chosen, self.num_subchannels, replace=False)
            )
        return self.assign_subchannels(self.field(obs, "channel_gain"), chosen)
