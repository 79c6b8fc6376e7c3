"""Many ``HierarchicalFL-v0`` episodes stepping in lockstep: a Gymnasium vector env.

``gym.make_vec("HierarchicalFL-v0", num_envs=E)`` builds
:class:`HierarchicalFLVectorEnv`. In emulate mode its E lanes are E real H2FDP
runs on one set of device hosts (:class:`rayfl.hierarchy.lanes.HierLanes`): a
step trains every lane's participants in one stacked call per host and
segment, runs every lane's edges and cloud on the driver, and evaluates every
lane in one call per host — instead of E engines with edge and cloud actors.
:func:`lanes_env` builds the default config's lanes (the env benchmark's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from copy import deepcopy
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium.vector.utils import concatenate, iterate

from envs.hierarchy.scheduling import HierarchicalSchedulingEnv
from envs.lanes import LaneVectorEnv
from rayfl.config import RunConfig
from rayfl.hierarchy.lanes import HierLanes, check_lanes
from rayfl.schedule import Schedule
from rayfl.system import EvalRow, RoundResult

__all__ = ["HierarchicalFLVectorEnv", "LaneSystem", "lanes_env"]


class LaneSystem:
    """One lane of a :class:`HierLanes` as the env's ``system`` (an engine's face).

    What the hierarchical env reads of its engine: ``config``, ``num_test``,
    ``restart(seed)``, ``scheduling_observations(k)``, ``evaluate()``,
    ``run_global_round(k, schedules)`` (this lane alone; the vector env runs
    all lanes at once) and ``close()`` (nothing: the vector env owns the lanes).
    """

    def __init__(self, lanes: HierLanes, lane: int) -> None:
        self.lanes, self.lane = lanes, lane
        self.num_test = lanes.num_test

    @property
    def config(self) -> RunConfig:
        """The lane's run config (the shared config with the lane's seed)."""
        return self.lanes.run_config(self.lane)

    def reset(self, **changes: Any) -> None:
        """Refused: the lanes share one config."""
        raise ValueError(f"lanes share one config; cannot change {sorted(changes)}")

    def restart(self, seed: int) -> None:
        """Start a new run with ``seed`` in this lane."""
        self.lanes.restart(self.lane, seed)

    def scheduling_observations(self, k: int) -> list[dict[str, np.ndarray]]:
        """Each edge's observation of global round k."""
        return self.lanes.observations(self.lane, k)

    def evaluate(self) -> list[EvalRow]:
        """Every device's evaluation of the lane's global model, by id."""
        return self.lanes.evaluations([self.lane])[self.lane]

    def run_global_round(
        self, k: int, schedules: Sequence[Schedule]
    ) -> tuple[RoundResult, dict[str, Any]]:
        """Run global round k of this lane alone."""
        result = self.lanes.run({self.lane: (k, schedules)})[self.lane]
        return result, result.extras

    def close(self) -> None:
        """Nothing to release (the vector env closes the lanes)."""


