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

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from envs.backends import BackendOwner
from rayfl.config import RunConfig, load_config
from rayfl.hierarchy.config import TopologyConfig as HierTopologyConfig
from rayfl.hierarchy.deciders import EdgeActions
from rayfl.hierarchy.topology import build_topology
from rayfl.rewards import (
    COST_REWARDS,
    DIFFERENCE_REWARDS,
    Scores,
    check_reward,
    reward,
)

__all__ = ["EdgePolicies", "HierarchicalSchedulingEnv"]


class HierarchicalSchedulingEnv(BackendOwner, gym.Env):
    """Schedule every edge's subnet on its subchannels, one global round per step."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        config: str | Path | Mapping[str, Any] | RunConfig,
        reward: str | None = None,
        overrides: Sequence[str] | Mapping[str, Any] = (),
        mode: str = "emulate",
        participants: bool = False,
    ) -> None:
        if mode not in ("emulate", "surrogate"):
            raise ValueError(f"mode must be 'emulate' or 'surrogate', got {mode!r}")
        if reward is None:
            reward = "accuracy" if mode == "emulate" else "loss"
        check_reward(reward, topology="hierarchical", mode=mode)
        cfg = load_config(config, overrides)
        if not isinstance(cfg.topology, HierTopologyConfig):
            raise ValueError(
                "HierarchicalSchedulingEnv needs topology.kind=hierarchical, got "
                f"{cfg.topology.kind!r}"
            )
        self.config: RunConfig = cfg
        self.topology_config: HierTopologyConfig = cfg.topology
        self.reward_kind = reward
        self.mode = mode
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
        self._backend: Any = None
        self.round = 0

    # ---------------------------------------------------------------- actions
    def split_action(self, action: npt.ArrayLike) -> list[npt.NDArray[np.int64]]:
        """Return the per-edge actions a_c of a concatenated action."""
        values = np.asarray(action)
        if values.shape != (int(self._offsets[-1]),):
            raise ValueError(
                f"action must have {int(self._offsets[-1])} entries (one block "
                f"per edge), got shape {values.shape}"
            )
        return [
            values[self._offsets[c] : self._offsets[c + 1]]
            for c in range(len(self.sizes))
        ]

    def join_actions(self, actions: Sequence[npt.ArrayLike]) -> npt.NDArray[np.int64]:
        """Return the concatenated action of per-edge actions (inverse of split)."""
        if len(actions) != len(self.sizes):
            raise ValueError(f"expected {len(self.sizes)} per-edge actions")
        return np.concatenate([np.asarray(a, dtype=np.int64) for a in actions])

    def edge_observation(self, obs: Mapping[str, Any], c: int) -> Mapping[str, Any]:
        """Return edge c's flat-env observation out of the env's ``Dict``."""
        return obs[f"edge_{c}"]

    # ---------------------------------------------------------------- gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start a new run from w⁰ on the same subnets and data.

        The run seed is ``seed`` when given, else ``config.seed`` on the first
        reset and a draw from the env's generator afterwards; it redraws w⁰,
        batches, DP noise and fading (the subnets, trust flags and data
        partition come from ``config.seed``, drawn once, as in the star env).
        """
        super().reset(seed=seed)
        episode_seed = self._episode_seed(seed)
        if self._backend is None:
            self._backend = self._build()
        elif (
            self._backend.config.topology.scheduling,
            self._backend.config.scheduler,
        ) != (self.topology_config.scheduling, self.config.scheduler):
            self._backend.reset(  # restore
                scheduling=self.topology_config.scheduling,
                scheduler=self.config.scheduler,
            )
        self._backend.restart(episode_seed)
        self.round = 0
        self._scores = (
            self._evaluate() if self.reward_kind in DIFFERENCE_REWARDS else None
        )
        return self._obs(), {"round": 0}

    def step(
        self, action: Any
    ) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Run one global round with the per-edge schedules of ``action``."""
        if self.system is None:
            raise RuntimeError("call reset() before step()")
        schedules = [
            rules.to_schedule(a)[0]
            for rules, a in zip(self.rules, self.split_action(action), strict=True)
        ]
        result, extras = self.system.run_global_round(self.round, schedules)
        info: dict[str, Any] = {
            "round": self.round,
            "scheduled": sorted(int(r["client"]) for r in result.rows),
            "energy_j": extras["energy_j"],
            "latency_s": extras["latency_s"],
        }
        costs = {k: float(extras[k]) for k in ("latency_s", "energy_j")}
        if self.reward_kind in COST_REWARDS:  # no evaluation needed
            scores = Scores(np.zeros(0), **costs)
        else:
            scores = self._evaluate(**costs)
            info["global_loss"] = scores.mean_loss()
            if self.mode == "emulate":
                info["global_acc"] = scores.mean_acc()
        value = reward(self.reward_kind, scores, self._scores)
        self._scores = scores
        self.round += 1
        truncated = self.round >= self.config.rounds
        return self._obs(), value, False, truncated, info

    def _build(self) -> Any:
        """The round's dynamics: the engine (emulate) or the surrogate."""
        if self.mode == "surrogate":
            from envs.surrogate_hierarchical import HierarchicalSurrogate

            return HierarchicalSurrogate(self.config)
        from rayfl.engine import Engine
        from rayfl.hierarchy.round import HierarchicalRound

        return Engine(self.config, strategy=HierarchicalRound(external_actions=True))

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

    def _obs(self) -> dict[str, Any]:
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
