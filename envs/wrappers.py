"""Wrappers that adapt the scheduling env to RL libraries (transforms, not flags).

- :class:`FlattenAction`: a ``Dict`` action of ``assignment`` and ``power`` →
  one ``MultiDiscrete`` (SB3 and RLlib take MultiDiscrete directly).
- :class:`envs.rl.HungarianTopK`: a ``Box(N)`` of per-client scores → the
  assignment the ``learned`` policy makes at run time (top K eligible by score,
  subchannels by the Hungarian rule), with per-client controls when exposed.
- ``gymnasium.wrappers.FlattenObservation`` flattens the observation ``Dict``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

__all__ = ["FlattenAction"]


class FlattenAction(gym.ActionWrapper):
    """Concatenate a Dict(assignment, power) action into one MultiDiscrete."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.action_space
        if isinstance(space, spaces.MultiDiscrete):
            self._keys: tuple[str, ...] = ()
            self.action_space = space
            return
        if not isinstance(space, spaces.Dict) or "controls" in space.spaces:
            raise ValueError(
                "FlattenAction needs a MultiDiscrete or Dict(assignment, power) action; "
                "with controls use a Box-based wrapper (envs.rl.HungarianTopK)"
            )
        self._keys = tuple(space.spaces)
        self._sizes = [len(space[k].nvec) for k in self._keys]  # type: ignore[attr-defined]  # gymnasium: Dict items are Space
        self.action_space = spaces.MultiDiscrete(
            np.concatenate([space[k].nvec for k in self._keys])  # type: ignore[attr-defined]  # gymnasium: Dict items are Space
        )

    def action(self, action: npt.NDArray[np.int64]) -> Any:
        """Split the flat action back into the env's Dict."""
        if not self._keys:
            return action
        parts = np.split(np.asarray(action), np.cumsum(self._sizes)[:-1])
        return dict(zip(self._keys, parts, strict=False))
