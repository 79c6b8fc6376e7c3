"""One Gymnasium lifecycle for the envs of every topology.

:class:`FLEnv` owns what ``WirelessFL-v0``, ``HierarchicalFL-v0`` and
``D2DNeighbor-v0`` do the same way: the ``mode`` and ``reward`` checks, loading
the config and checking its topology, the episode-seed rule, building the
dynamics (the engine or a surrogate) lazily on the first reset, the reward over
:class:`rayfl.rl.rewards.Scores` (the previous step's scores are the "before" of
the difference rewards), the round counter, truncation after ``config.rounds``
steps, ``close``, and ``render`` (``render_mode`` "ansi" or "rgb_array":
the round's channel gains and schedule, :mod:`envs.render`). A topology's env
supplies the hooks: ``_build`` (its dynamics), ``_restart`` (a new episode on
them), ``_initial_scores``, ``_play`` (one round from an action; it sets
``self.marks``, the schedule's cells of the gain table), ``_get_obs``,
``_gain_table`` (what ``render`` shows), and optionally ``_terminated`` and
``_penalty``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from envs.render import RENDER_MODES, render_ansi, render_rgb
from rayfl.config import RunConfig, load_config
from rayfl.registry import topology_of
from rayfl.rl.rewards import DIFFERENCE_REWARDS, Scores, check_reward, reward

__all__ = ["MODES", "FLEnv", "check_topology", "kind_spelling"]

#: The dynamics an env runs on: the real engine on Ray, or the cheap surrogate.
MODES = ("emulate", "surrogate")


def kind_spelling(plugin: Any) -> str:
    """The ``topology.kind`` a config of ``plugin`` is written with (its section's default)."""
    field = getattr(plugin.config, "model_fields", {}).get("kind")
    default = getattr(field, "default", None)
    return default if isinstance(default, str) else str(plugin.name)


def check_topology(env: Any, cfg: RunConfig) -> None:
    """Raise a one-line ``ValueError`` unless ``cfg`` runs on ``env``'s topology.

    ``env.topology_kind`` names the topology (a name or an alias); a config of
    a topology derived from it (a plug-in subclass) is accepted too.
    """
    want = topology_of(env.topology_kind)
    if not isinstance(topology_of(cfg), type(want)):
        raise ValueError(
            f"{type(env).__name__} needs topology.kind={kind_spelling(want)}, got "
            f"topology.kind={cfg.topology.kind}"
        )


class FLEnv(gym.Env):
    """The lifecycle shared by the topologies' envs (see the module docstring)."""

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 1}
    #: The topology's name in :mod:`rayfl.rl.rewards` and the policy registry.
    topology_kind: ClassVar[str]
    #: The config of ``gym.make(id)`` without one (None: a config is required).
    default_config: ClassVar[Mapping[str, Any] | None] = None

    config: RunConfig
    mode: str
    reward_kind: str
    round: int
    _backend: Any = None
    _scores: Scores | None = None
    #: The observation the last action was decided on (what ``render`` shows).
    frame_obs: Any = None
    #: The last round's schedule as (row, column) cells of :meth:`_gain_table`.
    marks: list[tuple[int, int]]
    _next_obs: Any = None

    def _setup(
        self,
        config: Any,
        overrides: Any,
        mode: str,
        reward: str,
        cfg: RunConfig | None = None,
        render_mode: str | None = None,
    ) -> RunConfig:
        """Check ``mode``, ``reward`` and ``render_mode``, load the config (or take ``cfg``), check its topology."""
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(
                f"render_mode must be one of {', '.join(RENDER_MODES)} or None, "
                f"got {render_mode!r}"
            )
        self.render_mode, self.marks = render_mode, []
        if mode not in MODES:
            raise ValueError(f"mode must be 'emulate' or 'surrogate', got {mode!r}")
        rewards = topology_of(self.topology_kind).rewards
        check_reward(reward, topology=self.topology_kind, mode=mode, rewards=rewards)
        if cfg is None:
            if config is None and self.default_config is None:
                raise ValueError(
                    f"{type(self).__name__} needs a config "
                    f"(topology.kind={kind_spelling(topology_of(self.topology_kind))})"
                )
            cfg = load_config(
                self.default_config if config is None else config, overrides
            )
        check_topology(self, cfg)
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
        return self._first_observation(self._begin_episode(seed))

    def _begin_episode(self, seed: int | None) -> dict[str, Any]:
        """Seed the env, build the dynamics once, restart them; return reset info.

        The first half of :meth:`reset`; a vector env (``envs.star.vector``) begins
        several episodes before it asks for their first observations.
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
        return self._restart(episode_seed)

    def _first_observation(
        self, info: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The second half of :meth:`reset`: the initial scores and observation."""
        self.round = 0
        self._scores = (
            self._initial_scores() if self.reward_kind in DIFFERENCE_REWARDS else None
        )
        obs = self.frame_obs = self._get_obs()
        self.marks, self._next_obs = [], obs
        return obs, {"round": 0, **info}

    def step(
        self, action: Any
    ) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Run one round with what ``action`` decides; ``info["round"]``: rounds done."""
        if self._backend is None:
            raise RuntimeError("call reset() before step()")
        return self._end_step(*self._play(action))

    def _end_step(
        self, scores: Scores, info: dict[str, Any]
    ) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """The rest of :meth:`step` after the round was played: reward, next obs."""
        decided_on = self._next_obs
        value = reward(self.reward_kind, scores, self._scores) - self._penalty(info)
        self._scores = scores
        self.round += 1
        info["round"] = self.round
        obs = self._next_obs = self._get_obs()
        self.frame_obs = decided_on
        return obs, value, self._terminated(obs), self.round >= self.config.rounds, info

    @property
    def backend(self) -> Any:
        """The dynamics behind the env (after ``reset``)."""
        if self._backend is None:
            raise RuntimeError("call reset() first")
        return self._backend

    @property
    def scores(self) -> Scores | None:
        """The scores after the last step (or the initial ones; None before any)."""
        return self._scores

    def render(self) -> str | npt.NDArray[np.uint8] | None:  # type: ignore[override]  # gymnasium: RenderFrame
        """Render the frame in ``render_mode`` (None without one): gains and schedule.

        After ``reset`` the gains of the first round and no schedule; after a
        step the gains that round's action was decided on and the schedule it
        made (:mod:`envs.render`).
        """
        if self.render_mode is None:
            return None
        return self.render_frame(self.render_mode)

    def render_frame(self, mode: str) -> str | npt.NDArray[np.uint8]:
        """Return the current frame as ``mode`` ("ansi" text or "rgb_array" image)."""
        if self.frame_obs is None:
            raise RuntimeError("call reset() before render()")
        gain, labels = self._gain_table(self.frame_obs)
        if mode == "rgb_array":
            return render_rgb(gain, self.marks)
        if mode != "ansi":
            raise ValueError(
                f"mode must be one of {', '.join(RENDER_MODES)}, got {mode!r}"
            )
        title = (
            f"{type(self).__name__} round {self.round} ({self.mode}, "
            f"reward {self.reward_kind}): channel gain [dB], * = scheduled"
        )
        return render_ansi(gain, self.marks, title, labels)

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

    def _gain_table(
        self, obs: Mapping[str, Any]
    ) -> tuple[npt.NDArray[np.float64], list[str]]:
        """The (rows, columns) gain table of ``obs`` [dB] and its row labels."""
        raise NotImplementedError

    def _terminated(self, obs: Mapping[str, Any]) -> bool:
        """Whether the episode ended before ``config.rounds`` (default: never)."""
        return False

    def _penalty(self, info: Mapping[str, Any]) -> float:
        """A cost subtracted from the reward (default: none)."""
        return 0.0
