"""``D2DNeighbor-v0`` for RL libraries: one bit per candidate, flattened observations."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from envs.d2d import D2DNeighborEnv
from rayfl.config import RunConfig

__all__ = ["BinaryNeighbors", "make_d2d_rl_env"]


class BinaryNeighbors(gym.ActionWrapper):
    """Action = one bit per candidate (``MultiBinary(N)``, or (T, N)).

    Decoding (the rule of ``channel_threshold`` after its threshold): the set
    bits of eligible candidates are M_n; with more than F, the F of smallest
    P^err are kept; the selected get distinct sub-channels by the Hungarian
    matching on ``channel_gain``. A bit on the target itself is ignored. Every
    ``MultiBinary`` sample is thus a valid selection, which random exploration
    and RL libraries need.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        base: D2DNeighborEnv = env.unwrapped  # type: ignore[assignment]
        self.base = base
        shape = (
            (base.num_nodes, base.num_nodes) if base.all_targets else (base.num_nodes,)
        )
        self.action_space = spaces.MultiBinary(shape)
        self.last_obs: dict[str, Any] | None = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset and keep the raw observation (decoding reads it)."""
        obs, info = self.env.reset(**kwargs)
        self.last_obs = obs
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step with the selection decoded from the bits."""
        obs, reward, terminated, truncated, info = self.env.step(self.action(action))
        self.last_obs = obs
        return obs, float(reward), terminated, truncated, info

    def action(self, action: Any) -> npt.NDArray[np.int64]:
        """Turn bits into the env's ``MultiDiscrete`` assignment."""
        from policies.assignment import assign_subchannels

        if self.last_obs is None:
            raise RuntimeError("call reset() before step()")
        bits = np.asarray(action)
        if bits.shape != self.action_space.shape or np.any((bits != 0) & (bits != 1)):
            raise ValueError(
                f"action must be 0/1 of shape {self.action_space.shape}, got {action!r}"
            )
        base = self.base
        rows = bits.reshape(len(base.targets), base.num_nodes)
        out = []
        for i, row in enumerate(rows):
            obs = base.target_observation(self.last_obs, i)
            error = np.asarray(obs["error_probability"], dtype=np.float64)
            chosen = np.flatnonzero((row == 1) & (obs["eligible"] > 0.5))
            chosen = chosen[np.argsort(error[chosen], kind="stable")]
            out.append(
                assign_subchannels(
                    obs["channel_gain"],
                    chosen[: base.num_subchannels],
                    idle=base.num_nodes,
                )
            )
        return np.stack(out) if base.all_targets else out[0]


def make_d2d_rl_env(
    config: str | Path | Mapping[str, Any] | RunConfig | None = None,
    *,
    mode: str = "surrogate",
    reward: str = "loss_decrease",
    neighbor_cost: float = 0.0,
    overrides: list[str] | Mapping[str, Any] = (),
) -> gym.Env:
    """``FlattenObservation(BinaryNeighbors(D2DNeighborEnv(...)))``: Box in, MultiBinary out."""
    env = D2DNeighborEnv(
        config,
        mode=mode,
        reward=reward,
        neighbor_cost=neighbor_cost,
        overrides=overrides,
    )
    return gym.wrappers.FlattenObservation(BinaryNeighbors(env))
