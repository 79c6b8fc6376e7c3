"""Wrappers that adapt the scheduling env to RL libraries (transforms, not flags).

- :class:`FlattenAction`: a ``Dict`` action of ``assignment`` and ``power`` →
  one ``MultiDiscrete`` (SB3 and RLlib take MultiDiscrete directly).
- :class:`TopKScores`: a ``Box(N)`` of per-client scores → an assignment: the K
  eligible clients with the highest scores are scheduled, and, in decreasing
  score order, each takes its best still-free subchannel (greedy on channel
  gain). Ties in score go to the lower client id.
- ``gymnasium.wrappers.FlattenObservation`` flattens the observation ``Dict``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

__all__ = ["FlattenAction", "TopKScores", "top_k_assignment"]


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
                "with controls use a Box-based wrapper (e.g. TopKScores)"
            )
        self._keys = tuple(space.spaces)
        self._sizes = [len(space[k].nvec) for k in self._keys]
        self.action_space = spaces.MultiDiscrete(
            np.concatenate([space[k].nvec for k in self._keys])
        )

    def action(self, action: npt.NDArray[np.int64]) -> Any:
        """Split the flat action back into the env's Dict."""
        if not self._keys:
            return action
        parts = np.split(np.asarray(action), np.cumsum(self._sizes)[:-1])
        return dict(zip(self._keys, parts, strict=False))


def top_k_assignment(
    scores: npt.NDArray[np.floating],
    *,
    gain_db: npt.NDArray[np.floating],
    eligible: npt.NDArray[np.bool_],
) -> npt.NDArray[np.int64]:
    """Return the assignment (K,) of the top-K eligible clients by score.

    Args:
        scores: One score per client (N,).
        gain_db: Channel gains (N, K) in dB.
        eligible: Which clients may upload (N,).

    Returns:
        Client per subchannel, N = idle.

    Example:
        >>> top_k_assignment(np.array([0.1, 0.9, 0.5]),
        ...     gain_db=np.array([[0., 1.], [2., 0.], [0., 3.]]),
        ...     eligible=np.array([True, True, True])).tolist()
        [1, 2]
    """
    n, k = gain_db.shape
    candidates = np.flatnonzero(eligible)
    order = candidates[np.lexsort((candidates, -scores[candidates]))][:k]
    assignment = np.full(k, n, dtype=np.int64)
    free = np.ones(k, dtype=bool)
    for c in order:
        gains = np.where(free, gain_db[c], -np.inf)
        s = int(np.argmax(gains))
        assignment[s] = c
        free[s] = False
    return assignment


class TopKScores(gym.ActionWrapper):
    """Let the agent output one score per client in [-1, 1]; schedule the top K."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        n = env.unwrapped.num_clients
        self.action_space = spaces.Box(-1.0, 1.0, shape=(n,), dtype=np.float32)
        self._last_obs: dict[str, Any] | None = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset and remember the observation (its gains pick subchannels)."""
        obs, info = self.env.reset(**kwargs)
        self._last_obs = obs
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step with the assignment built from the scores."""
        obs, reward, terminated, truncated, info = self.env.step(self.action(action))
        self._last_obs = obs
        return obs, reward, terminated, truncated, info

    def action(self, action: npt.NDArray[np.floating]) -> Any:
        """Turn scores into the env's action."""
        if self._last_obs is None:
            raise RuntimeError("call reset() before step()")
        assignment = top_k_assignment(
            np.asarray(action, dtype=np.float64),
            gain_db=self._last_obs["channel_gain"],
            eligible=self._last_obs["eligible"] > 0.5,
        )
        if isinstance(self.env.action_space, spaces.Dict):
            return {"assignment": assignment}
        return assignment
