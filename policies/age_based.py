"""Age-based scheduling: the K stalest eligible clients, largest staleness first.

A largest-age-first baseline after Yang, Arafa, Quek & Poor, "Age-Based
Scheduling Policy for Federated Learning in Mobile Edge Networks", ICASSP 2020,
which prioritises clients by the age of their last delivered update (their
policy also weighs channel quality; this baseline uses the age alone).

Symbol table: N → ``num_clients``, K → ``num_subchannels``, age of update of
client n (rounds since its last delivered update) → ``obs["staleness"][n]``.

Implementation details:
    1. Eligible clients are ranked by staleness, largest first, ties broken by
       the lower client id; the first min(K, #eligible) are scheduled.
    2. The chosen clients get subchannels by the Hungarian method maximising
       Σ gain [dB].
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import Observation, Policy


class AgeBasedPolicy(Policy):
    """Schedule the K eligible clients with the largest staleness.

    Example:
        >>> from gymnasium import spaces
        >>> box = spaces.Box(0, np.inf, (4,))
        >>> obs_space = spaces.Dict({
        ...     "channel_gain": spaces.Box(-np.inf, np.inf, (4, 2)),
        ...     "eligible": spaces.Box(0, 1, (4,)), "staleness": box})
        >>> policy = AgeBasedPolicy(obs_space, spaces.MultiDiscrete([5, 5]))
        >>> obs = {"channel_gain": np.zeros((4, 2)), "eligible": np.ones(4),
        ...        "staleness": np.array([1.0, 5.0, 3.0, 5.0])}
        >>> sorted(policy(obs).tolist())
        [1, 3]
    """

    topologies: ClassVar[frozenset[str]] = frozenset({"star", "hierarchical"})

    required_keys: ClassVar[tuple[str, ...]] = ("channel_gain", "eligible", "staleness")

    def schedule(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Pick the stalest eligible clients (ties: lower id), match subchannels."""
        staleness = self.field(obs, "staleness")
        eligible = np.flatnonzero(self.eligible_mask(obs))
        ranked = eligible[np.lexsort((eligible, -staleness[eligible]))]
        chosen = ranked[: self.num_subchannels]
        return self.assign_subchannels(self.field(obs, "channel_gain"), chosen)
