"""PettingZoo: one agent per D2D target in all-targets mode (:mod:`envs.multiagent`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from envs.d2d.neighbor import DEFAULT_D2D_CONFIG, D2DNeighborEnv
from envs.multiagent import ConfigLike, UnitAgentsEnv
from envs.rl import top_k_assignment
from rayfl.config import load_config
from rayfl.d2d.config import D2DTopologyConfig
from rayfl.rl.rewards import Scores, reward

__all__ = ["D2DTargetsParallelEnv"]


class D2DTargetsParallelEnv(UnitAgentsEnv):
    """One agent per D2D target of ``D2DNeighbor-v0`` in all-targets mode (module docstring).

    Agent ``target_n`` observes ``Box(-1, 1, (N·12,))`` (the bounded features of
    its candidates; its own row is ineligible) and acts with ``Box(-1, 1, (N,))``
    scores: its eligible candidates with a positive score, at most F of the
    highest, become M_n, on sub-channels by the Hungarian rule. Its reward is
    the reward of its own model (detail 1). Truncated after ``config.rounds``.

    Args:
        config: A run config with ``topology.kind: d2d``; ``topology.target`` is
            set to ``all`` (None: ``DEFAULT_D2D_CONFIG``).
        mode: "surrogate" (default) or "emulate".
        reward: One of ``envs.d2d.neighbor.D2D_REWARDS`` (default ``min_max_loss``).
        neighbor_cost: Reward cost per selected neighbor (≥ 0).
        overrides: Config overrides ``key.path=value``.
        render_mode: "ansi", "rgb_array" or None.
    """

    metadata: ClassVar[dict[str, Any]] = {
        **UnitAgentsEnv.metadata,
        "name": "d2d_targets_v0",
    }

    def __init__(
        self,
        config: ConfigLike | None = None,
        mode: str = "surrogate",
        reward: str = "min_max_loss",
        neighbor_cost: float = 0.0,
        overrides: Sequence[str] | Mapping[str, Any] = (),
        render_mode: str | None = None,
    ) -> None:
        cfg = load_config(DEFAULT_D2D_CONFIG if config is None else config, overrides)
        if isinstance(cfg.topology, D2DTopologyConfig):  # any other: refused below
            cfg = cfg.model_copy(
                update={"topology": cfg.topology.model_copy(update={"target": "all"})}
            )
        base = D2DNeighborEnv(
            cfg, mode=mode, reward=reward, neighbor_cost=neighbor_cost
        )
        n = base.num_nodes
        super().__init__(base, [f"target_{t}" for t in range(n)], [n] * n, render_mode)
        self.d2d = base

    def _unit_obs(self, raw: Mapping[str, Any], index: int) -> Mapping[str, Any]:
        return self.d2d.target_observation(raw, index)

    def _decode(self, scores: Mapping[str, npt.NDArray[np.float64]]) -> Any:
        assert self._raw is not None
        base = self.d2d
        return np.stack(
            [
                top_k_assignment(
                    scores[a],
                    base.target_observation(self._raw, i),
                    base.num_subchannels,
                    positive=True,
                )
                for i, a in enumerate(self.possible_agents)
            ]
        )

    def _rewards(
        self,
        live: list[str],
        value: float,
        before: Scores | None,
        info: Mapping[str, Any],
    ) -> dict[str, float]:
        base, now = self.d2d, self.d2d.scores
        assert now is not None  # set by the step

        def one(scores: Scores | None, i: int) -> Scores | None:
            if scores is None:
                return None
            acc = None if scores.test_acc is None else scores.test_acc[i : i + 1]
            return Scores(scores.test_loss[i : i + 1], acc)

        out = {}
        for i, (a, t) in enumerate(
            zip(self.possible_agents, base.targets, strict=True)
        ):
            own = reward(base.reward_kind, one(now, i), one(before, i))  # type: ignore[arg-type]  # now is set
            out[a] = own - base.neighbor_cost * len(info["neighbors"][t])
        return {a: out[a] for a in live}
