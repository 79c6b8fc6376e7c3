"""D2D's RL env: one target's base env (``rl_base``) and :class:`BinaryNeighbors`."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from envs.d2d.neighbor import D2DNeighborEnv
from envs.rl import ScoreDecoder
from policies.assignment import assign_subchannels
from rayfl.config import RunConfig

__all__ = ["BinaryNeighbors", "TargetInfo", "target_env"]


class BinaryNeighbors(ScoreDecoder):
    """D2D action = one bit per candidate (``MultiBinary(N)``, or (T, N)).

    Decoding (the rule of ``channel_threshold`` after its threshold): the set
    bits of eligible candidates are M_n; with more than F, the F of smallest
    P^err are kept; the selected get distinct sub-channels by the Hungarian
    matching on ``channel_gain``. A bit on the target itself is ignored. Every
    ``MultiBinary`` sample is thus a valid selection, which random exploration
    and RL libraries need.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.base: D2DNeighborEnv = env.unwrapped  # type: ignore[assignment]
        n = self.base.num_nodes
        self.action_space = spaces.MultiBinary(
            (n, n) if self.base.all_targets else (n,)
        )

    def action(self, action: Any) -> npt.NDArray[np.int64]:
        """Turn bits into the env's ``MultiDiscrete`` assignment."""
        if self.last_obs is None:
            raise RuntimeError("call reset() before step()")
        bits = np.asarray(action)
        if bits.shape != self.action_space.shape or np.any((bits != 0) & (bits != 1)):
            raise ValueError(
                f"action must be 0/1 of shape {self.action_space.shape}, got {action!r}"
            )
        base = self.base
        out = []
        for i, row in enumerate(bits.reshape(len(base.targets), base.num_nodes)):
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


class TargetInfo(gym.Wrapper):
    """Single-target D2D info without the target keys (vector envs want str keys)."""

    def step(
        self, action: Any
    ) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step; ``info[key][target]`` becomes ``info[key]``."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        (target,) = self.env.unwrapped.targets  # type: ignore[attr-defined]  # gymnasium: unwrapped is an Env
        info = {k: v[target] if isinstance(v, dict) else v for k, v in info.items()}
        return obs, reward, terminated, truncated, info


def target_env(
    cfg: RunConfig, *, mode: str, reward: str, neighbor_cost: float = 0.0
) -> gym.Env:
    """The base env of ``make_rl_env`` on D2D: one target, str-keyed info.

    Raises:
        ValueError: If the config names every node a target (``topology.target: all``).
    """
    if cfg.topology.target == "all":  # type: ignore[union-attr]  # a D2D section
        raise ValueError(
            "make_rl_env needs one D2D target (topology.target: an id or "
            "random), got topology.target=all"
        )
    return TargetInfo(D2DNeighborEnv(cfg, mode, reward, neighbor_cost))
