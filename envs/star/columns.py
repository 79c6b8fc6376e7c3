"""The vector env's steps over :class:`rayfl.star.columns.StarColumns`: no loop of envs.

:class:`envs.star.vector.WirelessFLVectorEnv` steps its lanes through this when
the config runs as columns (:func:`rayfl.star.columns.columns_refusal`) and the
env's settings are the plain ones (emulate mode, the ``MultiDiscrete``
assignment action: no power levels, no controls, no participants, no render
mode; :func:`columns_settings_refusal`). A step then decides every lane's
schedule, runs the round and builds the observations as (lane × client)
arrays; what is left per lane is its reward (:func:`rayfl.rl.rewards.reward`
on its scores) and its info dict.

Each lane's numbers equal the lane path's (:class:`rayfl.star.lanes.StarLanes`
behind ``_LaneEnv``): the same observations, rewards, episode ends and infos,
the test losses to float32 rounding (tests/envs/test_columns.py). The lane
envs (``venv.envs``) keep their seeding (``np_random``), round counter and
scores; their backends are not stepped.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.rl.rewards import DIFFERENCE_REWARDS, Scores, reward
from rayfl.star.columns import StarColumns
from rayfl.wireless.units import linear_to_db

__all__ = ["ColumnSteps", "columns_settings_refusal"]


def columns_settings_refusal(venv: Any) -> str | None:
    """Return why ``venv``'s settings need the lane path (None: columns can run)."""
    env = venv.envs[0]
    if venv.mode != "emulate":
        return "columns run the emulation only"
    if venv.render_mode is not None:
        return "columns do not render"
    if env.participants is not None or env.control_names or len(env.power_w) > 1:
        return "columns take the plain assignment action only"
    return None


