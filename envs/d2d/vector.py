"""Many ``D2DNeighbor-v0`` episodes stepping in lockstep: a Gymnasium vector env.

``gym.make_vec("D2DNeighbor-v0", num_envs=E, vectorization_mode="vector_entry_point")``
builds :class:`D2DNeighborVectorEnv`. In emulate mode (its default) its E lanes
are E real pFedWN runs on one set of node-host actors
(:class:`rayfl.d2d.lanes.D2DLanes`): a step trains every lane's selected
neighbors in one stacked call per host, then runs every lane's target round
(E/M, eq. 1, evaluations, local run) in one call per host — instead of E times
the engine's sequential actor round trips. :func:`lanes_env` builds the
default-config vector env (the benchmark's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from copy import deepcopy
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium.vector.utils import concatenate, iterate

from envs.d2d.backends import D2DOutcome, Selections
from envs.d2d.neighbor import D2DNeighborEnv
from envs.lanes import LaneVectorEnv
from rayfl.config import RunConfig
from rayfl.d2d.lanes import D2DLaneOutcome, D2DLanes, check_d2d_lanes
from rayfl.d2d.motion import D2DMotion
from rayfl.d2d.selection import D2DLayout
from rayfl.data.federated import FederatedData

__all__ = ["D2DLaneBackend", "D2DNeighborVectorEnv", "lanes_env"]


class D2DLaneBackend:
    """One lane of a :class:`D2DLanes` behind ``D2DNeighbor-v0``'s backend interface.

    What :class:`envs.d2d.backends.D2DEmulatedBackend` is to one engine:
    ``restart(seed)``, ``data_size``, ``initial(targets)``, ``run(round,
    selections)`` (this lane alone; the vector env runs all lanes at once) and
    ``close()`` (nothing: the vector env owns the lanes). ``rows`` stays empty
    (the lanes keep no per-client records).
    """

    def __init__(self, lanes: D2DLanes, lane: int) -> None:
        self.lanes, self.lane = lanes, lane
        self.rows: list[dict[str, Any]] = []

    @property
    def data_size(self) -> npt.NDArray[np.int64]:
        """(N,) train samples per client."""
        return self.lanes.data_size

    def restart(self, seed: int) -> D2DLayout:
        """Start a new run with ``seed`` in this lane."""
        return self.lanes.restart(self.lane, seed)

    @property
    def motion(self) -> D2DMotion:
        """This lane's round-t layouts and P^err (one per run, shared with the env)."""
        run = self.lanes.lanes[self.lane]
        assert run is not None
        return run.motion

    def initial(
        self, targets: Sequence[int]
    ) -> tuple[dict[int, float], dict[int, float]]:
        """Loss and accuracy of ω⁰ on the target's test split (target → value).

        Filled by :meth:`D2DLanes.evaluate_initial`, which the vector env calls
        once every lane it resets has begun its episode.
        """
        return self.lanes.initial(self.lane)

    def run(self, round: int, selections: Selections) -> D2DOutcome:
        """Run one round of this lane alone."""
        return outcome(self.lanes.run({self.lane: (round, selections)})[self.lane])

    def close(self) -> None:
        """Nothing to release (the vector env closes the lanes)."""


def outcome(lane: D2DLaneOutcome) -> D2DOutcome:
    """The env's :class:`D2DOutcome` of a lane's round."""
    return D2DOutcome(
        lane.test_loss, lane.test_acc, lane.delivered, lane.em_weight, lane.train_loss
    )


