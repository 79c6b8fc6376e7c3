"""The scheduling env as a flat RL problem: per-client features in, scores out.

``make_rl_env`` stacks, around :class:`envs.scheduling.WirelessFLEnv`:

1. ``TimeLimit(config.rounds)``: an episode is one FL run (truncation);
2. :class:`HungarianTopK`: the action is a ``Box(N)`` of client scores; the K
   eligible clients with the highest scores get the subchannels by the
   Hungarian rule (max Σ gain [dB]) — the decoding of ``policies.learned``;
3. :class:`ClientFeatures`: the observation is the (N, F) float32 matrix of
   :func:`policies.features.client_features` (stateless normalisation);
4. optionally ``TransformReward`` scaling the reward by ``reward_scale``.

The result has a ``Box`` observation and a ``Box`` action, the spaces every
Gymnasium RL library takes (RLlib, Stable-Baselines3 PPO/SAC, CleanRL).

Why this encoding (issue 11, "Encodings"):
    * The per-subchannel ``MultiDiscrete([N + 1] * K)`` lets the agent name a
      client twice or an ineligible client: the env repairs such actions, so
      many actions map to one schedule and the agent must learn the rules
      before it learns to schedule. Masks (``action_masks()``) are per
      dimension and cannot forbid duplicates across subchannels.
    * Scores + top-K hold every constraint by construction (distinct clients,
      only eligible ones, no idle subchannel while clients wait), the action
      size is N instead of K·(N + 1), and with a network shared by all clients
      the policy is permutation-equivariant and independent of N.
    * Subchannels by the Hungarian rule rather than learned: given the set of
      clients, matching them to subchannels is a solved problem (max Σ gain),
      and all heuristics use the same rule, so the comparison isolates *who*
      is scheduled.

Implementation details:
    1. Only the ranking of the scores matters: finite values outside [−1, 1]
       are accepted (RLlib samples Gaussian scores unclipped), NaN raises.
    2. ``power``: the max level (like the heuristics); ``controls``: the
       algorithm's configured values.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from envs.scheduling import WirelessFLEnv
from policies.assignment import assign_subchannels
from policies.features import NUM_FEATURES, client_features
from policies.learned import select_top_k
from rayfl.config import RunConfig

__all__ = ["ClientFeatures", "HungarianTopK", "make_rl_env"]


class HungarianTopK(gym.ActionWrapper):
    """Action = one score per client; schedule the top K by the Hungarian rule."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        base = env.unwrapped
        self.num_clients = int(base.num_clients)
        self.num_subchannels = int(base.num_subchannels)
        self.action_space = spaces.Box(-1.0, 1.0, (self.num_clients,), np.float32)
        self.last_obs: dict[str, Any] | None = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset and keep the raw observation (gains and eligibility decode actions)."""
        obs, info = self.env.reset(**kwargs)
        self.last_obs = obs
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step with the schedule decoded from the scores."""
        obs, reward, terminated, truncated, info = self.env.step(self.action(action))
        self.last_obs = obs
        return obs, reward, terminated, truncated, info

    def action(self, action: npt.ArrayLike) -> Any:
        """Turn (N,) scores into the env's assignment (K,)."""
        if self.last_obs is None:
            raise RuntimeError("call reset() before step()")
        scores = np.asarray(action, dtype=np.float64).reshape(-1)
        if scores.shape != (self.num_clients,) or np.isnan(scores).any():
            raise ValueError(
                f"action must be {self.num_clients} finite scores, got {action!r}"
            )
        obs = self.last_obs
        chosen = select_top_k(scores, obs["eligible"] > 0.5, self.num_subchannels)
        assignment = assign_subchannels(
            obs["channel_gain"], chosen, idle=self.num_clients
        )
        if isinstance(self.env.action_space, spaces.Dict):
            return {"assignment": assignment}
        return assignment


class ClientFeatures(gym.ObservationWrapper):
    """Observation = the (N, F) per-client feature matrix (policies.features)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        n = int(env.unwrapped.num_clients)
        self.observation_space = spaces.Box(
            -np.inf, np.inf, (n, NUM_FEATURES), np.float32
        )

    def observation(self, observation: Any) -> npt.NDArray[np.float32]:
        """Return ``client_features(observation)``."""
        return client_features(observation)


def make_rl_env(
    config: str | Path | Mapping[str, Any] | RunConfig | None = None,
    *,
    mode: str = "surrogate",
    reward: str = "min_max_loss",
    reward_scale: float = 1.0,
    overrides: list[str] | Mapping[str, Any] = (),
) -> gym.Env:
    """Build the wrapped scheduling env (module docstring).

    Args:
        config: Run config of the FL system (as for ``WirelessFLEnv``).
        mode: ``"surrogate"`` or ``"emulate"``.
        reward: One of ``envs.scheduling.REWARDS``.
        reward_scale: Multiplies every reward (1 = unchanged).
        overrides: Config overrides ``key.path=value``.

    Returns:
        The env: ``Box(N, F)`` observations, ``Box(N)`` actions.
    """
    base = WirelessFLEnv(config, mode=mode, reward=reward, overrides=overrides)
    env: gym.Env = gym.wrappers.TimeLimit(base, max_episode_steps=base.config.rounds)
    env = ClientFeatures(HungarianTopK(env))
    if reward_scale != 1.0:
        env = gym.wrappers.TransformReward(env, lambda r: reward_scale * r)
    return env
