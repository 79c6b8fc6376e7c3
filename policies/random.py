"""Random scheduling: K eligible clients drawn uniformly, on random subchannels.

The "random scheduling" (RS) policy of Yang, Liu, Quek & Poor, "Scheduling
Policies for Federated Learning in Wireless Networks", IEEE Trans. Commun. 68(1),
2020, Sec. III: each round the access point picks K clients uniformly at random,
without replacement, and gives each one a subchannel.

Symbol table: N → ``num_clients``, K → ``num_subchannels``.

Implementation details:
    1. Only eligible clients are drawn (privacy/T0 budget); with fewer than K
       eligible, all of them are scheduled and the other subchannels idle.
    2. The subchannels are a uniform random permutation, independent of the gains.
    3. Draws come from ``self.np_random`` only, so ``reset(seed)`` replays them.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from policies.base import Observation, Policy


class RandomPolicy(Policy):
    """Schedule K eligible clients uniformly at random (Yang et al. 2020, RS).

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

    def schedule(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Draw min(K, #eligible) distinct eligible clients and random subchannels."""
        eligible = np.flatnonzero(self.eligible_mask(obs))
        count = min(self.num_subchannels, eligible.size)
        clients = self.np_random.choice(eligible, size=count, replace=False)
        subchannels = self.np_random.permutation(self.num_subchannels)[:count]
        assignment = np.full(self.num_subchannels, self.num_clients, dtype=np.int64)
        assignment[subchannels] = clients
        return assignment
