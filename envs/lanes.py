"""What the topologies' vector envs share: E lane envs behind one Gymnasium ``VectorEnv``.

``WirelessFLVectorEnv``, ``HierarchicalFLVectorEnv`` and ``D2DNeighborVectorEnv``
each hold E envs of their topology (lane e is the env run with the lane's seed)
and step them in lockstep over shared hosts. :class:`LaneVectorEnv` is what
they have in common: the ``num_envs`` check, the batched spaces of the lane
envs, ``NEXT_STEP`` autoreset and the rule of ``reset(seed=...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, create_empty_array

__all__ = ["LaneVectorEnv"]


class LaneVectorEnv(VectorEnv):
    """E lane envs of one topology stepping in lockstep (see the module docstring)."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    @staticmethod
    def check_num_envs(num_envs: Any) -> int:
        """Return ``num_envs`` as an int; ``ValueError`` unless an int >= 1."""
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer):
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        return int(num_envs)

    def _take_lanes(self, first: Any, lane: Callable[[int], Any]) -> None:
        """Keep lane 0's env ``first`` and ``lane(e)`` for the others; batch their spaces."""
        self.envs = [first] + [lane(e) for e in range(1, self.num_envs)]
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(first.observation_space, self.num_envs)
        self.action_space = batch_space(first.action_space, self.num_envs)
        self._observations = create_empty_array(
            self.single_observation_space, self.num_envs
        )
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self._started = False

    def _reset_seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        """Each lane's seed of ``reset(seed=seed)`` (see the envs' Starting State).

        An int s gives lane e the seed s + e, a list one seed per lane; None
        before the first reset is ``config.seed``, later None lets each lane
        draw from its own generator.
        """
        if seed is None and not self._started:
            seed = int(self.config.seed)  # type: ignore[attr-defined]  # the subclass's config
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int | np.integer):
            return [int(seed) + e for e in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(
                f"seed must be an int, None or {self.num_envs} seeds (one per "
                f"lane), got {len(seeds)}"
            )
        return seeds
