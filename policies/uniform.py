"""Uniform participants of one edge: s devices drawn without replacement.

The default rule of the hierarchy (Lin & Brinton, "Differentially-Private
Hierarchical Federated Learning", Algorithm 2: each edge c samples s_c^k of its
devices uniformly at random each global round k). s is the number of open subchannels
of the edge (columns of ``channel_gain`` that are not −inf), or
``clients_per_round`` without ``channel_gain``; with s ≥ the eligible devices,
all of them take part.

Symbol table: s → open subchannels, k → ``obs["round"]``, c → ``context.unit``.

Implementation details:
    1. The draw is keyed by (seed, "hier_participants", round = k, client = c)
       through ``context.rng``, the stream the hierarchy has always used; without
       a context the policy's own ``np_random`` draws.
    2. Rows are the edge's devices in ascending id order, so row j is the
       subnet's j-th device and the sorted rows map to sorted device ids.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import Count, Observation, Policy


class UniformPolicy(Policy):
    """s eligible devices of one edge, uniformly without replacement.

    Args:
        observation_space: The edge's observation space (``eligible``;
            ``channel_gain`` gives s, ``round`` keys the draw).
        action_space: ``MultiBinary(n_c)``.
        clients_per_round: s when the observation has no ``channel_gain``
            (None: every eligible device).
        context: The run context; its seed and ``unit`` key the draw.

    Example:
        >>> from gymnasium import spaces
        >>> from rayfl.observation import SystemContext, observation_space
        >>> ctx = SystemContext(topology="hierarchical", seed=0, rounds=3,
        ...                     model_dim=10, unit=1, num_units=2)
        >>> space = observation_space(("channel_gain", "eligible", "round"), 4, 2)
        >>> policy = UniformPolicy(space, spaces.MultiBinary(4), context=ctx)
        >>> obs = {"channel_gain": np.zeros((4, 2)), "eligible": np.ones(4),
        ...        "round": np.zeros(1)}
        >>> int(policy(obs).sum())
        2
    """

    topologies: ClassVar[frozenset[str]] = frozenset({"hierarchical"})
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
        if clients_per_round is not None and clients_per_round < 0:
            raise ValueError(f"clients_per_round must be >= 0, got {clients_per_round}")
        self.clients_per_round = clients_per_round
        super().__init__(observation_space, action_space, context=context)

    def participants(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Draw s of the eligible rows (all of them when s covers them)."""
        members = np.flatnonzero(self.eligible_mask(obs))
        if "channel_gain" in obs:
            gain = self.field(obs, "channel_gain")
            s = int(np.any(gain > -np.inf, axis=0).sum())
        elif self.clients_per_round is not None:
            s = self.clients_per_round
        else:
            s = members.size
        if s >= members.size:
            return members
        if self.context is None:
            rng = self.np_random
        else:
            round_ = int(self.field(obs, "round")[0])
            rng = self.context.rng(
                "hier_participants", round=round_, client=self.context.unit
            )
        return np.sort(members[rng.choice(members.size, size=s, replace=False)])
