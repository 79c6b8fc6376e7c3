"""Random scheduling: K eligible clients drawn uniformly, on random subchannels.

The "random scheduling" (RS) policy of Yang, Liu, Quek & Poor, "Scheduling
Policies for Federated Learning in Wireless Networks", IEEE Trans. Commun. 68(1),
2020, Sec. III: each round the access point picks K clients uniformly at random,
without replacement, and gives each one a subchannel.

Symbol table: N → ``num_clients``, K → ``num_subchannels``.

Two cases of one rule (action part ``participants`` or ``assignment``):

- with a subchannel assignment (``MultiDiscrete`` action), K clients and the
  subchannels they get are drawn from ``self.np_random``;
- with a client set only (``MultiBinary(N)`` action, no channel model), k =
  ``clients_per_round`` (default K, or N without ``channel_gain``) clients are
  drawn from the run's keyed stream ``context.rng("schedule", round=t)`` (the
  star runner's draw on ideal links); without a context, from
  ``self.np_random``.

Implementation details:
    1. Only eligible clients are drawn (privacy/T0 budget); with fewer than K
       eligible, all of them are scheduled and the other subchannels idle.
    2. The subchannels are a uniform random permutation, independent of the gains.
    3. Draws come from ``self.np_random`` only, so ``reset(seed)`` replays them.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from policies.all_clients import participant_cap
from policies.base import Count, Observation, Policy


class RandomPolicy(Policy):
    """Schedule K eligible clients uniformly at random (Yang et al. 2020, RS).

    Args:
        observation_space: The unit's observation space.
        action_space: The assignment space, or ``MultiBinary(N)`` for a client
            set only.
        clients_per_round: k of a client-set decision (default K, or N without
            ``channel_gain``); an assignment always fills up to K subchannels.
        context: The run context; keys the client-set draw.

    Example:
        >>> from gymnasium import spaces
        >>> obs_space = spaces.Dict({
        ...     "channel_gain": spaces.Box(-np.inf, np.inf, (3, 2)),
        ...     "eligible": spaces.Box(0, 1, (3,))})
        >>> policy = RandomPolicy(obs_space, spaces.MultiDiscrete([4, 4]))
        >>> policy.reset(seed=0)
        >>> obs = {"channel_gain": np.zeros((3, 2)), "eligible": np.array([1, 0, 1])}
        >>> sorted(policy(obs).tolist())
        [0, 2]
    """

    required_keys: ClassVar[tuple[str, ...]] = ("eligible",)
    action_parts: ClassVar[frozenset[str]] = frozenset({"participants", "assignment"})

    def __init__(
        self,
        observation_space: Any,
        action_space: Any,
        *,
        clients_per_round: Count | None = None,
        context: Any = None,
    ) -> None:
        super().__init__(observation_space, action_space, context=context)
        self.k = participant_cap(self, clients_per_round)

    def participants(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Draw min(k, #eligible) eligible clients, sorted by id."""
        eligible = np.flatnonzero(self.eligible_mask(obs))
        rng = self.np_random
        if self.context is not None:
            rng = self.context.rng("schedule", round=int(self.field(obs, "round")[0]))
        count = min(self.k, eligible.size)
        return np.sort(rng.choice(eligible, size=count, replace=False))

    def schedule(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Draw min(K, #eligible) distinct eligible clients and random subchannels."""
        eligible = np.flatnonzero(self.eligible_mask(obs))
        count = min(self.num_subchannels, eligible.size)
        clients = self.np_random.choice(eligible, size=count, replace=False)
        subchannels = self.np_random.permutation(self.num_subchannels)[:count]
        assignment = np.full(self.num_subchannels, self.num_clients, dtype=np.int64)
        assignment[subchannels] = clients
        return assignment
