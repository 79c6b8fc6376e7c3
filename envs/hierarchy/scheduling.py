"""The hierarchy's per-edge scheduling decision as one Gymnasium environment.

Each step is one global round k of H2FDP (devices → edge servers → cloud,
``rayfl.hierarchy``): the agent picks, for every edge c, which devices of the
subnet S_c upload on which of edge c's K_e subchannels, then the interval runs
on the real engine (``mode="emulate"``: Ray actors train, edges aggregate and
add their DP noise, the cloud averages) or on the per-edge loss recursion of
``envs.hierarchy.surrogate`` (``mode="surrogate"``: no actors, same spaces,
cost model and privacy ledger). The per-edge decision is exactly the flat
:class:`envs.star.scheduling.WirelessFLEnv`'s (same observation table, same action
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
``WirelessFL-v0`` and ``D2DNeighbor-v0``), so every sample of the space steps;
``info["ignored"]`` lists the device id of each repeated naming.

With ``participants=True`` (for a policy that picks a device set only, e.g.
``uniform``) the action is ``MultiBinary(Σ_c n_c)`` instead: edge c's block
marks the devices of S_c (row j = d_j) that upload, without subchannels (each
upload priced as the uniform path's); an edge keeps its o_c^k lowest marked ids
(o_c^k = K_e without adaptive control), the others are ignored.
Under adaptive control the edge opens only min(K_e, s_c^k) subchannels; a device
on a closed one does not upload (``rayfl.hierarchy.scheduling`` detail 1).

## Observation Space
``Dict({"edge_0": obs_0, …, "edge_{N-1}": obs_{N-1}})``, obs_c being the flat
env's table for the subnet (``rayfl.hierarchy.scheduling``), float32, rows the
devices of S_c by ascending id:

| key | shape | meaning | unit | low | high |
|-----|-------|---------|------|-----|------|
| channel_gain | (n_c, K_e) | gain of device d_j on edge c's subchannel k this round (−inf: closed) | dB | -inf | inf |
| eligible | (n_c,) | 1 if the device may upload | – | 0 | 1 |
| loss | (n_c,) | last training loss the device reported | nats | 0 | inf |
| upload_count | (n_c,) | uploads so far | count | 0 | inf |
| privacy_spent | (n_c,) | worst-observer accountant ε of the device (0 without DP) | ε | 0 | inf |
| staleness | (n_c,) | rounds since the device's update last arrived | rounds | 0 | inf |
| data_size | (n_c,) | train samples of the device | samples | 0 | inf |
| round | (1,) | global round index k | – | 0 | inf |

## Rewards
The reward set of every topology (:mod:`rayfl.rl.rewards`) over the global model
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
| config | path, mapping or RunConfig | ``DEFAULT_HIERARCHICAL_CONFIG`` (12 digits devices, 3 edges, K_e = 2) | a run config with ``topology.kind: hierarchical`` |
| mode | str | "emulate" | "emulate" (real training on Ray) or "surrogate" |
| reward | str or None | None | one of ``rayfl.rl.rewards.REWARDS``; None: accuracy (emulate) or loss (surrogate) |
| overrides | list or mapping | () | config overrides ``key.path=value`` |
| participants | bool | False | a device-set action ``MultiBinary(Σ_c n_c)`` instead of the assignment |
| render_mode | str or None | None | "ansi" or "rgb_array": the devices' gains on their edge's subchannels and the round's schedule (:mod:`envs.render`) |

``topology.scheduling.subchannels_per_edge`` sets K_e (None: n_c); its
``policy`` is ignored (the agent decides).

## Version History
* v0: initial version; the default config (``gym.make`` without one),
  ``render_mode`` and ``info["ignored"]`` added later (spaces, reward and
  dynamics unchanged).
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
from rayfl.rl.rewards import COST_REWARDS, Scores

__all__ = ["DEFAULT_HIERARCHICAL_CONFIG", "EdgePolicies", "HierarchicalSchedulingEnv"]

#: The small default system of ``gym.make("HierarchicalFL-v0")``: shipped digits
#: data, 12 devices under 3 edges with 2 subchannels each.
DEFAULT_HIERARCHICAL_CONFIG: dict[str, Any] = {
    "name": "hier-env",
    "rounds": 10,
    "data": {
        "dataset": "digits",
        "num_clients": 12,
        "partition": "dirichlet",
        "alpha": 1.0,
        "min_partition_size": 30,
    },
    "model": {"kind": "mlp", "hidden": [32]},
    "algorithm": {"kind": "fedavg", "local_steps": 3, "batch_size": 16, "lr": 0.1},
    "topology": {
        "kind": "hierarchical",
        "num_edges": 3,
        "tau": 3,
        "local_period": 3,
        "scheduling": {"subchannels_per_edge": 2},
    },
    "output": {"progress": False, "plots": False},
}


class HierarchicalSchedulingEnv(FLEnv):
    """Schedule every edge's subnet on its subchannels, one global round per step."""

    topology_kind = "hierarchical"
    default_config = DEFAULT_HIERARCHICAL_CONFIG

    def __init__(
        self,
        config: str | Path | Mapping[str, Any] | RunConfig | None = None,
        reward: str | None = None,
        overrides: Sequence[str] | Mapping[str, Any] = (),
        mode: str = "emulate",
        participants: bool = False,
        render_mode: str | None = None,
    ) -> None:
        if reward is None:
            reward = "accuracy" if mode == "emulate" else "loss"
        cfg = self._setup(config, overrides, mode, reward, render_mode=render_mode)
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
        #: (edge, block) → its schedule, render marks and repeated ids.
        self._decisions: dict[tuple[Any, ...], Any] = {}
        self._ignored: list[int] = []

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
            from envs.hierarchy.surrogate import HierarchicalSurrogate

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
        schedules, blocks = self._decide(action)
        result, extras = self.system.run_global_round(self.round, schedules)
        return self._conclude(blocks, result, extras)

    def _decide(self, action: Any) -> tuple[list[Any], list[npt.NDArray[np.int64]]]:
        """The per-edge schedules of ``action`` (and its blocks); marks them."""
        blocks = self.split_action(action)
        decided = [self._edge_decision(c, a) for c, a in enumerate(blocks)]
        self.marks = [mark for _, marks, _ in decided for mark in marks]
        self._ignored = [i for _, _, repeated in decided for i in repeated]
        return [schedule for schedule, _, _ in decided], blocks

    def _edge_decision(
        self, c: int, block: npt.NDArray[Any]
    ) -> tuple[Any, list[tuple[int, int]], list[int]]:
        """Edge c's schedule of its action block, its render marks, its repeats.

        Kept per (edge, block): a block always makes the same schedule (a
        ``Schedule`` is frozen); a bad block raises every time.
        """
        key = (c, block.dtype.str, block.shape, block.tobytes())
        found = self._decisions.get(key)
        if found is None:
            rules = self.rules[c]
            schedule = rules.to_schedule(block)[0]
            repeated = [] if rules.participants else self._repeated_in(rules, block)
            found = (schedule, self._marks_of(c, schedule), repeated)
            if len(self._decisions) >= 4096:  # a bound on the memo, not a policy
                self._decisions.clear()
            self._decisions[key] = found
        return found

    def _conclude(
        self, blocks: Sequence[Any], result: Any, extras: Mapping[str, Any]
    ) -> tuple[Scores, dict[str, Any]]:
        """The scores and info of a played round (the vector env plays it in lanes)."""
        costs: dict[str, Any] = {k: float(extras[k]) for k in ("latency_s", "energy_j")}
        info: dict[str, Any] = {
            "scheduled": sorted(int(r["client"]) for r in result.rows),
            "ignored": list(self._ignored),
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

    @staticmethod
    def _repeated_in(rules: EdgeActions, block: npt.ArrayLike) -> list[int]:
        """The device ids ``block`` names again after their first subchannel."""
        values = np.asarray(block).reshape(-1).tolist()
        n = len(rules.members)
        return [
            int(rules.members[j])
            for k, j in enumerate(values)
            if j != n and j in values[:k]
        ]

    def _marks_of(self, c: int, schedule: Any) -> list[tuple[int, int]]:
        """Edge c's (row, column) cells of :meth:`_gain_table` in ``schedule``."""
        row0 = int(sum(self.sizes[:c]))
        col0 = int(sum(self.num_subchannels[:c]))
        index = {int(m): j for j, m in enumerate(self.rules[c].members)}
        return [
            (row0 + index[int(d)], col0 + int(k))
            for d, k in zip(
                schedule.clients.tolist(), schedule.subchannel.tolist(), strict=True
            )
            if k >= 0  # a participants action names no subchannel
        ]

    def _gain_table(
        self, obs: Mapping[str, Any]
    ) -> tuple[npt.NDArray[np.float64], list[str]]:
        """Block table: edge c's devices (rows) on edge c's subchannels; NaN elsewhere."""
        table = np.full((sum(self.sizes), sum(self.num_subchannels)), np.nan)
        labels: list[str] = []
        r = k = 0
        for c, rules in enumerate(self.rules):
            gain = np.asarray(obs[f"edge_{c}"]["channel_gain"], dtype=np.float64)
            table[r : r + gain.shape[0], k : k + gain.shape[1]] = gain
            labels += [f"edge {c} device {int(d)}" for d in rules.members]
            r, k = r + gain.shape[0], k + gain.shape[1]
        return table, labels

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
        from rayfl.registry import build_policy

        self.env = env
        self.policies = [
            build_policy(name, sp, params=params) for sp in env.edge_spaces
        ]

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
