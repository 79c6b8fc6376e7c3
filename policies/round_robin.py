"""Round-robin scheduling: eligible clients in cyclic id order, K per round.

The "round robin" (RR) policy of Yang, Liu, Quek & Poor, "Scheduling Policies
for Federated Learning in Wireless Networks", IEEE Trans. Commun. 68(1), 2020,
Sec. III, and the round-robin baseline of spec seed_002 §6: clients take turns in
a fixed cyclic order, K per round, regardless of their channels.

Symbol table: N → ``num_clients``, K → ``num_subchannels``.

Implementation details:
    1. A cursor walks the ids 0..N-1 cyclically; each round takes the next K
       eligible ids from the cursor and moves it past the last one taken. So
       ineligible clients are skipped and, with all clients eligible and N = 7,
       K = 3, the rounds are {0,1,2}, {3,4,5}, {6,0,1}, ... The groups of
       seed_002 §6 (rebuilt in index order each cycle) would instead give {6}
       alone and idle two subchannels; here no subchannel idles.
    2. ``subchannels="best_gain"`` (default): the chosen clients get
       subchannels by the Hungarian method maximising Σ gain [dB] (Yang et al.
       leave the subchannel choice open). ``subchannels="index"``: the i-th
       chosen client, in cyclic order, gets subchannel i, whatever the gains —
       the round-robin baseline of Zhao et al. 2025 ("Enhancing Convergence,
       Privacy and Fairness for Wireless Personalized Federated Learning",
       Sec. VII: cyclic order over eligible clients, subchannels in index
       order), so a client may land on a deep fade and suffer its uplink errors.
    3. ``reset`` puts the cursor back on client 0.
    4. With a client set only (``MultiBinary(N)`` action, no channel model) the
       rule takes k = ``clients_per_round`` ids (default K, or N without
       ``channel_gain``) and returns them sorted, the cursor walking the
       same way (the star runner's round robin on ideal links).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from policies.all_clients import participant_cap
from policies.base import Count, Observation, Policy

#: Values of the ``subchannels`` parameter.
SUBCHANNEL_RULES = ("best_gain", "index")


class RoundRobinPolicy(Policy):
    """Schedule the next K eligible clients in cyclic order (Yang et al. 2020, RR).

    Args:
        observation_space: The env's observation space.
        action_space: The env's action space.
        subchannels: How the chosen clients get subchannels: ``"best_gain"``
            (Hungarian matching maximising Σ gain [dB], the default) or
            ``"index"`` (the i-th chosen client takes subchannel i).
        clients_per_round: k of a client-set decision (``MultiBinary(N)``
            action; default K, or N without ``channel_gain``).
        context: Unused (accepted for the common signature).

    Attributes:
        cursor: Id the next round starts its scan from.
        subchannels: The subchannel rule, ``"best_gain"`` or ``"index"``.

    Example:
        >>> from gymnasium import spaces
        >>> obs_space = spaces.Dict({
        ...     "channel_gain": spaces.Box(-np.inf, np.inf, (4, 2)),
        ...     "eligible": spaces.Box(0, 1, (4,))})
        >>> policy = RoundRobinPolicy(obs_space, spaces.MultiDiscrete([5, 5]))
        >>> obs = {"channel_gain": np.zeros((4, 2)), "eligible": np.ones(4)}
        >>> [sorted(policy(obs).tolist()) for _ in range(3)]
        [[0, 1], [2, 3], [0, 1]]
    """

    def __init__(
        self,
        observation_space: Any,
        action_space: Any,
        subchannels: Literal["best_gain", "index"] = "best_gain",
        *,
        clients_per_round: Count | None = None,
        context: Any = None,
    ) -> None:
        if subchannels not in SUBCHANNEL_RULES:
            raise ValueError(
                f"round_robin: subchannels must be one of {list(SUBCHANNEL_RULES)}, "
                f"got {subchannels!r}"
            )
        self.subchannels = subchannels
        self.cursor = 0
        super().__init__(observation_space, action_space, context=context)
        self.k = participant_cap(self, clients_per_round)

    required_keys: ClassVar[tuple[str, ...]] = ("eligible",)
    action_parts: ClassVar[frozenset[str]] = frozenset({"participants", "assignment"})

    def reset(self, seed: int | None = None) -> None:
        """Reset the generator and put the cursor back on client 0."""
        super().reset(seed)
        self.cursor = 0

    def participants(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Take the next k eligible ids from the cursor, sorted."""
        order = (np.arange(self.num_clients) + self.cursor) % self.num_clients
        chosen = order[self.eligible_mask(obs)[order]][: self.k]
        if chosen.size:
            self.cursor = int(chosen[-1] + 1) % self.num_clients
        return np.sort(chosen)

    def schedule(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Take the next K eligible ids from the cursor, then give them subchannels."""
        order = (np.arange(self.num_clients) + self.cursor) % self.num_clients
        chosen = order[self.eligible_mask(obs)[order]][: self.num_subchannels]
        if chosen.size:
            self.cursor = int(chosen[-1] + 1) % self.num_clients
        if self.subchannels == "index":
            assignment = np.full(self.num_subchannels, self.num_clients, np.int64)
            assignment[: chosen.size] = chosen
            return assignment
        return self.assign_subchannels(self.field(obs, "channel_gain"), chosen)