class _LaneEnv(HierarchicalSchedulingEnv):
    """A ``HierarchicalFL-v0`` env whose emulate dynamics are one lane of shared lanes."""

    def __init__(
        self, lanes: Callable[[], HierLanes], lane: int, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._lanes, self._lane = lanes, lane

    def _build(self) -> Any:
        if self.mode == "emulate":
            return LaneSystem(self._lanes(), self._lane)
        return super()._build()


class HierarchicalFLVectorEnv(LaneVectorEnv):
    """E ``HierarchicalFL-v0`` episodes in lockstep; emulate lanes share their hosts.

    ## Description
    Lane e is the ``HierarchicalFL-v0`` env
    (:class:`envs.hierarchy.scheduling.HierarchicalSchedulingEnv`) with the same
    arguments: given the same seed and actions it returns the same observations,
    rewards and infos (tests/envs/test_hierarchy_lanes.py). In emulate mode the
    lanes' runs step together on one set of device hosts
    (:mod:`rayfl.hierarchy.lanes`; :func:`rayfl.hierarchy.lanes.check_lanes`
    names the configs refused). In surrogate mode the lanes step one after
    another.

    ## Action Space
    ``HierarchicalFL-v0``'s action space batched over the lanes
    (``gymnasium.vector.utils.batch_space``): ``MultiDiscrete`` of shape
    (E, Σ_c K_e), or ``MultiBinary`` (E, Σ_c n_c) with ``participants=True``.

    ## Observation Space
    ``HierarchicalFL-v0``'s ``Dict`` of per-edge ``Dict`` s, every entry stacked
    over the lanes: ``edge_c/channel_gain`` (E, n_c, K_e), ``edge_c/<key>``
    (E, n_c) for ``eligible``, ``loss``, ``upload_count``, ``privacy_spent``,
    ``staleness``, ``data_size``, and ``edge_c/round`` (E, 1).

    ## Rewards
    Lane e's ``HierarchicalFL-v0`` reward, shape (E,) float64.

    ## Starting State
    ``reset(seed=s)`` resets lane e with seed s + e (a list gives each lane's
    seed); ``reset()`` before any reset is ``reset(seed=config.seed)``, later
    each lane draws its seed from its own generator (as ``HierarchicalFL-v0``).

    ## Episode End
    Per lane, *Truncation* after ``config.rounds`` steps. Autoreset is
    ``NEXT_STEP``: the step after a lane's episode ended resets that lane (its
    action is ignored, reward 0).

    ## Arguments
    | parameter | type | default | description |
    |-----------|------|---------|-------------|
    | num_envs | int | 1 | E, the number of lanes (>= 1) |
    | config, reward, overrides, mode, participants, render_mode | | | as ``HierarchicalFL-v0`` |

    ## Version History
    * v0: initial version (the vector entry point of ``HierarchicalFL-v0``).
    """

    def __init__(
        self,
        num_envs: int = 1,
        config: str | Path | Mapping[str, Any] | RunConfig | None = None,
        reward: str | None = None,
        overrides: Sequence[str] | Mapping[str, Any] = (),
        mode: str = "emulate",
        participants: bool = False,
        render_mode: str | None = None,
    ) -> None:
        self.num_envs = self.check_num_envs(num_envs)
        self._lanes: HierLanes | None = None
        settings = {
            "reward": reward,
            "mode": mode,
            "participants": participants,
            "render_mode": render_mode,
        }
        first = _LaneEnv(
            self._lane_group, 0, config=config, overrides=overrides, **settings
        )
        self.config, self.mode, self.render_mode = first.config, mode, render_mode
        if mode == "emulate":
            check_lanes(self.config)
        self._take_lanes(
            first,
            lambda e: _LaneEnv(self._lane_group, e, config=self.config, **settings),
        )
        for env in self.envs:  # one config, one set of rules: one memo of decisions
            env._decisions = first._decisions

    def _lane_group(self) -> HierLanes:
        """The lanes' hosts, started by the first reset (emulate mode)."""
        if self._lanes is None:
            self._lanes = HierLanes(self.config, self.num_envs)
        return self._lanes

    # ---------------------------------------------------------------- gym API
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Reset every lane (see Starting State); return the batched obs and infos."""
        seeds = self._reset_seeds(seed)
        self._started = True
        self._autoreset[:] = False
        lanes = list(range(self.num_envs))
        firsts = self._reset_lanes(lanes, seeds)
        infos: dict[str, Any] = {}
        for e, (_, info) in enumerate(firsts):
            infos = self._add_info(infos, info, e)
        return self._batch([obs for obs, _ in firsts]), infos

    def step(
        self, actions: Any
    ) -> tuple[dict[str, Any], npt.NDArray[np.float64], Any, Any, dict[str, Any]]:
        """Step every lane with its action; a lane whose episode ended resets."""
        if not self._started:
            raise RuntimeError("call reset() before step()")
        per_lane = list(iterate(self.action_space, actions))
        resets = np.flatnonzero(self._autoreset).tolist()
        plays = np.flatnonzero(~self._autoreset).tolist()
        decided = {e: self.envs[e]._decide(per_lane[e]) for e in plays}
        begun = {e: self.envs[e]._begin_episode(None) for e in resets}
        played = self._play({e: schedules for e, (schedules, _) in decided.items()})
        rewards = np.zeros(self.num_envs)
        terminations = np.zeros(self.num_envs, dtype=bool)
        truncations = np.zeros(self.num_envs, dtype=bool)
        observations: list[Any] = [None] * self.num_envs
        lane_infos: list[dict[str, Any]] = [{}] * self.num_envs
        if self._lanes is not None and resets:  # the restarted lanes' first evaluation
            self._lanes.evaluations(resets)
        for e in plays:
            env, (result, extras) = self.envs[e], played[e]
            scores, info = env._conclude(decided[e][1], result, extras)
            observations[e], r, term, trunc, lane_infos[e] = env._end_step(scores, info)
            rewards[e], terminations[e], truncations[e] = r, term, trunc
        for e in resets:
            observations[e], lane_infos[e] = self.envs[e]._first_observation(begun[e])
        infos: dict[str, Any] = {}
        for e in range(self.num_envs):
            infos = self._add_info(infos, lane_infos[e], e)
        self._autoreset = terminations | truncations
        return self._batch(observations), rewards, terminations, truncations, infos

    def close_extras(self, **kwargs: Any) -> None:
        """Close the lanes' envs and stop their hosts."""
        for env in getattr(self, "envs", []):  # [] when __init__ refused the args
            env.close()
        lanes = getattr(self, "_lanes", None)  # unset when __init__ refused the args
        if lanes is not None:
            lanes.close()
            self._lanes = None

    # ---------------------------------------------------------------- helpers
    def _reset_lanes(
        self, lanes: list[int], seeds: list[int | None]
    ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Reset ``lanes``: begin every episode, then evaluate them all at once."""
        begun = [
            self.envs[e]._begin_episode(seed)
            for e, seed in zip(lanes, seeds, strict=True)
        ]
        if self._lanes is not None:
            self._lanes.evaluations(lanes)
        return [
            self.envs[e]._first_observation(info)
            for e, info in zip(lanes, begun, strict=True)
        ]

    def _play(
        self, decided: dict[int, list[Schedule]]
    ) -> dict[int, tuple[Any, Mapping[str, Any]]]:
        """Run the decided lanes' global rounds: lane → (result, extras).

        Emulate mode runs them all at once (:meth:`HierLanes.run`); surrogate
        mode one lane after another.
        """
        if self._lanes is None:
            return {
                e: self.envs[e].system.run_global_round(self.envs[e].round, schedules)
                for e, schedules in decided.items()
            }
        done = self._lanes.run(
            {e: (self.envs[e].round, schedules) for e, schedules in decided.items()}
        )
        return {e: (result, result.extras) for e, result in done.items()}

    def _batch(self, observations: list[Any]) -> dict[str, Any]:
        self._observations = concatenate(
            self.single_observation_space, observations, self._observations
        )
        batched: Any = deepcopy(self._observations)  # a Dict space's: a dict
        return dict(batched)


def lanes_env(num_envs: int) -> LaneVectorEnv:
    """The default ``HierarchicalFL-v0`` config's emulate lanes (the env benchmark's)."""
    return HierarchicalFLVectorEnv(num_envs=num_envs, mode="emulate")
