"""D2D neighbor selection of pFedWN as a Gymnasium environment (``D2DNeighbor-v0``).

Step 1 of pFedWN (spec seed_003 §2.4) — which neighbors M_n a target client n
takes models from — is a scheduling decision like the OFDMA one of
:class:`envs.star.scheduling.WirelessFLEnv`. This env exposes it per round, with the
observation of :func:`rayfl.d2d.selection.round_observation` (the engine's own)
and the same ``MultiDiscrete([N + 1] * F)`` action, so every policy of the
``policies`` registry (``channel_threshold``, ``random``, ``best_channel``,
``random_neighbors``, ``learned``) plugs in unchanged; :mod:`envs.rl` gives RL
libraries score or ``MultiBinary(N)`` actions instead.

Symbol table (spec seed_003 → code):

| paper | code |
|-------|------|
| n (TC), G_n | ``targets``, ``obs["eligible"]`` |
| M_n | the non-idle entries of the action |
| P_s^err | ``obs["error_probability"][s]`` |
| ĥ² h̃_f² P | ``10**(obs["channel_gain"][s, f] / 10)`` |
| π_m | ``obs["em_weight"][m]`` |
| α | ``topology.alpha`` |

Implementation details:
    1. Round 0's observation is the one :func:`rayfl.d2d.selection.select_neighbors`
       gives the policy (the CCM draw), so a policy's first action here equals
       its t = 0 selection for the same layout and seed; round t ≥ 1 shows a
       fresh fading draw from (seed, "d2d_csi", round t, target). With
       ``topology.mobility`` the nodes move: round t shows round t's
       ``distance_m``, ``error_probability`` and gains
       (:class:`rayfl.d2d.motion.D2DMotion`, the engine's).
    2. All-targets mode (``topology.target: all``): one step is one round of
       every target; every observation key and the action get a leading target
       axis (T = N). :meth:`D2DNeighborEnv.target_observation` slices one target,
       and :func:`policy_action` applies one policy per target.
    3. The emulate backend runs the real D2D engine (:mod:`rayfl.d2d.round`)
       (Ray actors, real data); a changed M_n goes through
       :meth:`~rayfl.d2d.round.D2DRound.set_selection`. The surrogate backend
       trains nothing (:class:`envs.d2d.surrogate.D2DSurrogateDynamics`).
    4. Rewards use the target's test split (the D2D system evaluates there, as
       the scheduling env's rewards do); the baseline of the first step's reward
       is the initial model's loss/accuracy on that split.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from envs.base import FLEnv
from envs.d2d.backends import D2DEmulatedBackend, D2DOutcome, Selections
from envs.d2d.surrogate import D2DSurrogateBackend
from rayfl.config import RunConfig
from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.devices import device_keys
from rayfl.d2d.motion import D2DMotion
from rayfl.d2d.selection import (
    D2DLayout,
    decode_assignment,
    record_round,
    round_observation,
    selection_observation,
    selection_spaces,
    selection_spaces_with_lead,
    target_policy,
)
from rayfl.data.federated import FederatedData
from rayfl.observation import ObservationTracker
from rayfl.rl.rewards import COST_REWARDS, REWARDS, Scores

__all__ = [
    "DEFAULT_D2D_CONFIG",
    "D2D_REWARDS",
    "D2DNeighborEnv",
    "make_selection_policies",
    "policy_action",
]

#: The small default system of ``gym.make("D2DNeighbor-v0")``: digits, 11 nodes.
DEFAULT_D2D_CONFIG: dict[str, Any] = {
    "name": "d2d-env",
    "rounds": 10,
    "data": {
        "dataset": "digits",
        "num_clients": 11,
        "partition": "dirichlet",
        "alpha": 0.5,
        "min_partition_size": 30,
    },
    "model": {"kind": "mlp", "hidden": [32]},
    "algorithm": {"kind": "fedavg", "local_epochs": 1, "batch_size": 16, "lr": 0.1},
    "topology": {"kind": "d2d", "target": "random"},
    "output": {"progress": False, "plots": False},
}

#: The rewards of :mod:`rayfl.rl.rewards` a D2D round has (no cost model here).
D2D_REWARDS = tuple(r for r in REWARDS if r not in COST_REWARDS)


# --------------------------------------------------------------------------- env
class D2DNeighborEnv(FLEnv):
    """Choose a D2D target's neighbors M_n, one pFedWN round per step.

    ## Description
    Each step is one round of the server-free D2D system of pFedWN (spec
    seed_003): the agent names the neighbors whose models the target receives
    this round and the ISM sub-channel each sends on, and the round runs — the
    real D2D engine (:mod:`rayfl.d2d.round`, ``mode="emulate"``: neighbors
    train, links per ``topology.link_model``, EM, eq. 1, a local epoch) or the
    label-marginal surrogate (``mode="surrogate"``, no training). The paper's
    rule — M_n = {s : P_s^err < ε}, once at t = 0 — is the ``channel_threshold``
    policy; RL or other heuristics may re-decide every round.

    ## Action Space
    ``MultiDiscrete([N + 1] * F)`` (the action of :mod:`rayfl.d2d.selection`):
    entry f is the neighbor sending on sub-channel f, or N (idle); the selected
    neighbors M_n are the non-idle entries. Why this encoding rather than one
    bit per candidate: it is the space every registered scheduling policy
    already emits (so ``channel_threshold`` is reused as is, and its action is
    the t = 0 selection bit for bit), and it carries the sub-channel each
    neighbor uses, which ``link_model: mc_sinr`` needs. RL libraries get the
    ``MultiBinary(N)`` encoding from :class:`envs.rl.BinaryNeighbors`.
    In all-targets mode the shape is (T, F).

    Invalid actions: entries outside 0..N or a wrong shape/dtype always raise
    ``ValueError``. Naming the target itself, or a neighbor on two sub-channels,
    raises with ``invalid_action="raise"``; with ``"repair"`` (default, the
    rule of ``WirelessFL-v0``) such entries are dropped — a neighbor keeps its
    lowest sub-channel — and listed in ``info["ignored"]`` as (target,
    sub-channel, client). ``action_masks()`` gives the valid choices per entry.

    ## Observation Space
    A ``Dict`` of float32 arrays, the keys ``observation_keys`` of the D2D plug-in,
    :mod:`rayfl.observation` (leading T axis in all-targets mode), built by
    :func:`rayfl.d2d.selection.round_observation` (rows: the N nodes; the
    target's row is ineligible):

    | key | shape | meaning | unit | low | high |
    |-----|-------|---------|------|-----|------|
    | channel_gain | (N, F) | P ĥ² h̃_f² of link s → target on sub-channel f | dB | -inf | inf |
    | eligible | (N,) | 1 for the neighbors G_n (every node but the target) | – | 0 | 1 |
    | loss | (N,) | last train loss of s whose model reached the target | nats | 0 | inf |
    | upload_count | (N,) | rounds the model of s reached the target | count | 0 | inf |
    | privacy_spent | (N,) | always 0 (no DP in D2D runs) | ε | 0 | inf |
    | staleness | (N,) | rounds since the model of s last reached the target | rounds | 0 | inf |
    | data_size | (N,) | train samples of s | samples | 0 | inf |
    | round | (1,) | round index t | – | 0 | inf |
    | error_probability | (N,) | analytic P_s^err (1 for the target) | – | 0 | 1 |
    | distance_m | (N,) | distance to the target | m | 0 | inf |
    | em_weight | (N,) | π_s after the previous round | – | 0 | 1 |
    | selected | (N,) | 1 for last round's M_n | – | 0 | 1 |

    ## Rewards
    The reward set of every topology (:mod:`rayfl.rl.rewards`) over the targets'
    reported models on their test splits (plain means over targets):
    ``loss_decrease`` (default: the decrease of the mean test loss this round),
    ``min_max_loss``, ``loss``, ``jain``, and ``accuracy``/``accuracy_gain``
    (emulate mode); not ``latency``/``energy`` (the D2D system has no cost
    model). Each minus ``neighbor_cost`` × mean abs(M_n) (a price per model
    received).

    ## Info
    ``step`` returns ``neighbors`` and ``subchannel`` (target → the decoded
    M_n and sub-channels), ``delivered`` (target → models that arrived),
    ``test_loss``, ``test_acc`` (target → value; ``test_acc`` is None in
    surrogate mode) and ``ignored`` (repaired entries). The D2D system's
    per-client records of the last round are ``env.backend.rows`` (emulate).

    ## Starting State
    A layout and target(s) from the episode seed (``make_layout``), ω⁰ from the
    seed, π uniform; the data partition is drawn once per env from
    ``config.seed``.

    ## Episode End
    *Truncation*: after ``config.rounds`` steps. No termination.

    ## Arguments
    | parameter | type | default | description |
    |-----------|------|---------|-------------|
    | config | path, mapping or RunConfig | 11-node digits D2D system | the run config (``topology.kind: d2d``) |
    | mode | str | "surrogate" | "surrogate" (no training) or "emulate" (real rounds on Ray) |
    | reward | str | "loss_decrease" | one of ``D2D_REWARDS`` (:mod:`rayfl.rl.rewards`) |
    | neighbor_cost | float | 0.0 | reward cost per selected neighbor |
    | invalid_action | str | "repair" | "repair" or "raise" (see Action Space) |
    | overrides | list or mapping | () | config overrides ``key.path=value`` |
    | system | Engine (D2D) | None | drive an existing system (emulate; the runner) |
    | data | FederatedData | None | a prebuilt dataset |
    | render_mode | str or None | None | "ansi" or "rgb_array": the candidates' gains per sub-channel and the round's M_n (:mod:`envs.render`) |

    ## Version History
    * v0: initial version; ``render_mode`` added later (spaces, reward and
      dynamics unchanged).
    """

    topology_kind = "d2d"
    default_config = DEFAULT_D2D_CONFIG

    def __init__(
        self,
        config: str | Path | Mapping[str, Any] | RunConfig | None = None,
        mode: str = "surrogate",
        reward: str = "loss_decrease",
        neighbor_cost: float = 0.0,
        invalid_action: str = "repair",
        overrides: Sequence[str] | Mapping[str, Any] = (),
        system: Any = None,
        data: FederatedData | None = None,
        render_mode: str | None = None,
    ) -> None:
        if invalid_action not in ("repair", "raise"):
            raise ValueError(
                f"invalid_action must be 'repair' or 'raise', got {invalid_action!r}"
            )
        if not math.isfinite(neighbor_cost) or neighbor_cost < 0:
            raise ValueError(f"neighbor_cost must be >= 0, got {neighbor_cost}")
        if system is not None and mode != "emulate":
            raise ValueError("system= needs mode='emulate'")
        cfg = self._setup(
            config,
            overrides,
            mode,
            reward,
            None if system is None else system.config,
            render_mode=render_mode,
        )
        self.topology: D2DTopologyConfig = cfg.topology  # type: ignore[assignment]
        self.neighbor_cost = float(neighbor_cost)
        self.invalid_action = invalid_action
        n, f = cfg.data.num_clients, self.topology.num_subchannels
        self.num_nodes, self.num_subchannels = n, f
        self.all_targets = self.topology.target == "all"
        lead: tuple[int, ...] = (n,) if self.all_targets else ()
        keys = device_keys(self.topology)
        self.target_spaces = selection_spaces(n, f, keys)
        self.observation_space, self.action_space = selection_spaces_with_lead(
            n, f, lead, keys
        )
        self._system = system
        self._data = data
        self.layout: D2DLayout | None = None
        self.targets: tuple[int, ...] = ()
        self.episode_seed = cfg.seed

    # ---------------------------------------------------------------- hooks
    def _build(self) -> D2DEmulatedBackend | D2DSurrogateBackend:
        if self.mode == "emulate":
            return D2DEmulatedBackend(self.config, self._system, self._data)
        return D2DSurrogateBackend(self.config, self._data)

    def _restart(self, seed: int) -> dict[str, Any]:
        """A new layout, target(s) and ω⁰ from the episode seed."""
        self.episode_seed = seed
        self.layout = self._backend.restart(seed)
        self.targets = tuple(self.layout.targets)
        self._motion: D2DMotion = self._backend.motion  # P^err once per round
        self._base: dict[int, dict[str, npt.NDArray[np.float32]]] = {
            t: self._base_observation(t, seed) for t in self.targets
        }
        self._em = {t: np.zeros(self.num_nodes) for t in self.targets}
        self._history = {t: ObservationTracker(self.num_nodes) for t in self.targets}
        self._loss, self._acc = self._backend.initial(self.targets)
        return {"targets": list(self.targets)}

    def _base_observation(
        self, target: int, seed: int
    ) -> dict[str, npt.NDArray[np.float32]]:
        """The target's t = 0 (CCM) observation of the episode's layout."""
        assert self.layout is not None
        return selection_observation(
            self.layout, target, self.topology, seed=seed, motion=self._motion
        )[0]

    def _initial_scores(self) -> Scores:
        return self._target_scores()

    def _play(self, action: Any) -> tuple[Scores, dict[str, Any]]:
        """One round with the neighbors the action selects."""
        selections, ignored = self._decide(action)
        outcome = self._backend.run(self.round, selections)
        return self._conclude(selections, ignored, outcome)

    def _decide(self, action: Any) -> tuple[Selections, list[tuple[int, int, int]]]:
        """The first part of :meth:`_play`: decode the action, mark the render.

        A vector env (:mod:`envs.d2d.vector`) decides every lane, runs their
        rounds at once, then concludes each lane (:meth:`_conclude`).
        """
        selections, ignored = self.decode(action)
        n = self.num_nodes
        self.marks = [
            (i * n + s, f)
            for i, t in enumerate(self.targets)
            for s, f in zip(*selections[t], strict=True)
        ]
        return selections, ignored

    def _conclude(
        self,
        selections: Selections,
        ignored: list[tuple[int, int, int]],
        outcome: D2DOutcome,
    ) -> tuple[Scores, dict[str, Any]]:
        """The rest of :meth:`_play`: fold the round's outcome into the history."""
        for t in self.targets:
            self._em[t] = outcome.em_weight[t]
            record_round(
                self._history[t],
                target=t,
                chosen=selections[t][0],
                arrived=outcome.delivered[t],
                train_loss=outcome.train_loss,
            )
        self._loss.update(outcome.test_loss)
        self._acc.update(outcome.test_acc)
        info = {
            "neighbors": {t: list(selections[t][0]) for t in self.targets},
            "subchannel": {t: list(selections[t][1]) for t in self.targets},
            "delivered": outcome.delivered,
            "test_loss": dict(outcome.test_loss),
            "test_acc": dict(outcome.test_acc) if self.mode == "emulate" else None,
            "ignored": ignored,
        }
        return self._target_scores(), info

    def _penalty(self, info: Mapping[str, Any]) -> float:
        """``neighbor_cost`` × the mean abs(M_n) over the targets."""
        if self.neighbor_cost == 0.0:  # 0 × a finite mean (every step has a target)
            return 0.0
        sizes = [len(m) for m in info["neighbors"].values()]
        return self.neighbor_cost * float(np.mean(sizes))

    def action_masks(self) -> npt.NDArray[np.bool_]:
        """Valid choices per sub-channel, shape ([T,] F, N + 1): G_n and idle.

        Per-entry masks cannot forbid naming a neighbor twice (that rule is
        ``invalid_action``'s).
        """
        rows = []
        for t in self.targets:
            row = np.ones(self.num_nodes + 1, dtype=bool)
            row[t] = False
            rows.append(np.tile(row, (self.num_subchannels, 1)))
        return np.stack(rows) if self.all_targets else rows[0]

    # ---------------------------------------------------------------- helpers
    def _target_scores(self) -> Scores:
        """The targets' current test scores (what the rewards read)."""
        return Scores(
            np.array([self._loss[t] for t in self.targets], dtype=np.float64),
            np.array([self._acc[t] for t in self.targets], dtype=np.float64),
        )

    def _gain_table(
        self, obs: Mapping[str, Any]
    ) -> tuple[npt.NDArray[np.float64], list[str]]:
        """Each target's candidates (rows, target after target) on the sub-channels.

        The target's own row (a placeholder gain in the observation) is NaN.
        """
        gain = np.asarray(obs["channel_gain"], dtype=np.float64)
        table = gain.reshape(-1, self.num_subchannels).copy()
        n = self.num_nodes
        table[[i * n + t for i, t in enumerate(self.targets)]] = np.nan
        labels = [
            f"target {t} node {s}" for t in self.targets for s in range(self.num_nodes)
        ]
        return table, labels

    def target_observation(
        self, obs: Mapping[str, npt.NDArray[np.float32]], index: int
    ) -> dict[str, npt.NDArray[np.float32]]:
        """The observation of the ``index``-th target (identity if single-target)."""
        if not self.all_targets:
            return dict(obs)
        return {k: v[index] for k, v in obs.items()}

    def _get_obs(self) -> dict[str, npt.NDArray[np.float32]]:
        assert self.layout is not None and self._backend is not None
        per = [
            round_observation(
                self.layout,
                self._base[t],
                self._history[t],
                self._em[t],
                self.topology,
                data_size=self._backend.data_size,
                seed=self.episode_seed,
                round=self.round,
                motion=self._motion,
            )
            for t in self.targets
        ]
        if not self.all_targets:
            return per[0]
        return {k: np.stack([p[k] for p in per]) for k in per[0]}

    def decode(self, action: Any) -> tuple[Selections, list[tuple[int, int, int]]]:
        """Turn an action into each target's (neighbors, sub-channels).

        Returns:
            Target → (M_n ascending, the sub-channel of each), and the ignored
            (target, sub-channel, client) entries (``invalid_action="repair"``).

        Raises:
            ValueError: On a wrong shape/dtype or an entry outside 0..N; with
                ``invalid_action="raise"`` also on the target itself or a
                repeated neighbor.
        """
        if isinstance(action, Mapping):
            action = action["assignment"]
        values = np.asarray(action)
        n, f = self.num_nodes, self.num_subchannels
        shape = (len(self.targets), f) if self.all_targets else (f,)
        if values.shape != shape or not np.issubdtype(values.dtype, np.integer):
            raise ValueError(
                f"action must be integers of shape {shape} (the neighbor on each "
                f"sub-channel, {n} = idle), got {action!r}"
            )
        rows = values.reshape(len(self.targets), f)
        out: Selections = {}
        ignored: list[tuple[int, int, int]] = []
        up = self._motion.devices.available(self.round)  # away: not eligible
        for t, row in zip(self.targets, rows, strict=True):
            chosen, dropped = decode_assignment(row, (np.arange(n) != t) & up)
            if dropped and self.invalid_action == "raise":
                sub, s = dropped[0]
                why = (
                    "is the target itself"
                    if s == t
                    else "is away this round (topology.availability)"
                    if not up[s]
                    else f"is already on sub-channel {chosen[s]}"
                )
                raise ValueError(
                    f"target {t}, sub-channel {sub}: client {s} {why} "
                    "(invalid_action='raise')"
                )
            ignored += [(t, sub, s) for sub, s in dropped]
            neighbors = tuple(sorted(chosen))
            out[t] = (neighbors, tuple(chosen[s] for s in neighbors))
        return out, ignored


# ------------------------------------------------------------------- policies
def make_selection_policies(
    env: D2DNeighborEnv,
    name: str | None = None,
    params: Mapping[str, Any] | None = None,
) -> list[Any]:
    """One policy per target of a reset ``env`` (:func:`rayfl.d2d.selection.target_policy`).

    Args:
        env: A reset env (its targets and episode seed are used).
        name: A registered policy (default: the config's ``scheduler.policy``).
        params: Its parameters (default: the config's ``scheduler.params``).
    """
    scheduler = env.config.scheduler
    return [
        target_policy(
            env.topology,
            env.num_nodes,
            target=t,
            seed=env.episode_seed,
            name=scheduler.policy if name is None else name,
            params=scheduler.params if params is None else params,
        )
        for t in env.targets
    ]


def policy_action(
    env: D2DNeighborEnv, policies: Sequence[Any], obs: Mapping[str, Any]
) -> npt.NDArray[np.int64]:
    """Apply one policy per target to ``obs``; return the env's action."""
    actions = []
    for i, policy in enumerate(policies):
        action = policy(env.target_observation(obs, i))
        assignment = action["assignment"] if isinstance(action, dict) else action
        actions.append(np.asarray(assignment, dtype=np.int64))
    return np.stack(actions) if env.all_targets else actions[0]
