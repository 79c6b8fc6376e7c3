"""One episode of a scheduling env under a policy: the loop every evaluation shares.

``rayfl.train_policy.evaluate_policies`` (returns of the learned scheduler and its
baselines) and ``rayfl compare --fast`` (final FL metrics of every policy on one
FL system per seed) both drive a Gymnasium env with a policy until the episode
ends; this is that loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

__all__ = ["EpisodeResult", "run_episode"]


@dataclass(frozen=True)
class EpisodeResult:
    """What one episode returned.

    Attributes:
        total_reward: Sum of the env's rewards.
        final_reward: The last step's reward (NaN if no step ran).
        steps: Steps taken.
    """

    total_reward: float
    final_reward: float
    steps: int


def run_episode(
    env: gym.Env[Any, Any],
    policy: Callable[[Any], Any],
    *,
    seed: int | None = None,
    first_obs: Any = None,
    max_steps: int | None = None,
    on_step: Callable[[gym.Env[Any, Any]], None] | None = None,
) -> EpisodeResult:
    """Step ``env`` with ``policy`` from a reset until the episode ends.

    Args:
        env: The environment (possibly wrapped, e.g. in a ``TimeLimit``).
        policy: Maps an observation to an action.
        seed: Reset ``env`` with this seed first.
        first_obs: Or: ``env`` was just reset by the caller (e.g. because the
            policy is built from the reset env) and this is its observation.
        max_steps: Stop after this many steps even if the env does not end the
            episode (None: run until ``terminated`` or ``truncated``).
        on_step: Called with ``env`` after every step (e.g. to read
            ``env.last_outcome``).

    Returns:
        The episode's total and final reward and its length.

    Raises:
        ValueError: If ``max_steps`` is below 1, or not exactly one of ``seed``
            and ``first_obs`` is given.

    Example:
        >>> env = gym.wrappers.TimeLimit(
        ...     gym.make("CartPole-v1").unwrapped, max_episode_steps=5)
        >>> run_episode(env, lambda obs: 0, seed=0).steps <= 5
        True
    """
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    if (seed is None) == (first_obs is None):
        raise ValueError("give exactly one of seed (to reset) and first_obs")
    obs = env.reset(seed=seed)[0] if first_obs is None else first_obs
    total, reward, steps = 0.0, float("nan"), 0
    while max_steps is None or steps < max_steps:
        obs, r, terminated, truncated, _ = env.step(policy(obs))
        reward = float(r)
        total += reward
        steps += 1
        if on_step is not None:
            on_step(env)
        if terminated or truncated:
            break
    return EpisodeResult(total, reward, steps)