class ColumnSteps:
    """``reset``/``step`` of a :class:`WirelessFLVectorEnv` as columns.

    Args:
        venv: The vector env (its lane envs, spaces, autoreset flags).
        columns: Its lanes, built as :class:`StarColumns`.
    """

    def __init__(self, venv: Any, columns: StarColumns) -> None:
        self.venv, self.columns = venv, columns
        self.num_clients = columns.num_clients
        self.keys = list(venv.single_observation_space.keys())
        self.data_size = columns.num_train.astype(np.float32)

    # ---------------------------------------------------------------- episodes
    def begin(self, lanes: list[int], seeds: list[int | None]) -> list[dict[str, Any]]:
        """Begin ``lanes``' episodes (seeding, restart); return their reset infos."""
        envs = self.venv.envs
        return [
            {"round": 0, **envs[e]._begin_episode(seed)}
            for e, seed in zip(lanes, seeds, strict=True)
        ]

    def first(self, lanes: list[int]) -> None:
        """Evaluate the begun ``lanes`` at once: their first losses and scores."""
        envs = self.venv.envs
        self.columns.initial_evaluation(lanes)
        difference = envs[0].reward_kind in DIFFERENCE_REWARDS
        for e in lanes:
            envs[e].round = 0
            envs[e]._scores = (
                Scores(self.columns.first_loss[e], self.columns.first_acc[e])
                if difference
                else None
            )

    def observe(self) -> dict[str, npt.NDArray[np.float32]]:
        """Every lane's observation of its current round, batched."""
        c = self.columns
        lanes = np.arange(c.num_lanes)
        rounds = np.array([env.round for env in self.venv.envs], np.int64)
        c.channel(lanes, rounds)
        eligible = c.eligible(lanes)
        e, n = c.num_lanes, self.num_clients
        obs = {
            "channel_gain": linear_to_db(c.gain).astype(np.float32),
            "loss": np.maximum(c.loss, 0).astype(np.float32),
            "upload_count": c.releases.astype(np.float32),
            "privacy_spent": np.zeros((e, n), np.float32),
            "staleness": c.staleness.astype(np.float32),
            "data_size": np.tile(self.data_size, (e, 1)),
            "eligible": eligible.astype(np.float32),
            "round": rounds.astype(np.float32)[:, None],
        }
        return {key: obs[key] for key in self.keys}

    # ---------------------------------------------------------------- a step
    def decide(
        self, plays: npt.NDArray[np.int64], actions: Any
    ) -> tuple[npt.NDArray[np.int64], list[list[int]], list[list[int]]]:
        """Return (P, K) scheduled clients (-1 idle), and each lane's ignored and scheduled.

        The rules of :meth:`rayfl.star.actions.StarActions.to_schedule`: a
        client named on several subchannels keeps the lowest one; a named
        client that is not eligible is ignored, then each repeated naming.
        """
        a = np.asarray(actions)
        n, k = self.num_clients, self.columns.num_subchannels
        bad = (
            a.shape != (self.venv.num_envs, k)
            or not np.issubdtype(a.dtype, np.integer)
            or bool(((a < 0) | (a > n)).any())
        )
        if bad:  # the lane env's own check, for its message
            for e in range(self.venv.num_envs):
                self.venv.envs[e].actions.to_schedule(
                    np.asarray(a[e]), np.ones(n, bool)
                )
            raise ValueError(f"assignment must be {k} integers per lane, got {a!r}")
        a = a[plays].astype(np.int64)
        idle = a == n
        repeat = np.zeros(a.shape, bool)
        for j in range(1, k):
            repeat[:, j] = (a[:, :j] == a[:, j : j + 1]).any(axis=1)
        first = ~idle & ~repeat
        eligible = self.columns.eligible(plays)
        rows = np.arange(len(plays))[:, None]
        allowed = first & eligible[rows, np.minimum(a, n - 1)]
        clients = np.where(allowed, a, -1)
        refused = first & ~allowed
        again = repeat & ~idle
        ignored: list[list[int]] = [[] for _ in plays]
        for i in np.flatnonzero((refused | again).any(axis=1)).tolist():
            ignored[i] = a[i][refused[i]].tolist() + a[i][again[i]].tolist()
        scheduled = [row[row >= 0].tolist() for row in clients]
        return clients, ignored, scheduled

    def step(
        self, actions: Any
    ) -> tuple[
        dict[str, Any], npt.NDArray[np.float64], npt.NDArray[np.bool_], Any, Any
    ]:
        """One lockstep step (:meth:`WirelessFLVectorEnv.step`'s contract)."""
        venv, envs = self.venv, self.venv.envs
        num = venv.num_envs
        resets = np.flatnonzero(venv._autoreset)
        plays = np.flatnonzero(~venv._autoreset)
        clients, ignored, scheduled = self.decide(plays, actions)
        begun = dict(
            zip(
                resets.tolist(),
                self.begin(resets.tolist(), [None] * len(resets)),
                strict=True,
            )
        )
        rewards = np.zeros(num)
        terminations = np.zeros(num, dtype=bool)
        truncations = np.zeros(num, dtype=bool)
        lane_infos: list[dict[str, Any]] = [{}] * num
        if len(plays):
            rounds = np.array([envs[e].round for e in plays], np.int64)
            done = self.columns.play(plays, rounds, clients)
            for i, e in enumerate(plays.tolist()):
                env = envs[e]
                acc = done.test_acc[i]
                info = {
                    "round": env.round,
                    "delivered": sorted(clients[i][done.delivered[i]].tolist()),
                    "latency_s": done.latency_s[i],
                    "energy_j": done.energy_j[i],
                    "bits": done.bits[i],
                    "test_loss": done.test_loss[i],
                    "test_acc": None if np.isnan(acc).all() else acc,
                    "ignored": ignored[i],
                    "scheduled": scheduled[i],
                }
                scores = Scores(
                    done.test_loss[i],
                    acc,
                    latency_s=float(info["latency_s"].max(initial=0.0)),
                    energy_j=float(info["energy_j"].sum()),
                )
                rewards[e] = reward(env.reward_kind, scores, env._scores)
                env._scores = scores
                env.round += 1
                info["round"] = env.round
                truncations[e] = env.round >= env.config.rounds
                lane_infos[e] = info
        if len(resets):
            self.first(resets.tolist())
            for e in resets.tolist():
                lane_infos[e] = begun[e]
        obs = self.observe()
        if len(plays):
            terminations[plays] = ~obs["eligible"][plays].astype(bool).any(axis=1)
        venv._autoreset = terminations | truncations
        if len(resets) == 0 and all(i["test_acc"] is not None for i in lane_infos):
            return obs, rewards, terminations, truncations, _stacked(lane_infos)
        infos: dict[str, Any] = {}
        for e in range(num):
            infos = venv._add_info(infos, lane_infos[e], e)
        return obs, rewards, terminations, truncations, infos


def _stacked(lane_infos: list[dict[str, Any]]) -> dict[str, Any]:
    """``VectorEnv._add_info`` of every lane's step info, built key by key.

    For a step in which every lane played a round (the same keys and value
    types in each): ints stack to an int array, arrays to one more axis, lists
    to an object array; each key is followed by its all-true ``_key`` mask.
    """
    num = len(lane_infos)
    out: dict[str, Any] = {}
    for key, first in lane_infos[0].items():
        values = [info[key] for info in lane_infos]
        if isinstance(first, np.ndarray):
            array: Any = np.stack(values)
        elif type(first) in (int, float, bool):
            array = np.array(values, dtype=type(first))
        else:
            array = np.empty(num, dtype=object)
            for i, value in enumerate(values):
                array[i] = value
        out[key], out[f"_{key}"] = array, np.ones(num, dtype=np.bool_)
    return out
