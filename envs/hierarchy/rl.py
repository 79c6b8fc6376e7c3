"""The hierarchy's RL encoding: :class:`EdgeScores` (the ``rl_scores`` env role)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from envs.hierarchy.scheduling import HierarchicalSchedulingEnv
from envs.rl import ScoreDecoder, top_k_assignment, top_k_assignments
from policies.features import NUM_FEATURES, client_features, client_features_many

__all__ = ["EdgeScores"]


class EdgeScores(ScoreDecoder):
    """Hierarchy: observation (I, F) features, action (I,) scores over all devices.

    The star's :class:`ClientFeatures` + :class:`HungarianTopK`, edge by edge:
    rows are the devices in edge order (edge c's block holds the members of
    S_c by ascending id), each block's features are computed from edge c's
    observation alone, and edge c schedules the K_e eligible devices of its
    block with the highest scores, on subchannels by the Hungarian rule. A
    network trained here therefore acts at run time as ``learned`` does on
    each edge (:class:`policies.learned.LearnedPolicy`).
    """

    def __init__(self, env: gym.Env, *, selection: str = "top_k") -> None:
        if selection != "top_k":
            raise ValueError(f"EdgeScores decodes selection=top_k, got {selection!r}")
        super().__init__(env)
        base: HierarchicalSchedulingEnv = env.unwrapped  # type: ignore[assignment]
        self.base = base
        total = sum(base.sizes)
        self.observation_space = spaces.Box(
            -np.inf, np.inf, (total, NUM_FEATURES), np.float32
        )
        self.action_space = spaces.Box(-1.0, 1.0, (total,), np.float32)

    def observation(self, obs: Mapping[str, Any]) -> npt.NDArray[np.float32]:
        """Stack each edge's client features (edge order)."""
        return np.concatenate(
            [
                client_features(self.base.edge_observation(obs, c))
                for c in range(len(self.base.sizes))
            ]
        ).astype(np.float32)

    def observation_many(self, obs: Mapping[str, Any]) -> npt.NDArray[np.float32]:
        """:meth:`observation` of E lanes' batched observations at once, (E, I, F).

        Each edge's block is :func:`policies.features.client_features_many`
        of the edge's batched observation (the same numbers as the one-lane
        function), for a vector env of this env's lanes.
        """
        return np.concatenate(
            [
                client_features_many(self.base.edge_observation(obs, c))
                for c in range(len(self.base.sizes))
            ],
            axis=1,
        ).astype(np.float32)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset; return the stacked features."""
        obs, info = super().reset(**kwargs)
        return self.observation(obs), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Decode the scores edge by edge and step; return the stacked features."""
        obs, reward, terminated, truncated, info = super().step(action)
        return self.observation(obs), reward, terminated, truncated, info

    def action(self, action: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Turn (I,) scores into the env's concatenated per-edge assignment."""
        scores = self._values(action, "(the finite scores of the devices)")
        assert self.last_obs is not None  # _values checked it
        base = self.base
        blocks = np.split(scores, np.cumsum(base.sizes)[:-1])
        return base.join_actions(
            [
                top_k_assignment(
                    block,
                    base.edge_observation(self.last_obs, c),
                    base.num_subchannels[c],
                )
                for c, block in enumerate(blocks)
            ]
        )

    def action_many(
        self, obs: Mapping[str, Any], actions: npt.ArrayLike
    ) -> npt.NDArray[np.int64] | None:
        """:meth:`action` of E lanes at once, (E, Σ K_e), lane by lane the same.

        Args:
            obs: The lanes' batched raw observations (each lane's ``last_obs``).
            actions: (E, I) scores.

        Returns:
            The actions; None when the scores are not E rows of I finite values
            (decode each lane with :meth:`action`, which raises).
        """
        scores = np.asarray(actions, dtype=np.float64)
        base = self.base
        if (
            scores.ndim != 2
            or scores.shape[1] != sum(base.sizes)
            or np.isnan(scores).any()
        ):
            return None
        blocks = np.split(scores, np.cumsum(base.sizes)[:-1], axis=1)
        return np.concatenate(
            [
                top_k_assignments(
                    block, base.edge_observation(obs, c), base.num_subchannels[c]
                )
                for c, block in enumerate(blocks)
            ],
            axis=1,
        )
