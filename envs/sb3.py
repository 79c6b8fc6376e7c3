"""Emulate lanes for Stable-Baselines3: :class:`SB3Lanes`, a ``VecEnv``.

Stable-Baselines3 trains on its own ``VecEnv`` type, whose ``step`` resets an
ended env at once (the reset observation is returned, the last one is in
``info["terminal_observation"]``). rayfl's lanes are a Gymnasium
``VectorEnv`` with ``NEXT_STEP`` autoreset (what RLlib wants): E FL runs of a
topology stepping together on shared client actors (the plug-in's ``lanes``
env, e.g. :class:`envs.rl_vector.RLVectorEnv`). :class:`SB3Lanes` hands
those lanes to Stable-Baselines3 unchanged: one lockstep round per SB3 step,
the driver calling the hosts once per round, not once per lane.

Example::

    from stable_baselines3 import PPO
    from envs.sb3 import sb3_lanes

    venv = sb3_lanes("examples/rl_star_small.yaml", num_envs=8)
    PPO("MlpPolicy", venv, n_steps=64, batch_size=128, device="cpu").learn(4096)

Episode ends:
    When every lane ends at the same step (truncation after ``config.rounds``
    rounds, the usual case: lanes run in lockstep), the adapter takes the
    autoreset step at once, so SB3 sees exactly what a set of separate envs
    would give it. When some lanes end before the others (a termination, e.g.
    every client's budget spent), the playing lanes cannot wait: an ended
    lane's next SB3 step is its autoreset step (its action is ignored, reward
    0, not done), so SB3 records one extra zero-reward transition at the start
    of that lane's next episode. ``info["autoreset"]`` marks it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["SB3Lanes", "sb3_lanes"]


def _vec_env_base() -> type:
    try:
        from stable_baselines3.common.vec_env import VecEnv
    except ImportError as error:  # an optional extra
        raise ImportError(
            "envs.sb3 needs Stable-Baselines3: pip install 'rayfl[sb3]'"
        ) from error
    return VecEnv


class SB3Lanes(_vec_env_base()):  # type: ignore[misc]  # a class made at import
    """A Gymnasium ``VectorEnv`` with ``NEXT_STEP`` autoreset as SB3's ``VecEnv``.

    Args:
        venv: The lanes (``num_envs``, ``single_observation_space``,
            ``single_action_space``, ``reset(seed=[...])``, ``step``).
    """

    def __init__(self, venv: Any) -> None:
        self.venv = venv  # before the base class asks get_attr("render_mode")
        super().__init__(
            venv.num_envs, venv.single_observation_space, venv.single_action_space
        )
        self._actions: npt.NDArray[Any] | None = None
        #: Lanes whose next step is their autoreset step (ended out of step).
        self._pending = np.zeros(self.num_envs, dtype=bool)

    def reset(self) -> npt.NDArray[Any]:
        """Begin an episode in every lane, with the seeds of :meth:`seed` if set."""
        seeds = list(self._seeds)
        obs, _ = self.venv.reset(seed=None if all(s is None for s in seeds) else seeds)
        self._reset_seeds()
        self._pending[:] = False
        return obs

    def step_async(self, actions: npt.NDArray[Any]) -> None:
        """Keep the actions for :meth:`step_wait`."""
        self._actions = np.asarray(actions)

    def step_wait(self) -> tuple[npt.NDArray[Any], npt.NDArray[Any], Any, list[dict]]:
        """Step every lane once; an ended lane's observation is its next episode's."""
        if self._actions is None:
            raise RuntimeError("call step_async() before step_wait()")
        was_pending = self._pending.copy()
        obs, rewards, terminated, truncated, info = self.venv.step(self._actions)
        done = np.asarray(terminated) | np.asarray(truncated)
        infos: list[dict[str, Any]] = [
            {"TimeLimit.truncated": bool(truncated[e] and not terminated[e])}
            for e in range(self.num_envs)
        ]  # as SB3's own VecEnvs say it
        for e in np.flatnonzero(was_pending).tolist():
            infos[e]["autoreset"] = True
        for e in np.flatnonzero(done).tolist():
            infos[e]["terminal_observation"] = np.array(obs[e])
        if done.all():  # lockstep: take every lane's autoreset step now
            obs, *_ = self.venv.step(self._actions)
            done_now = np.zeros(self.num_envs, dtype=bool)
        else:
            done_now = done
        self._pending = done_now
        self._actions = None
        return obs, np.asarray(rewards, dtype=np.float32), done, infos

    def close(self) -> None:
        """Close the lanes (their client actors)."""
        self.venv.close()

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        """The lanes' attribute, once per lane asked for."""
        return [getattr(self.venv, attr_name)] * len(self._indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        """Set an attribute of the lanes (they share one object)."""
        setattr(self.venv, attr_name, value)

    def env_method(
        self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any
    ) -> list[Any]:
        """Call a method of the lanes once, its result given per lane asked for."""
        result = getattr(self.venv, method_name)(*args, **kwargs)
        return [result] * len(self._indices(indices))

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        """Lanes are not Gymnasium-wrapped envs."""
        return [False] * len(self._indices(indices))

    def _indices(self, indices: Any) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, int):
            return [indices]
        return list(indices if isinstance(indices, Iterable) else [indices])


def sb3_lanes(
    config: str | Path | Mapping[str, Any] | Any = None,
    *,
    num_envs: int = 8,
    overrides: Sequence[str] | Mapping[str, Any] = (),
    **kwargs: Any,
) -> SB3Lanes:
    """Return a topology's emulate lanes (its plug-in's ``lanes`` env) for SB3.

    Args:
        config: A run config (None: the default topology's default config).
        num_envs: E, the number of lanes.
        overrides: Config overrides ``key.path=value``.
        **kwargs: The lanes' options (``mode``, ``reward``, ``reward_scale``,
            ``controls``...; see the ``lanes`` env of the plug-in).

    Raises:
        ValueError: If the topology has no lanes.
    """
    from rayfl.config import load_config
    from rayfl.registry import load, topology_names, topology_of

    if config is None:
        plugin = topology_of(topology_names()[0])
    else:
        plugin = topology_of(load_config(config, overrides))
    if "lanes" not in plugin.envs:
        raise ValueError(f"topology.kind={plugin.name} has no emulate lanes yet")
    make = load(plugin.envs["lanes"])
    return SB3Lanes(make(config, num_envs=num_envs, overrides=overrides, **kwargs))
