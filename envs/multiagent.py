"""PettingZoo parallel envs: one agent per edge of the hierarchy, one per D2D target.

:class:`envs.hierarchy.multiagent.HierarchicalEdgesParallelEnv` gives each edge server of
``HierarchicalFL-v0`` its own agent (``edge_0``, ``edge_1``, …) and
:class:`envs.d2d.multiagent.D2DTargetsParallelEnv` each target of ``D2DNeighbor-v0`` in
all-targets mode (``target_0``, … one per node). Every agent sees its own
unit's observation in the encoding of the ``*-Flat-v0`` ids (per-client
features in [−1, 1], :func:`envs.wrappers.bounded_features`) and answers with
one score per row of it (``Box(-1, 1, (n,))``), decoded as ``learned`` does
(:func:`envs.rl.top_k_assignment`): an edge schedules its K_e eligible
devices with the highest scores on its subchannels by the Hungarian rule; a
target takes the eligible candidates with a positive score, at most F, as its
neighbors M_n. All agents act at once and the round runs once
(``pettingzoo.ParallelEnv``).

Defaults as the flat ids: the small digits systems of the base envs (the D2D
one with ``topology.target: all``), surrogate mode, reward ``min_max_loss``.

Implementation details:
    1. Rewards. Edges share one model, so every edge gets the env's reward
       (cooperative). Each D2D target has its own model: target n gets the
       reward computed on its own scores alone (``rayfl.rl.rewards.reward`` over
       its test loss and accuracy; ``min_max_loss`` is then −its test loss),
       minus ``neighbor_cost`` × abs(M_n).
    2. Every agent ends with the episode (truncation after ``config.rounds``;
       on the hierarchy no agent terminates earlier), so ``agents`` is empty
       after the last step. ``infos[agent]`` is the base env's info.
    3. A missing agent's action, a wrong shape or a NaN score raises
       ``ValueError`` naming the agent.

PettingZoo is an optional extra: ``pip install 'rayfl[pettingzoo]'``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from envs.base import FLEnv
from envs.render import RENDER_MODES
from envs.wrappers import bounded_features
from policies.features import NUM_FEATURES, client_features
from rayfl.config import RunConfig
from rayfl.rl.rewards import Scores

try:
    from pettingzoo import ParallelEnv
except ImportError as error:  # pragma: no cover - the extra is installed in CI
    raise ImportError(
        "envs.multiagent needs PettingZoo: pip install 'rayfl[pettingzoo]'"
    ) from error

__all__ = ["ConfigLike", "UnitAgentsEnv"]

F32 = npt.NDArray[np.float32]
ConfigLike = str | Path | Mapping[str, Any] | RunConfig


class UnitAgentsEnv(ParallelEnv):
    """One agent per decision unit of a base env (module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": list(RENDER_MODES),
        "render_fps": 1,
        "is_parallelizable": True,
    }

    def __init__(
        self,
        base: FLEnv,
        names: Sequence[str],
        rows: Sequence[int],
        render_mode: str | None,
    ) -> None:
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(
                f"render_mode must be one of {', '.join(RENDER_MODES)} or None, "
                f"got {render_mode!r}"
            )
        self.base, self.render_mode = base, render_mode
        self.possible_agents = list(names)
        self.agents: list[str] = []
        self._observation_spaces = {
            a: spaces.Box(-1.0, 1.0, (n * NUM_FEATURES,), np.float32)
            for a, n in zip(names, rows, strict=True)
        }
        self._action_spaces = {
            a: spaces.Box(-1.0, 1.0, (n,), np.float32)
            for a, n in zip(names, rows, strict=True)
        }
        self._raw: Mapping[str, Any] | None = None

    def observation_space(self, agent: str) -> spaces.Box:
        """The agent's observation space: its rows' bounded features."""
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Box:
        """The agent's action space: one score per row."""
        return self._action_spaces[agent]

    # ------------------------------------------------------------ parallel API
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, F32], dict[str, dict[str, Any]]]:
        """Start an episode of the base env (``seed`` as ``FLEnv.reset``)."""
        raw, info = self.base.reset(seed=seed, options=options)
        self._raw, self.agents = raw, list(self.possible_agents)
        return self._observe(raw), {a: dict(info) for a in self.agents}

    def step(
        self, actions: Mapping[str, Any]
    ) -> tuple[
        dict[str, F32],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        """Run one round with every live agent's scores."""
        if self._raw is None or not self.agents:
            raise RuntimeError(
                "call reset() before step() (or after the episode ended)"
            )
        scores = {a: self._scores(a, actions) for a in self.agents}
        before = self.base.scores
        raw, value, terminated, truncated, info = self.base.step(self._decode(scores))
        self._raw = raw
        live = list(self.agents)
        rewards = self._rewards(live, value, before, info)
        if terminated or truncated:
            self.agents = []
        obs = self._observe(raw)
        return (
            {a: obs[a] for a in live},
            rewards,
            dict.fromkeys(live, bool(terminated)),
            dict.fromkeys(live, bool(truncated)),
            {a: dict(info) for a in live},
        )

    def render(self) -> str | npt.NDArray[np.uint8] | None:
        """The base env's frame in ``render_mode`` (None without one)."""
        if self.render_mode is None:
            return None
        return self.base.render_frame(self.render_mode)

    def close(self) -> None:
        """Close the base env."""
        self.base.close()

    # ---------------------------------------------------------------- helpers
    def _scores(
        self, agent: str, actions: Mapping[str, Any]
    ) -> npt.NDArray[np.float64]:
        """The agent's scores, checked (detail 3)."""
        if agent not in actions:
            raise ValueError(f"no action for live agent {agent!r}")
        values = np.asarray(actions[agent], dtype=np.float64).reshape(-1)
        shape = self._action_spaces[agent].shape
        if values.shape != shape or np.isnan(values).any():
            raise ValueError(
                f"agent {agent!r}: action must be {shape[0]} finite scores, "
                f"got {actions[agent]!r}"
            )
        return values

    def _unit_obs(self, raw: Mapping[str, Any], index: int) -> Mapping[str, Any]:
        """Unit ``index``'s observation out of the base env's."""
        raise NotImplementedError

    def _observe(self, raw: Mapping[str, Any]) -> dict[str, F32]:
        return {
            a: bounded_features(client_features(self._unit_obs(raw, i)))
            for i, a in enumerate(self.possible_agents)
        }

    def _decode(self, scores: Mapping[str, npt.NDArray[np.float64]]) -> Any:
        raise NotImplementedError

    def _rewards(
        self,
        live: list[str],
        value: float,
        before: Scores | None,
        info: Mapping[str, Any],
    ) -> dict[str, float]:
        raise NotImplementedError