class _LaneEnv(D2DNeighborEnv):
    """A ``D2DNeighbor-v0`` env whose emulate dynamics are one lane of shared lanes."""

    def __init__(self, owner: D2DNeighborVectorEnv, lane: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._owner, self._lane = owner, lane

    def _build(self) -> Any:
        if self.mode == "emulate":
            return D2DLaneBackend(self._owner.lane_group(), self._lane)
        return super()._build()

    def _base_observation(
        self, target: int, seed: int
    ) -> dict[str, npt.NDArray[np.float32]]:
        if self.mode == "emulate":  # the lanes drew it with the t = 0 selection
            return self._owner.lane_group().first_observation(self._lane)
        return super()._base_observation(target, seed)


class D2DNeighborVectorEnv(LaneVectorEnv):
    """E ``D2DNeighbor-v0`` episodes in lockstep; emulate lanes share their actors.

    ## Description
    Lane e is the ``D2DNeighbor-v0`` env (:class:`envs.d2d.neighbor.D2DNeighborEnv`)
    with the same arguments: given the same seed and actions it returns the
    same observations, rewards and infos, to float32 rounding
    (tests/envs/test_d2d_lanes.py). In emulate mode the lanes' runs step
    together on one set of node hosts (:mod:`rayfl.d2d.lanes`); the configs
    they refuse are :func:`rayfl.d2d.lanes.check_d2d_lanes`'s (pFedWN, one
    target, mlr/mlp). In surrogate mode the lanes step one after another.

    ## Action Space
    ``D2DNeighbor-v0``'s ``MultiDiscrete([N + 1] * F)`` batched over the lanes:
    shape (E, F).

    ## Observation Space
    ``D2DNeighbor-v0``'s ``Dict`` with every entry stacked over the lanes:
    ``channel_gain`` (E, N, F), ``round`` (E, 1), the others (E, N).

    ## Rewards
    Lane e's ``D2DNeighbor-v0`` reward, shape (E,) float64.

    ## Starting State
    ``reset(seed=s)`` resets lane e with seed s + e (a list gives each lane's
    seed); ``reset()`` before any reset is ``reset(seed=config.seed)``, later
    each lane draws its seed from its own generator (as ``D2DNeighbor-v0``).

    ## Episode End
    Per lane, as ``D2DNeighbor-v0``: *Truncation* after ``config.rounds``
    steps. Autoreset (``metadata["autoreset_mode"]``) is ``NEXT_STEP``: the
    step after a lane's episode ended resets that lane (action ignored, reward 0).

    ## Arguments
    | parameter | type | default | description |
    |-----------|------|---------|-------------|
    | num_envs | int | 1 | E, the number of lanes (>= 1) |
    | mode | str | "emulate" | "emulate" (lanes on shared actors) or "surrogate" |
    | config, reward, neighbor_cost, invalid_action, overrides, data, render_mode | | | as ``D2DNeighbor-v0`` (no ``system``: lanes own their actors) |

    ## Version History
    * v0: initial version (the vector entry point of ``D2DNeighbor-v0``).
    """

    def __init__(
        self,
        num_envs: int = 1,
        config: str | Path | Mapping[str, Any] | RunConfig | None = None,
        mode: str = "emulate",
        reward: str = "loss_decrease",
        neighbor_cost: float = 0.0,
        invalid_action: str = "repair",
        overrides: Sequence[str] | Mapping[str, Any] = (),
        data: FederatedData | None = None,
        render_mode: str | None = None,
    ) -> None:
        self.num_envs = self.check_num_envs(num_envs)
        self._lanes: D2DLanes | None = None
        self._data = data
        settings = {
            "mode": mode,
            "reward": reward,
            "neighbor_cost": neighbor_cost,
            "invalid_action": invalid_action,
            "data": data,
            "render_mode": render_mode,
        }
        first = _LaneEnv(self, 0, config=config, overrides=overrides, **settings)
        self.config, self.mode, self.render_mode = first.config, mode, render_mode
        if mode == "emulate":
            check_d2d_lanes(self.config)
        self._take_lanes(
            first, lambda e: _LaneEnv(self, e, config=self.config, **settings)
        )

    def lane_group(self) -> D2DLanes:
        """The lanes' actors, started by the first reset (emulate mode)."""
        if self._lanes is None:
            self._lanes = D2DLanes(self.config, self.num_envs, data=self._data)
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
        per_lane = list(iterate(self.action_space, actions))
        resets = np.flatnonzero(self._autoreset).tolist()
        plays = np.flatnonzero(~self._autoreset).tolist()
        decided = {e: self.envs[e]._decide(per_lane[e]) for e in plays}
        rewards = np.zeros(self.num_envs)
        terminations = np.zeros(self.num_envs, dtype=bool)
        truncations = np.zeros(self.num_envs, dtype=bool)
        observations: list[Any] = [None] * self.num_envs
        lane_infos: list[dict[str, Any]] = [{}] * self.num_envs
        firsts: list[tuple[dict[str, Any], dict[str, Any]]] = []

        def restart() -> None:  # while the hosts run the playing lanes' round
            firsts.extend(self._reset_lanes(resets, [None] * len(resets)))

        for e, done in self._play(decided, restart):
            env = self.envs[e]
            selections, ignored = decided[e]
            scores, info = env._conclude(selections, ignored, done)
            observations[e], r, term, trunc, lane_infos[e] = env._end_step(scores, info)
            rewards[e], terminations[e], truncations[e] = r, term, trunc
        for e, (obs, info) in zip(resets, firsts, strict=True):
            observations[e], lane_infos[e] = obs, info
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
        lanes = getattr(self, "_lanes", None)
        if lanes is not None:
            lanes.close()
            self._lanes = None

    # ---------------------------------------------------------------- helpers
    def _reset_lanes(
        self, lanes: list[int], seeds: list[int | None]
    ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Reset ``lanes``: begin every episode, evaluate every ω⁰ at once, observe."""
        begun = [
            self.envs[e]._begin_episode(seed)
            for e, seed in zip(lanes, seeds, strict=True)
        ]
        if self._lanes is not None:
            self._lanes.evaluate_initial()
        return [
            self.envs[e]._first_observation(info)
            for e, info in zip(lanes, begun, strict=True)
        ]

    def _play(
        self, decided: dict[int, tuple[Selections, Any]], meanwhile: Callable[[], None]
    ) -> Iterator[tuple[int, D2DOutcome]]:
        """Run the decided lanes' rounds; yield (lane, outcome) as each is ready.

        Emulate mode submits the lanes in two halves, then calls ``meanwhile``
        (the restarts of the lanes that do not play: they touch no playing
        lane), so that it and the caller's per-lane work on the first half's
        outcomes (reward, observation) run while the hosts run the rounds.
        Surrogate mode calls it last.
        """
        if self._lanes is None:  # surrogate mode: one lane after another
            for e, (selections, _) in decided.items():
                yield e, self.envs[e].backend.run(self.envs[e].round, selections)
            meanwhile()
            return
        lanes = list(decided)
        half = (len(lanes) + 1) // 2
        batches = [
            self._lanes.start({e: (self.envs[e].round, decided[e][0]) for e in chunk})
            for chunk in (lanes[:half], lanes[half:])
            if chunk
        ]
        meanwhile()
        for batch in batches:
            for e, lane in self._lanes.finish(batch).items():
                yield e, outcome(lane)

    def _batch(self, observations: list[Any]) -> dict[str, Any]:
        self._observations = concatenate(
            self.single_observation_space, observations, self._observations
        )
        batched: Any = deepcopy(self._observations)  # a Dict space's: a dict
        return dict(batched)


def lanes_env(num_envs: int) -> LaneVectorEnv:
    """The default ``D2DNeighbor-v0`` config's emulate vector env with E = ``num_envs``."""
    return D2DNeighborVectorEnv(num_envs=num_envs, mode="emulate")
