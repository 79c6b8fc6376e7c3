"""Channel-aware neighbor selection of pFedWN as a scheduling policy.

Step 1 of pFedWN (Ni, Ghazikor & Hashemi, Alg. 1 top; spec seed_003 §2.4): the
target selects M_n = {s ∈ G_n : P_s^err < ε}, the neighbors whose analytic link
error probability is below ε. Seen through the scheduling interface
(``policy(obs) -> action``), the D2D selection observation of
:mod:`rayfl.d2d.selection` is

| key | shape | meaning |
|-----|-------|---------|
| channel_gain | (N, F) | gain of link s → target on each ISM sub-channel, dB |
| eligible | (N,) | 1 for the target's neighbors G_n, 0 for the target |
| error_probability | (N,) | P_s^err of link s → target (1 for the target) |

and the action ``MultiDiscrete([N + 1] * F)`` names the neighbor sending on each
sub-channel (N = idle): the selected neighbors are the non-idle entries and each
sends its model on its entry's sub-channel. Any other policy (random,
best_channel, a learned one) can replace this rule through the same spaces.

Symbol table: ε → ``epsilon``, P_s^err → ``obs["error_probability"][s]``,
abs(F) → ``num_subchannels``, M_n → the non-idle entries of the action.

Implementation details:
    1. Selection uses the strict "<" of the paper.
    2. Selected neighbors get distinct sub-channels by the Hungarian matching on
       ``channel_gain`` (each gets its best one when they differ). With more
       than abs(F) candidates, the abs(F) of smallest P^err are kept.
    3. Without ``error_probability`` in the observation (the OFDMA scheduling
       env), every eligible client counts as reliable: the rule then equals
       ``best_channel``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from policies.base import Fraction, Natural, Observation, Policy

#: ε without a run context: the paper's Figs. 5–6.
DEFAULT_EPSILON = 0.05


class ChannelThresholdPolicy(Policy):
    """Select the eligible neighbors with error probability below ε.

    Args:
        observation_space: The D2D selection observation space (module table).
        action_space: ``MultiDiscrete([N + 1] * F)`` (or its Dict form).
        epsilon: ε in [0, 1]; 0 selects no neighbour (the target trains
            alone) (None: the run's ``topology.epsilon``, the
            context's ``selection_epsilon``, else 0.05 as in the paper's Figs. 5–6).
        max_neighbors: Optional cap on abs(M_n) (None: up to F).

    Example:
        >>> obs_space = spaces.Dict({
        ...     "channel_gain": spaces.Box(-np.inf, np.inf, (3, 2)),
        ...     "eligible": spaces.Box(0, 1, (3,)),
        ...     "error_probability": spaces.Box(0, 1, (3,))})
        >>> policy = ChannelThresholdPolicy(obs_space, spaces.MultiDiscrete([4, 4]))
        >>> obs = {"channel_gain": np.zeros((3, 2)), "eligible": np.array([0, 1, 1]),
        ...        "error_probability": np.array([1.0, 0.01, 0.2])}
        >>> policy(obs).tolist()
        [1, 3]
    """

    topologies: ClassVar[frozenset[str]] = frozenset({"d2d"})
    #: ε in (0, 1]; the search starts at the paper's 0.05 (:data:`DEFAULT_EPSILON`),
    #: not at the run's ``topology.epsilon``.
    tunable: ClassVar[Mapping[str, tuple[float, float, float]]] = {
        "epsilon": (DEFAULT_EPSILON, 0.0, 1.0)
    }

    allows_idle = True

    def __init__(
        self,
        observation_space: spaces.Space[Any],
        action_space: spaces.Space[Any],
        *,
        epsilon: Fraction | None = None,
        max_neighbors: Natural | None = None,
        context: Any = None,
    ) -> None:
        if epsilon is None:
            from_context = getattr(context, "selection_epsilon", None)
            epsilon = DEFAULT_EPSILON if from_context is None else from_context
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
        if max_neighbors is not None and max_neighbors < 0:
            raise ValueError(f"max_neighbors must be >= 0, got {max_neighbors}")
        self.epsilon = float(epsilon)
        self.max_neighbors = max_neighbors
        super().__init__(observation_space, action_space, context=context)

    def schedule(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Return the sub-channel of each selected neighbor (N = idle)."""
        eligible = self.eligible_mask(obs)
        if "error_probability" in obs:
            error = self.field(obs, "error_probability")
        else:
            error = np.zeros(self.num_clients)
        candidates = np.flatnonzero(eligible & (error < self.epsilon))
        candidates = candidates[np.argsort(error[candidates], kind="stable")]
        limit = self.num_subchannels
        if self.max_neighbors is not None:
            limit = min(limit, self.max_neighbors)
        return self.assign_subchannels(
            self.field(obs, "channel_gain"), candidates[:limit]
        )
