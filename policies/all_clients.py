"""Every eligible client takes part: the default rule of the star.

Federated averaging's full participation (McMahan et al., "Communication-
Efficient Learning of Deep Networks from Decentralized Data", AISTATS 2017,
with C = 1): each round every eligible client trains and uploads. With a cap k
(``clients_per_round``; default K, the subchannels of the observation, or N
without a channel model) the first k eligible clients by id take part.

Symbol table: N → ``num_clients``, K → ``num_subchannels``, k →
``clients_per_round``.

Implementation details:
    1. The action is the client set (``MultiBinary(N)``, action part
       ``participants``); with a channel model the runner gives the i-th
       participant by id subchannel i at the maximum power.
    2. No draw: the rule is deterministic.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import Count, Observation, Policy


def participant_cap(policy: Policy, clients_per_round: int | None) -> int:
    """Return k: ``clients_per_round``, else K if the space has subchannels, else N.

    Raises:
        ValueError: If ``clients_per_round`` < 1 or exceeds K.
    """
    n, k = policy.num_clients, policy.num_subchannels
    if clients_per_round is None:
        return min(k, n) if k else n
    if clients_per_round < 1:
        raise ValueError(f"clients_per_round must be >= 1, got {clients_per_round}")
    if k and min(clients_per_round, n) > k:
        raise ValueError(
            f"clients_per_round ({min(clients_per_round, n)}) exceeds the "
            f"{k} subchannels of the observation"
        )
    return min(int(clients_per_round), n)


class AllClientsPolicy(Policy):
    """Every eligible client takes part, at most k by id order.

    Args:
        observation_space: The unit's observation space (``eligible`` is read).
        action_space: ``MultiBinary(N)``.
        clients_per_round: k; None: K if the observation has ``channel_gain``,
            else N.
        context: Unused (accepted for the common signature).

    Example:
        >>> from gymnasium import spaces
        >>> policy = AllClientsPolicy(
        ...     spaces.Dict({"eligible": spaces.Box(0, 1, (4,))}),
        ...     spaces.MultiBinary(4), clients_per_round=2)
        >>> policy({"eligible": np.array([0, 1, 1, 1])}).tolist()
        [0, 1, 1, 0]
    """

    topologies: ClassVar[frozenset[str]] = frozenset({"star"})
    required_keys: ClassVar[tuple[str, ...]] = ("eligible",)
    action_parts: ClassVar[frozenset[str]] = frozenset({"participants"})
    optional_parts: ClassVar[frozenset[str]] = frozenset()

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
        """The first k eligible clients by id."""
        return np.flatnonzero(self.eligible_mask(obs))[: self.k]
