"""RL-ready ids: one flat, bounded observation vector and one flat action per topology.

``WirelessFL-Flat-v0``, ``HierarchicalFL-Flat-v0`` and ``D2DNeighbor-Flat-v0``
are what a third-party RL library (Stable-Baselines3, CleanRL, RLlib) takes
as is: ``gym.make(id)`` needs no argument, the observation is a ``Box`` in
[−1, 1] (no ``VecNormalize``), the action a ``Box`` in [−1, 1], and every id
has the same defaults (surrogate mode, reward ``min_max_loss``). Each is the
stack of :func:`envs.rl.make_rl_env` (per-client features, scores decoded to
the ``learned`` policy's schedule: top K eligible, subchannels by the
Hungarian rule) under :class:`envs.wrappers.BoundedFeatures`.

Why surrogate by default: an RL library needs many thousand steps, and the
surrogate steps in milliseconds where the emulation (real training on Ray)
takes 0.04–1 s a step and a minute or more to start (issue 34); pass
``mode="emulate"`` to score or fine-tune on the real rounds (a vectorised
emulate env may make that the better default later). Why ``min_max_loss``: it is the fairness objective
of the papers' scheduling (seed_000 §3.3) and the one reward every topology
has in both modes.

Implementation details:
    1. The env owns the wrapper stack (composition, not a wrapper): its
       ``unwrapped`` is itself, so ``check_env(env.unwrapped)`` checks the
       flat spaces RL libraries see; the base env is :attr:`FlatFLEnv.base`.
    2. Seeds go to the base env (``reset(seed=s)`` replays the same episode);
       without one the base env's rule applies (``envs.base``).
    3. ``render`` shows the base env's frame (:mod:`envs.render`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from envs.base import FLEnv, check_topology
from envs.render import RENDER_MODES
from envs.rl import make_rl_env
from envs.wrappers import BoundedFeatures
from rayfl.config import RunConfig, load_config

__all__ = ["DEFAULT_MODE", "DEFAULT_REWARD", "FlatFLEnv"]

#: The mode of every ``*-Flat-v0`` id (module docstring).
DEFAULT_MODE = "surrogate"
#: The reward of every ``*-Flat-v0`` id (module docstring).
DEFAULT_REWARD = "min_max_loss"

ConfigLike = str | Path | Mapping[str, Any] | RunConfig


class FlatFLEnv(gym.Env):
    """The RL-ready env of one topology (module docstring); subclasses name it."""

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 1}
    #: ``topology.kind`` of the configs this env takes.
    topology_kind: ClassVar[str]
    #: The config of ``gym.make(id)`` without one.
    default_config: ClassVar[Mapping[str, Any]]

    def __init__(
        self,
        config: ConfigLike | None = None,
        mode: str = DEFAULT_MODE,
        reward: str = DEFAULT_REWARD,
        reward_scale: float = 1.0,
        overrides: Sequence[str] | Mapping[str, Any] = (),
        render_mode: str | None = None,
        **options: Any,
    ) -> None:
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(
                f"render_mode must be one of {', '.join(RENDER_MODES)} or None, "
                f"got {render_mode!r}"
            )
        cfg = load_config(self.default_config if config is None else config, overrides)
        check_topology(self, cfg)
        self.render_mode = render_mode
        self.inner = BoundedFeatures(
            make_rl_env(
                cfg, mode=mode, reward=reward, reward_scale=reward_scale, **options
            )
        )
        self.observation_space = self.inner.observation_space
        self.action_space = self.inner.action_space

    @property
    def base(self) -> FLEnv:
        """The topology's base env under the wrappers (``WirelessFL-v0`` & co.)."""
        return self.inner.unwrapped  # type: ignore[return-value]  # make_rl_env builds an FLEnv

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        """Start an episode; ``seed`` goes to the base env (detail 2)."""
        super().reset(seed=seed)
        return self.inner.reset(seed=seed, options=options)

    def step(
        self, action: Any
    ) -> tuple[npt.NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        """Run one round scheduled by the scores ``action``."""
        obs, reward, terminated, truncated, info = self.inner.step(action)
        return obs, float(reward), bool(terminated), bool(truncated), info

    def render(self) -> str | npt.NDArray[np.uint8] | None:  # type: ignore[override]  # gymnasium: RenderFrame
        """The base env's frame in ``render_mode`` (None without one)."""
        if self.render_mode is None:
            return None
        return self.base.render_frame(self.render_mode)

    def close(self) -> None:
        """Close the base env (its actors in emulate mode)."""
        self.inner.close()
