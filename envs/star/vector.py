"""Many ``WirelessFL-v0`` episodes stepping in lockstep: a Gymnasium vector env.

``gym.make_vec("WirelessFL-v0", num_envs=E, vectorization_mode="vector_entry_point")``
builds :class:`WirelessFLVectorEnv`. In emulate mode its E lanes are E real FL
runs on one set of client-host actors (:class:`rayfl.star.lanes.StarLanes`): a
step trains the scheduled clients of every lane in one stacked call per host,
aggregates each lane on the driver and evaluates every lane in one call per
host — instead of E times the three actor round trips of E separate envs
(``rayfl bench env --mode emulate`` measures the speed-up).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium.vector.utils import concatenate, iterate

from envs.lanes import LaneVectorEnv
from envs.star.backends import EmulatedBackend, Outcome, SurrogateBackend, _eval_arrays
from envs.star.columns import ColumnSteps, columns_settings_refusal
from envs.star.scheduling import WirelessFLEnv
from rayfl.config import RunConfig
from rayfl.schedule import Schedule
from rayfl.star.columns import StarColumns, columns_refusal
from rayfl.star.lanes import StarLanes, check_lanes
from rayfl.system import EvalRow, Observation, RoundResult
from rayfl.uplink import UplinkModel

__all__ = ["LaneBackend", "LaneSystem", "WirelessFLVectorEnv"]


class LaneBackend:
    """One lane of a :class:`StarLanes` behind the scheduling env's backend interface.

    What :class:`envs.star.backends.EmulatedBackend` is to one engine run:
    ``restart(seed)``, ``initial()``, ``observe(t)``, ``uplink``, ``data_size``,
    ``run(t, schedule)`` (this lane alone; the vector env runs all lanes at
    once) and ``close()`` (nothing: the vector env owns the lanes).
    """

    def __init__(self, lanes: StarLanes, lane: int) -> None:
        self.lanes, self.lane = lanes, lane
        self.data_size = lanes.num_train.astype(np.float64)

    @property
    def uplink(self) -> UplinkModel:
        """The lane's uplink model (channel, ledger)."""
        return self.lanes.uplink(self.lane)

    @property
    def system(self) -> LaneSystem:
        """The lane's run as policies read a system (``config``, ``dim``, ``uplink``).

        :func:`rayfl.star.context.star_context` of it equals that of an
        ``EmulatedBackend``'s engine with the lane's seed, so a policy is built
        for a lane as for one env (:func:`rayfl.runner.env_policy`).
        """
        return LaneSystem(self.lanes.run_config(self.lane), self.lanes.dim, self.uplink)

    def restart(self, seed: int) -> None:
        """Start a new run with ``seed`` in this lane."""
        self.lanes.restart(self.lane, seed)

    def observe(self, round: int) -> Observation:
        """Return the lane's star observation of round ``round``."""
        return self.lanes.observe(self.lane, round)

    def initial(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Test loss and accuracy of every client's model before the first round."""
        return _eval_arrays(self.lanes.evaluations([self.lane])[self.lane])

    def run(self, round: int, schedule: Schedule) -> Outcome:
        """Run one round of this lane alone and evaluate every client."""
        return outcome(*self.lanes.run({self.lane: (round, schedule)})[self.lane])

    def close(self) -> None:
        """Nothing to release (the vector env closes the lanes)."""


@dataclass(frozen=True)
class LaneSystem:
    """What policies read of a run's system (:func:`rayfl.star.context.star_context`)."""

    config: RunConfig
    dim: int
    uplink: UplinkModel


def outcome(result: RoundResult, evals: list[EvalRow]) -> Outcome:
    """Return the env's :class:`Outcome` of a lane's round and its evaluations."""
    loss, acc = _eval_arrays(evals)
    return Outcome(result.rows, result.delivered, loss, acc, evals)


class _LaneEnv(WirelessFLEnv):
    """A ``WirelessFL-v0`` env whose emulate dynamics are one lane of shared lanes."""

    def __init__(
        self, lanes: Callable[[], StarLanes], lane: int, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._lanes, self._lane = lanes, lane

    def _build(self) -> EmulatedBackend | SurrogateBackend | LaneBackend:  # type: ignore[override]
        if self.mode == "emulate":
            return LaneBackend(self._lanes(), self._lane)
        return super()._build()


class WirelessFLVectorEnv(LaneVectorEnv):
    """E ``WirelessFL-v0`` episodes in lockstep; emulate lanes share their actors.

    ## Description
    Lane e is the ``WirelessFL-v0`` env (:class:`envs.star.scheduling.WirelessFLEnv`)
    with the same arguments: given the same seed and actions it returns the
    same observations, rewards and infos (tests/envs/test_vector.py). In
    emulate mode the lanes' FL runs step together on one set of client hosts
    (:mod:`rayfl.star.lanes`); this needs a config whose clients train from
    their own context alone (:func:`rayfl.star.lanes.check_lanes`: FedAvg or
    FedProx, ``algorithm.trainer`` not ``vectorized``, every client
    evaluated). In surrogate mode the lanes simply step one after another.

    ## Action Space
    ``WirelessFL-v0``'s action space batched over the lanes
    (``gymnasium.vector.utils.batch_space``), e.g. ``MultiDiscrete`` of shape
    (E, K) with entries in [0, N].

    ## Observation Space
    ``WirelessFL-v0``'s ``Dict`` with every entry stacked over the lanes:

    | key | shape | meaning | unit | low | high |
    |-----|-------|---------|------|-----|------|
    | channel_gain | (E, N, K) | lane e's gains this round | dB | -inf | inf |
    | loss, upload_count, privacy_spent, staleness, data_size, eligible | (E, N) | as in ``WirelessFL-v0`` | as there | as there | as there |
    | round | (E, 1) | lane e's round index | – | 0 | inf |

    ## Rewards
    Lane e's ``WirelessFL-v0`` reward, shape (E,) float64.

    ## Starting State
    ``reset(seed=s)`` resets lane e with seed s + e (a list gives each lane's
    seed); ``reset()`` before any reset is ``reset(seed=config.seed)``, later
    each lane draws its seed from its own generator (as ``WirelessFL-v0``).

    ## Episode End
    Per lane, as ``WirelessFL-v0``: *Termination* when no client is eligible,
    *Truncation* after ``config.rounds`` steps. Autoreset
    (``metadata["autoreset_mode"]``) is ``NEXT_STEP``: the step after a lane's
    episode ended resets that lane (its action is ignored, reward 0).

    ## Arguments
    | parameter | type | default | description |
    |-----------|------|---------|-------------|
    | num_envs | int | 1 | E, the number of lanes (>= 1) |
    | config, mode, reward, controls, overrides, participants, render_mode | | | as ``WirelessFL-v0`` |
    | columns | bool or None | None | step the lanes as (lane × client) arrays (:mod:`envs.star.columns`): None = whenever the config and settings allow it, True = required (``ValueError`` naming why not), False = one lane env after another |

    ## Version History
    * v0: initial version (the vector entry point of ``WirelessFL-v0``).
    """

    def __init__(
        self,
        num_envs: int = 1,
        config: str | Path | Mapping[str, Any] | RunConfig | None = None,
        mode: str = "emulate",
        reward: str = "min_max_loss",
        controls: bool = False,
        overrides: Sequence[str] | Mapping[str, Any] = (),
        participants: bool = False,
        render_mode: str | None = None,
        columns: bool | None = None,
    ) -> None:
        self.num_envs = self.check_num_envs(num_envs)
        self._lanes: StarLanes | None = None
        settings = {
            "mode": mode,
            "reward": reward,
            "controls": controls,
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
        self._columns: ColumnSteps | None = None
        refusal = (
            columns_refusal(self.config) or columns_settings_refusal(self)
            if mode == "emulate"
            else "columns run the emulation only"
        )
        if columns and refusal:
            raise ValueError(f"columns=True but {refusal}")
        #: Whether the lanes step as columns (envs.star.columns).
        self.columnar = refusal is None and columns is not False

    def _lane_group(self) -> StarLanes:
        """The lanes' actors, started by the first reset (emulate mode)."""
        if self._lanes is None:
            if self.columnar:
                lanes = StarColumns(self.config, self.num_envs)
                self._lanes, self._columns = lanes, ColumnSteps(self, lanes)
            else:
                self._lanes = StarLanes(self.config, self.num_envs)
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
        if self.columnar:
            return self._reset_columns(seeds)
        firsts = self._reset_lanes(list(range(self.num_envs)), seeds)
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
        if self._columns is not None:
            return self._columns.step(actions)
        per_lane = list(iterate(self.action_space, actions))
        resets = np.flatnonzero(self._autoreset).tolist()
        plays = np.flatnonzero(~self._autoreset).tolist()
        decided = {e: self.envs[e]._decide(per_lane[e]) for e in plays}
        begun = {e: self.envs[e]._begin_episode(None) for e in resets}
        rewards = np.zeros(self.num_envs)
        terminations = np.zeros(self.num_envs, dtype=bool)
        truncations = np.zeros(self.num_envs, dtype=bool)
        observations: list[Any] = [None] * self.num_envs
        lane_infos: list[dict[str, Any]] = [{}] * self.num_envs
        for e, done in self._play(decided):
            schedule, ignored = decided[e]
            scores, info = self.envs[e]._conclude(schedule, ignored, done)
            observations[e], r, term, trunc, lane_infos[e] = self.envs[e]._end_step(
                scores, info
            )
            rewards[e], terminations[e], truncations[e] = r, term, trunc
        for e in resets:
            observations[e], lane_infos[e] = self.envs[e]._first_observation(begun[e])
        infos: dict[str, Any] = {}
        for e in range(self.num_envs):
            infos = self._add_info(infos, lane_infos[e], e)
        self._autoreset = terminations | truncations
        return self._batch(observations), rewards, terminations, truncations, infos

    def render(self) -> tuple[Any, ...] | None:
        """Return each lane's frame (None without a ``render_mode``)."""
        if self.render_mode is None:
            return None
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        """Close the lanes' envs and stop their actors."""
        for env in getattr(self, "envs", []):  # [] when __init__ refused the args
            env.close()
        lanes = getattr(self, "_lanes", None)  # unset when __init__ refused the args
        if lanes is not None:
            lanes.close()
            self._lanes = None

    # ---------------------------------------------------------------- helpers
    def _reset_columns(
        self, seeds: list[int | None]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Reset every lane on the columns (:mod:`envs.star.columns`)."""
        lanes = list(range(self.num_envs))
        self._lane_group()
        assert self._columns is not None
        begun = self._columns.begin(lanes, seeds)
        self._columns.first(lanes)
        infos: dict[str, Any] = {}
        for e, info in enumerate(begun):
            infos = self._add_info(infos, info, e)
        return self._columns.observe(), infos

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
        self, decided: dict[int, tuple[Schedule, list[int]]]
    ) -> Iterator[tuple[int, Outcome]]:
        """Run the decided lanes' rounds; yield (lane, outcome) as each is ready.

        Emulate mode runs the lanes in two halves (:meth:`StarLanes.run`'s
        schedule), and the caller's per-lane work on the first half's outcomes
        (reward, observation) runs while the hosts evaluate the second half.
        """
        if self._lanes is None:  # surrogate mode: one lane after another
            for e, (schedule, _) in decided.items():
                yield e, self.envs[e].backend.run(self.envs[e].round, schedule)
            return
        lanes = list(decided)
        half = (len(lanes) + 1) // 2
        chunks = [c for c in (lanes[:half], lanes[half:]) if c]
        batches = [
            self._lanes.start({e: (self.envs[e].round, decided[e][0]) for e in chunk})
            for chunk in chunks
        ]
        for i, batch in enumerate(batches):
            self._lanes.settle(batch, evaluate_waiting=i == 0)
        for batch in batches:
            for e, done in self._lanes.finish(batch).items():
                yield e, outcome(*done)

    def _batch(self, observations: list[Any]) -> dict[str, Any]:
        self._observations = concatenate(
            self.single_observation_space, observations, self._observations
        )
        batched: Any = deepcopy(self._observations)  # a Dict space's: a dict
        return dict(batched)
