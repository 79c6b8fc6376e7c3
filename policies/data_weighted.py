"""Data-weighted round robin: turns in proportion to each client's data size.

A deficit (weighted) round robin: client n earns K · w_n / Σ_m w_m credit per
round, w_n = data_size_n ** ``power``, and the K eligible clients with the most
credit are scheduled, each paying one unit. Over T rounds client n is scheduled
about T · K · w_n / Σ w_m times (capped at once per round), so clients with
more samples — whose updates carry more weight in FedAvg's average — upload
more often, and every client with data still gets turns. ``power = 0`` is
plain round robin with credit-based turns.

Why it is here (issue 34): a PPO policy trained on ``star-small-shadowed``
beat every registered heuristic there; what it learned was mostly to schedule
clients in proportion to their data size (Spearman ρ ≈ 0.63 between a
client's turns and its samples) and to skip the smallest ones
(docs/learned_scheduler.md). This rule is the simple heuristic that does the
same on purpose, so the learned policy is read beside it.

Symbol table: N → ``num_clients``, K → ``num_subchannels``, D_n →
``obs["data_size"][n]``.

Implementation details:
    1. Credit accrues only to eligible clients, by their share of the eligible
       weight; ties in credit go to the lower client id.
    2. The chosen clients get subchannels by the Hungarian method maximising
       Σ gain [dB], as in ``round_robin``.
    3. ``reset`` sets every credit to 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import Observation, Policy


class DataWeightedPolicy(Policy):
    """Schedule the K eligible clients with the most data-weighted credit.

    Args:
        observation_space: The env's observation space.
        action_space: The env's action space.
        power: Exponent of the data size in a client's weight (≥ 0; 1: turns
            in proportion to samples, 0: equal turns).
        context: Unused (accepted for the common signature).

    Attributes:
        credit: Each client's credit (turns earned minus turns taken).

    Example:
        >>> from gymnasium import spaces
        >>> box = spaces.Box(0, np.inf, (3,))
        >>> obs_space = spaces.Dict({
        ...     "channel_gain": spaces.Box(-np.inf, np.inf, (3, 1)),
        ...     "eligible": spaces.Box(0, 1, (3,)), "data_size": box})
        >>> policy = DataWeightedPolicy(obs_space, spaces.MultiDiscrete([4]))
        >>> obs = {"channel_gain": np.zeros((3, 1)), "eligible": np.ones(3),
        ...        "data_size": np.array([60.0, 30.0, 10.0])}
        >>> turns = [int(policy(obs)[0]) for _ in range(10)]
        >>> np.bincount(turns, minlength=3).tolist()  # 60 : 30 : 10 samples
        [6, 3, 1]
    """

    topologies: ClassVar[frozenset[str]] = frozenset({"star", "hierarchical"})

    required_keys: ClassVar[tuple[str, ...]] = ("channel_gain", "eligible", "data_size")
    #: The exponent: ≥ 0, finite; 16 keeps data_size ** power far from overflow.
    tunable: ClassVar[Mapping[str, tuple[float, float, float]]] = {
        "power": (1.0, 0.0, 16.0)
    }

    def __init__(
        self,
        observation_space: Any,
        action_space: Any,
        power: float = 1.0,
        *,
        context: Any = None,
    ) -> None:
        if not np.isfinite(power) or power < 0:
            raise ValueError(
                f"data_weighted: power must be finite and >= 0, got {power!r}"
            )
        self.power = float(power)
        super().__init__(observation_space, action_space, context=context)
        self.credit = np.zeros(self.num_clients)

    def reset(self, seed: int | None = None) -> None:
        """Reset the generator and every client's credit."""
        super().reset(seed)
        self.credit = np.zeros(self.num_clients)

    def schedule(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Add each eligible client's share, take the K largest credits, match subchannels."""
        mask = self.eligible_mask(obs)
        eligible = np.flatnonzero(mask)
        if eligible.size == 0:
            return self.assign_subchannels(self.field(obs, "channel_gain"), eligible)
        weight = np.maximum(self.field(obs, "data_size")[eligible], 0.0) ** self.power
        total = weight.sum()
        share = (
            weight / total if total > 0 else np.full(eligible.size, 1 / eligible.size)
        )
        k = min(self.num_subchannels, eligible.size)
        self.credit[eligible] += k * share
        ranked = eligible[np.lexsort((eligible, -self.credit[eligible]))]
        chosen = ranked[:k]
        self.credit[chosen] -= 1.0
        return self.assign_subchannels(self.field(obs, "channel_gain"), chosen)
