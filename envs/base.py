"""One Gymnasium lifecycle for the envs of every topology.

:class:`FLEnv` owns what ``WirelessFL-v0``, ``HierarchicalFL-v0`` and
``D2DNeighbor-v0`` do the same way: the ``mode`` and ``reward`` checks, loading
the config and checking its topology, the episode-seed rule, building the
dynamics (the engine or a surrogate) lazily on the first reset, the reward over
:class:`rayfl.rewards.Scores` (the previous step's scores are the "before" of
the difference rewards), the round counter, truncation after ``config.rounds``
steps, and ``close``. A topology's env supplies the hooks: ``_build`` (its
dynamics), ``_restart`` (a new episode on them), ``_initial_scores``, ``_play``
(one round from an action), ``_get_obs``, and optionally ``_terminated`` and
``_penalty``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym

from rayfl.config import RunConfig, load_config
from rayfl.rewards import DIFFERENCE_REWARDS, Scores, check_reward, reward

__all__ = ["MODES", "FLEnv"]

#: The dynamics an env runs on: the real engine on Ray, or the cheap surrogate.
MODES = ("emulate", "surrogate")


class FLEnv(gym.Env):
    """The lifecycle shared by the topologies' envs (see the module docstring)."""

    metadata = {"render_modes": []}
    #: The topology's name in :mod:`rayfl.rewards` and the policy registry.
    topology_kind: ClassVar[str]
    #: The config of ``gym.make(id)`` without one (None: a config is required).
    default_config: ClassVar[Mapping[str, Any] | None] = None

    config: RunConfig
    mode: str
    reward_kind: str
    round: int
    _backend: Any = None
    _scores: Scores | None = None

    def _setup(
        self,
        config: Any,
        overrides: Any,
        mode: str,
        reward: str,
        cfg: RunConfig | None = None,
    ) -> RunConfig:
        """Check ``mode`` and ``reward``, load the config (or take ``cfg``), check its topology."""
        if mode not in MODES:
            raise ValueError(f"mode must be 'emulate' or 'surrogate', got {mode!r}")
        check_reward(reward, topology=self.topology_kind, mode=mode)
        want = "flat" if self.topology_kind == "star" else self.topology_kind
        if cfg is None:
            if config is None and self.default_config is None:
                raise ValueError(
                    f"{type(self).__name__} needs a config (topology.kind={want})"
                )
            cfg = load_config(
                self.default_config if config is None else config, overrides
            )
        if cfg.topology.kind != want:
            raise ValueError(
                f"{type(self).__name__} needs topology.kind={want}, got "
                f"topology.kind={cfg.topology.kind}"
            )
        self.config, self.mode, self.reward_kind = cfg, mode, reward
        self._backend, self._scores, self.round = None, None, 0
        return cfg

    # ---------------------------------------------------------------- gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start a new run on the same data (the partition comes from ``config.seed``).

        The run seed is ``seed`` when given, else ``config.seed`` on the first
        reset and a draw from the env's generator afterwards; it drives the
        model init, batch order, noise and the channel.
        """
        super().reset(seed=seed)
        if seed is not None:
            episode_seed = int(seed)
        elif self._backend is None:
            episode_seed = int(self.config.seed)
        else:
            episode_seed = int(self.np_random.integers(2**31 - 1))
        if self._backend is None:
            self._backend = self._build()
        info = self._restart(episode_seed)
        self.round = 0
        self._scores = (
            self._initial_scores() if self.reward_kind in DIFFERENCE_REWARDS else None
        )
        return self._get_obs(), {"round": 0, **info}

    def step(
        self, action: Any
    ) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Run one round with what ``action`` decides; ``info["round"]``: rounds done."""
        if self._backend is None:
            raise RuntimeError("call reset() before step()")
        scores, info = self._play(action)
        value = reward(self.reward_kind, scores, self._scores) - self._penalty(info)
        self._scores = scores
        self.round += 1
        info["round"] = self.round
        obs = self._get_obs()
        return obs, value, self._terminated(obs), self.round >= self.config.rounds, info

    @property
    def backend(self) -> Any:
        """The dynamics behind the env (after ``reset``)."""
        if self._backend is None:
            raise RuntimeError("call reset() first")
        return self._backend

    def close(self) -> None:
        """Stop the engine's actors (if this env built them)."""
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    # ---------------------------------------------------------------- hooks
    def _build(self) -> Any:
        """The dynamics (engine or surrogate), built on the first reset."""
        raise NotImplementedError

    def _restart(self, seed: int) -> dict[str, Any]:
        """Start an episode of the dynamics from ``seed``; return extra reset info."""
        raise NotImplementedError

    def _initial_scores(self) -> Scores:
        """The scores before the first round (the difference rewards' baseline)."""
        raise NotImplementedError

    def _play(self, action: Any) -> tuple[Scores, dict[str, Any]]:
        """Run the round ``self.round`` decided by ``action``; return its scores and info."""
        raise NotImplementedError

    def _get_obs(self) -> dict[str, Any]:
        raise NotImplementedError

    def _terminated(self, obs: Mapping[str, Any]) -> bool:
        """Whether the episode ended before ``config.rounds`` (default: never)."""
        return False

    def _penalty(self, info: Mapping[str, Any]) -> float:
        """A cost subtracted from the reward (default: none)."""
        return 0.0
