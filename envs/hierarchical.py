"""The hierarchy's per-edge scheduling decision as one Gymnasium environment.

Each step is one global round k of H2FDP (devices → edge servers → cloud,
``rayfl.hierarchy``): the agent picks, for every edge c, which devices of the
subnet S_c upload on which of edge c's K_e subchannels, then the interval runs
on the real engine (``mode="emulate"``: Ray actors train, edges aggregate and
add their DP noise, the cloud averages) or on the per-edge loss recursion of
``envs.surrogate_hierarchical`` (``mode="surrogate"``: no actors, same spaces,
cost model and privacy ledger). The per-edge decision is exactly the flat
:class:`envs.scheduling.WirelessFLEnv`'s (same observation table, same action
rule), so a flat policy drives one edge and an RL agent drives all of them
through the concatenated action.

## Action Space
``MultiDiscrete(concat_c [n_c + 1] * K_e)``: the per-edge actions a_c, in edge
order, concatenated. Entry Σ_{c'<c} K_e(c') + k is edge c's subchannel k; value
j < n_c means device d_j (the j-th smallest id of S_c) uploads on it, n_c means
idle. :meth:`HierarchicalSchedulingEnv.split_action` and
:meth:`~HierarchicalSchedulingEnv.join_actions` convert. A value outside
[0, n_c] or a wrong length raises ``ValueError``; a device named on several
subchannels of its block keeps the lowest one, the others idle (the repair of
``WirelessFL-v0`` and ``D2DNeighbor-v0``), so every sample of the space steps.

With ``participants=True`` (for a policy that picks a device set only, e.g.
``uniform``) the action is ``MultiBinary(Σ_c n_c)`` instead: edge c's block
marks the devices of S_c (row j = d_j) that upload, without subchannels (each
upload priced as the uniform path's); an edge keeps its o_c^k lowest marked ids
(o_c^k = K_e without adaptive control), the others are ignored.
Under adaptive control the edge opens only min(K_e, s_c^k) subchannels; a device
on a closed one does not upload (``rayfl.hierarchy.scheduling`` detail 1).

## Observation Space
``Dict({"edge_0": obs_0, …, "edge_{N-1}": obs_{N-1}})``, obs_c being the flat
env's table for the subnet (keys ``channel_gain`` (n_c, K_e) dB, ``loss``,
``upload_count``, ``privacy_spent``, ``staleness``, ``data_size``,
``eligible``, ``round``; see ``rayfl.hierarchy.scheduling``).

## Rewards
The reward set of every topology (:mod:`rayfl.rewards`) over the global model
on the devices' test splits (means weighted by test-split size, so ``accuracy``
is the global test accuracy): ``accuracy`` (emulate default), ``loss``
(surrogate default: −the weighted mean test loss), ``min_max_loss``,
``loss_decrease``, ``accuracy_gain``, ``jain``, ``energy`` (−energy of the
round's uploads and backhaul, J) and ``latency`` (−delay of the round, s,
§2.7 accounting). Every reward but the cost ones evaluates every step.

## Episode End
Truncation after ``config.rounds`` global rounds.

## Arguments
| parameter | type | default | description |
|---|---|---|---|
| config | path, mapping or RunConfig | – | a run config with ``topology.kind: hierarchical`` |
| mode | str | "emulate" | "emulate" (real training on Ray) or "surrogate" |
| reward | str or None | None | one of ``rayfl.rewards.REWARDS``; None: accuracy (emulate) or loss (surrogate) |
| overrides | list or mapping | () | config overrides ``key.path=value`` |
| participants | bool | False | a device-set action ``MultiBinary(Σ_c n_c)`` instead of the assignment |

``topology.scheduling.subchannels_per_edge`` sets K_e (None: n_c); its
``policy`` is ignored (the agent decides).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from envs.base import FLEnv
from rayfl.config import RunConfig
from rayfl.hierarchy.config import TopologyConfig
from rayfl.hierarchy.deciders import EdgeActions
from rayfl.hierarchy.topology import build_topology
from rayfl.rewards import COST_REWARDS, Scores

__all__ = ["EdgePolicies", "HierarchicalSchedulingEnv"]


class HierarchicalSchedulingEnv(FLEnv):
    """Schedule every edge's subnet on its subchannels, one global round per step."""

    topology_kind = "hierarchical"

    def __init__(
        self,
        config: str | Path | Mapping[str, Any] | RunConfig,
        reward: str | None = None,
        overrides: Sequence[str] | Mapping[str, Any] = (),
        mode: str = "emulate",
        participants: bool = False,
    ) -> None:
        if reward is None:
            reward = "accuracy" if mode == "emulate" else "loss"
        cfg = self._setup(config, overrides, mode, reward)
        assert isinstance(cfg.topology, TopologyConfig)  # _setup checked the kind
        topo = build_topology(cfg.topology, cfg.data.num_clients, cfg.seed)
        k_e = cfg.topology.scheduling.subchannels_per_edge
        self.sizes = [len(s) for s in topo.subnets]
        self.num_subchannels = [int(k_e or n) for n in self.sizes]
        #: Each edge's action rules and (observation, action) spaces.
        self.rules = [
            EdgeActions(c, np.sort(np.asarray(m, dtype=np.int64)), k, participants)
            for c, (m, k) in enumerate(
                zip(topo.subnets, self.num_subchannels, strict=True)
            )
        ]
        self.edge_spaces = [rules.spaces() for rules in self.rules]
        self.observation_space = spaces.Dict(
            {f"edge_{c}": obs for c, (obs, _) in enumerate(self.edge_spaces)}
        )
        blocks = self.sizes if participants else self.num_subchannels
        self.action_space: spaces.Space[Any] = (
            spaces.MultiBinary(sum(self.sizes))
            if participants
            else spaces.MultiDiscrete(
                np.concatenate([a.nvec for _, a in self.edge_spaces]).astype(np.int64)
            )
        )
        self._offsets = np.cumsum([0, *blocks])

    # ---------------------------------------------------------------- actions
    def split_action(self, action: npt.ArrayLike) -> list[npt.NDArray[np.int64]]:
        """Return the per-edge actions a_c of a concatenated action."""
        values = np.asarray(action)
        if values.shape != (int(self._offsets[-1]),):
            raise ValueError(
                f"action must have {int(self._offsets[-1])} entries (one block "
                f"per edge), got shape {values.shape}"
            )
        return np.split(values, self._offsets[1:-1])

    def join_actions(self, actions: Sequence[npt.ArrayLike]) -> npt.NDArray[np.int64]:
        """Return the concatenated action of per-edge actions (inverse of split)."""
        if len(actions) != len(self.sizes):
            raise ValueError(f"expected {len(self.sizes)} per-edge actions")
        return np.concatenate([np.asarray(a, dtype=np.int64) for a in actions])

    def edge_observation(self, obs: Mapping[str, Any], c: int) -> Mapping[str, Any]:
        """Return edge c's flat-env observation out of the env's ``Dict``."""
        return obs[f"edge_{c}"]

    # ---------------------------------------------------------------- hooks
    def _build(self) -> Any:
        """The round's dynamics: the engine (emulate) or the surrogate."""
        if self.mode == "surrogate":
            from envs.surrogate_hierarchical import HierarchicalSurrogate

            return HierarchicalSurrogate(self.config)
        from rayfl.engine import Engine
        from rayfl.hierarchy.round import HierarchicalRound

        return Engine(self.config, strategy=HierarchicalRound(external_actions=True))

    def _restart(self, seed: int) -> dict[str, Any]:
        """Restart on the same subnets and data (restoring the env's scheduling)."""
        system, cfg = self._backend, self.config
        assert isinstance(cfg.topology, TopologyConfig)
        if (system.config.topology.scheduling, system.config.scheduler) != (
            cfg.topology.scheduling,
            cfg.scheduler,
        ):
            system.reset(scheduling=cfg.topology.scheduling, scheduler=cfg.scheduler)
        system.restart(seed)
        return {}

    def _initial_scores(self) -> Scores:
        return self._evaluate()

    def _play(self, action: Any) -> tuple[Scores, dict[str, Any]]:
        """One global round with the per-edge schedules of ``action``."""
        schedules = [
            rules.to_schedule(a)[0]
            for rules, a in zip(self.rules, self.split_action(action), strict=True)
        ]
        result, extras = self.system.run_global_round(self.round, schedules)
        costs: dict[str, Any] = {k: float(extras[k]) for k in ("latency_s", "energy_j")}
        info: dict[str, Any] = {
            "scheduled": sorted(int(r["client"]) for r in result.rows),
            **costs,
        }
        if self.reward_kind in COST_REWARDS:  # no evaluation needed
            return Scores(np.zeros(0), **costs), info
        scores = self._evaluate(**costs)
        info["global_loss"] = scores.mean_loss()
        if self.mode == "emulate":
            info["global_acc"] = scores.mean_acc()
        return scores, info

    def _evaluate(self, latency_s: float = 0.0, energy_j: float = 0.0) -> Scores:
        """The devices' test scores of the global model (no accuracy in surrogate)."""
        weights = np.asarray(self.system.num_test, dtype=np.float64)
        if self.mode == "surrogate":
            loss, acc = self.system.device_loss(), None
        else:
            evals = self.system.evaluate()
            loss = np.array([e["test_loss"] for e in evals], dtype=np.float64)
            acc = np.array([e["test_acc"] for e in evals], dtype=np.float64)
        return Scores(loss, acc, weights, latency_s, energy_j)

    @property
    def system(self) -> Any:
        """The engine (emulate) or surrogate behind the env; None before ``reset``."""
        return self._backend

    def _get_obs(self) -> dict[str, Any]:
        per_edge = self.system.scheduling_observations(self.round)
        return {f"edge_{c}": obs for c, obs in enumerate(per_edge)}


class EdgePolicies:
    """One registered policy per edge, driving the env as one ``obs -> action``.

    What ``rayfl run`` builds per edge (:func:`rayfl.hierarchy.deciders.edge_policies`),
    for an env: policy c sees edge c's observation and its spaces; the actions
    are joined. ``reset(seed)`` resets policy c with ``seed + c``.

    Args:
        env: The (unwrapped) hierarchical env.
        name: A registered policy declared for the hierarchy.
        **params: Its parameters.
    """

    def __init__(
        self, env: HierarchicalSchedulingEnv, name: str, **params: Any
    ) -> None:
        from rayfl.registry import make_policy

        self.env = env
        self.policies = [make_policy(name, sp, **params) for sp in env.edge_spaces]

    def reset(self, seed: int | None = None) -> None:
        """Reset every edge's policy (edge c with ``seed + c``)."""
        for c, policy in enumerate(self.policies):
            policy.reset(seed=None if seed is None else seed + c)

    def __call__(self, obs: Mapping[str, Any]) -> npt.NDArray[np.int64]:
        """The joined action of the edges' policies."""
        env = self.env
        return env.join_actions(
            [p(env.edge_observation(obs, c)) for c, p in enumerate(self.policies)]
        )
