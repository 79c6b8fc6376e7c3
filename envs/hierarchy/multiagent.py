"""PettingZoo: one agent per edge server of the hierarchy (:mod:`envs.multiagent`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from envs.hierarchy.scheduling import HierarchicalSchedulingEnv
from envs.multiagent import ConfigLike, UnitAgentsEnv
from envs.rl import top_k_assignment
from rayfl.rl.rewards import Scores

__all__ = ["HierarchicalEdgesParallelEnv"]


class HierarchicalEdgesParallelEnv(UnitAgentsEnv):
    """One agent per edge server of ``HierarchicalFL-v0`` (module docstring).

    Agent ``edge_c`` observes ``Box(-1, 1, (n_c·12,))`` (the bounded features of
    edge c's observation, its devices by ascending id) and acts with
    ``Box(-1, 1, (n_c,))`` scores: edge c's K_e eligible devices with the
    highest scores upload, on subchannels by the Hungarian rule. Every edge
    gets the env's reward (one global model). The episode is truncated after
    ``config.rounds`` global rounds.

    Args:
        config: A run config with ``topology.kind: hierarchical`` (None: the
            base env's ``DEFAULT_HIERARCHICAL_CONFIG``).
        mode: "surrogate" (default) or "emulate".
        reward: One of ``rayfl.rl.rewards.REWARDS`` (default ``min_max_loss``).
        overrides: Config overrides ``key.path=value``.
        render_mode: "ansi", "rgb_array" or None.
    """

    metadata: ClassVar[dict[str, Any]] = {
        **UnitAgentsEnv.metadata,
        "name": "hierarchical_edges_v0",
    }

    def __init__(
        self,
        config: ConfigLike | None = None,
        mode: str = "surrogate",
        reward: str = "min_max_loss",
        overrides: Sequence[str] | Mapping[str, Any] = (),
        render_mode: str | None = None,
    ) -> None:
        base = HierarchicalSchedulingEnv(
            config, reward=reward, overrides=overrides, mode=mode
        )
        names = [f"edge_{c}" for c in range(len(base.sizes))]
        super().__init__(base, names, base.sizes, render_mode)
        self.hierarchy = base

    def _unit_obs(self, raw: Mapping[str, Any], index: int) -> Mapping[str, Any]:
        return self.hierarchy.edge_observation(raw, index)

    def _decode(self, scores: Mapping[str, npt.NDArray[np.float64]]) -> Any:
        assert self._raw is not None
        base = self.hierarchy
        return base.join_actions(
            [
                top_k_assignment(
                    scores[a],
                    base.edge_observation(self._raw, c),
                    base.num_subchannels[c],
                )
                for c, a in enumerate(self.possible_agents)
            ]
        )

    def _rewards(
        self,
        live: list[str],
        value: float,
        before: Scores | None,
        info: Mapping[str, Any],
    ) -> dict[str, float]:
        return dict.fromkeys(live, float(value))
