"""The wireless scheduling decision of each FL round as a Gymnasium environment."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from envs.base import FLEnv
from envs.star.backends import EmulatedBackend, Outcome, SurrogateBackend
from rayfl.config import RunConfig
from rayfl.rl.rewards import REWARDS, Scores
from rayfl.schedule import Schedule
from rayfl.star.actions import StarActions, StarParticipants
from rayfl.wireless.config import WirelessConfig

__all__ = ["DEFAULT_CONFIG", "REWARDS", "WirelessFLEnv"]

#: The small default system of ``gym.make("WirelessFL-v0")``: shipped digits data.
DEFAULT_CONFIG: dict[str, Any] = {
    "name": "env",
    "rounds": 20,
    "data": {
        "dataset": "digits",
        "num_clients": 10,
        "partition": "dirichlet",
        "alpha": 1.0,
        "min_partition_size": 30,
    },
    "model": {"kind": "mlp", "hidden": [32]},
    "algorithm": {"kind": "fedavg", "local_epochs": 1, "batch_size": 16, "lr": 0.1},
    "wireless": {"num_subchannels": 4},
    "output": {"progress": False, "plots": False},
}


class WirelessFLEnv(FLEnv):
    """Schedule clients on OFDMA subchannels, one FL round per step.

    ## Description
    Each step is one round of wireless FL (DESIGN.md "One round"): the agent
    assigns clients to the K orthogonal subchannels (seed_000 §2.5, constraints
    C2–C3: one client per subchannel, one subchannel per client), optionally
    picks a transmit power level, and the round runs — on the real engine
    (``mode="emulate"``: Ray actors train, the uplink goes through the
    channel model of eqs. (11)–(14) of Zhao et al., the server aggregates) or on
    a cheap surrogate of the loss dynamics (``mode="surrogate"``, see
    ``envs.surrogate``) with the same channel and privacy models.

    ## Action Space
    ``MultiDiscrete([N + 1] * K)``: entry k is the client on subchannel k, or N
    for idle. With ``power_levels > 1`` or ``controls=True`` the action is a
    ``Dict`` with ``assignment`` (that array), ``power`` (``MultiDiscrete([L] *
    K)``: level l means P_max·(l+1)/L) and ``controls`` (``Box`` of shape
    (N, C): per-client knobs the algorithm declares, e.g. ``lr``). Keys may be
    omitted: missing ``power`` means maximum power, missing ``controls`` the
    algorithm's configured values. Rules: a client named on several subchannels
    keeps the lowest-indexed one (the others idle); a client that is not
    eligible (privacy budget or T0 spent, or unreachable with
    ``wireless.availability``) is ignored. ``info["ignored"]`` lists
    the client of every entry that was not scheduled: the ineligible ones,
    then each repeated naming (a client named on subchannels 0 and 2 is
    scheduled on 0 and listed once); ``action_masks()`` gives the valid choices.
    With ``wireless.round_deadline_s``, ``info["stragglers"]`` lists the
    scheduled clients whose upload missed the deadline.
    With ``participants=True`` (for a policy that picks a client set only, e.g.
    ``all``) the action is ``MultiBinary(N)`` instead: the i-th chosen client by
    id gets subchannel i at maximum power; ineligible clients and those past the
    K-th are ignored.

    ## Observation Space
    A ``Dict`` of float32 arrays:

    | key | shape | meaning | unit | low | high |
    |-----|-------|---------|------|-----|------|
    | channel_gain | (N, K) | path loss × fading of client n on subchannel k this round | dB | -inf | inf |
    | loss | (N,) | last known local training loss (initially measured at reset) | nats | 0 | inf |
    | upload_count | (N,) | uploads so far Υ_n | count | 0 | inf |
    | privacy_spent | (N,) | accountant ε spent at the run's δ (0 without DP) | ε | 0 | inf |
    | staleness | (N,) | rounds since the client's last delivered update | rounds | 0 | inf |
    | data_size | (N,) | train samples of the client | samples | 0 | inf |
    | eligible | (N,) | 1 if the client may upload this round | – | 0 | 1 |
    | round | (1,) | round index t | – | 0 | inf |

    With a moving world (issue 48) the keys of :mod:`rayfl.star.moving` are
    added: ``available``, ``channel_age`` (with ``wireless.availability``;
    ``channel_gain`` is then the gain last seen) and ``compute_time_s`` (with
    ``wireless.cpu_frequency_distribution`` or ``round_deadline_s``).

    ## Rewards
    The reward set of every topology (:mod:`rayfl.rl.rewards`) over the N clients'
    models after the round (plain means): ``min_max_loss`` (default, −max_n
    test loss, the min-max fairness objective of seed_000 §3.3), ``loss``,
    ``loss_decrease``, ``accuracy`` and ``accuracy_gain`` (emulate mode),
    ``jain`` (of the test losses, seed_000 §6.4), ``latency`` (−max latency of
    the scheduled uplinks: a synchronous round) and ``energy`` (−Σ uplink
    energy).

    ## Starting State
    A fresh global model ω⁰ drawn from the episode seed, channel geometry from the
    seed, all counters zero; the federated data partition is drawn once per env
    from ``config.seed``.

    ## Episode End
    *Termination*: no client is eligible any more (every budget spent).
    *Truncation*: after ``config.rounds`` steps.

    ## Arguments
    | parameter | type | default | description |
    |-----------|------|---------|-------------|
    | config | path, mapping or RunConfig | small digits system | the run config; ``wireless`` defaults to ``WirelessConfig()`` |
    | mode | str | "emulate" | "emulate" (real training on Ray) or "surrogate" |
    | reward | str | "min_max_loss" | one of ``REWARDS`` |
    | controls | bool | False | expose the algorithm's per-client controls |
    | participants | bool | False | a client-set action ``MultiBinary(N)`` instead of the assignment |
    | overrides | list or mapping | () | config overrides ``key.path=value`` |
    | render_mode | str or None | None | "ansi" (text) or "rgb_array" (image): the round's channel gains and schedule (:mod:`envs.render`) |

    ## Version History
    * v0: initial version; ``render_mode`` and the repeated clients in
      ``info["ignored"]`` added later (spaces, reward and dynamics unchanged).
    """

    topology_kind = "star"
    default_config = DEFAULT_CONFIG

    def __init__(
        self,
        config: str | Path | Mapping[str, Any] | RunConfig | None = None,
        mode: str = "emulate",
        reward: str = "min_max_loss",
        controls: bool = False,
        overrides: Sequence[str] | Mapping[str, Any] = (),
        participants: bool = False,
        render_mode: str | None = None,
    ) -> None:
        cfg = self._setup(config, overrides, mode, reward, render_mode=render_mode)
        if cfg.wireless is None:
            cfg = self.config = cfg.model_copy(update={"wireless": WirelessConfig()})
        actions = self.actions = StarActions.from_config(cfg, controls=controls)
        n, k = self.num_clients, self.num_subchannels = (
            actions.num_clients,
            actions.num_subchannels,
        )
        self.power_w, self.control_names = actions.power_w, actions.control_names
        self.default_controls = actions.default_controls
        self.participants = StarParticipants(n, k) if participants else None
        self.observation_space, action_space = actions.spaces()
        self.action_space = spaces.MultiBinary(n) if participants else action_space
        self.last_outcome: Outcome | None = None

    # ---------------------------------------------------------------- hooks
    def _build(self) -> EmulatedBackend | SurrogateBackend:
        if self.mode == "emulate":
            return EmulatedBackend(self.config)
        return SurrogateBackend(self.config)

    def _restart(self, seed: int) -> dict[str, Any]:
        self._backend.restart(seed)
        self.last_outcome = None
        return self._get_info()

    def _initial_scores(self) -> Scores:
        return Scores(*self._backend.initial())

    def _play(self, action: Any) -> tuple[Scores, dict[str, Any]]:
        schedule, ignored = self._decide(action)
        return self._conclude(
            schedule, ignored, self._backend.run(self.round, schedule)
        )

    def _decide(self, action: Any) -> tuple[Schedule, list[int]]:
        """Turn ``action`` into this round's schedule and the ignored clients."""
        rules = self.participants or self.actions
        eligible = self.backend.uplink.eligible(self.round)
        schedule, ignored = rules.to_schedule(action, eligible)
        if self.participants is None:
            ignored = ignored + _repeated(action, self.num_clients)
        self.marks = list(
            zip(schedule.clients.tolist(), _subchannels(schedule), strict=True)
        )
        return schedule, ignored

    def _conclude(
        self, schedule: Schedule, ignored: list[int], outcome: Outcome
    ) -> tuple[Scores, dict[str, Any]]:
        """Return the scores and info of the round ``schedule`` played."""
        self.last_outcome = outcome
        info = self._get_info()
        info.update(ignored=ignored, scheduled=schedule.clients.tolist())
        if self.config.wireless.round_deadline_s is not None:  # type: ignore[union-attr]  # set in __init__
            # the uploads that missed the round deadline (lost, released)
            info["stragglers"] = [
                int(r["client"]) for r in outcome.rows if r.get("straggler")
            ]
        scores = Scores(
            outcome.test_loss,
            outcome.test_acc,
            latency_s=float(info["latency_s"].max(initial=0.0)),
            energy_j=float(info["energy_j"].sum()),
        )
        return scores, info

    def _terminated(self, obs: Mapping[str, Any]) -> bool:
        """Every client's budget is spent (not: no client reachable this round)."""
        return not bool(self.backend.uplink.eligible().any())

    def action_masks(self) -> npt.NDArray[np.bool_]:
        """Return the valid choices per subchannel, shape (K, N + 1): eligible clients and idle.

        With ``participants=True``: the clients that may be chosen, shape (N,).
        """
        eligible = self.backend.uplink.eligible(self.round)
        if self.participants is not None:
            return np.asarray(eligible, dtype=bool).copy()
        row = np.append(eligible, True)
        return np.tile(row, (self.num_subchannels, 1))

    # ---------------------------------------------------------------- helpers
    def _gain_table(
        self, obs: Mapping[str, Any]
    ) -> tuple[npt.NDArray[np.float64], list[str]]:
        """The clients' gains per subchannel [dB], rows labelled by client id."""
        gain = np.asarray(obs["channel_gain"], dtype=np.float64)
        return gain, [f"client {n}" for n in range(gain.shape[0])]

    def _get_obs(self) -> dict[str, npt.NDArray[np.float32]]:
        return dict(self.backend.observe(self.round))

    def _get_info(self) -> dict[str, Any]:
        out = self.last_outcome
        n = self.num_clients
        # an unscheduled client spends no time or energy
        per_client = {key: np.zeros(n) for key in ("latency_s", "energy_j", "bits")}
        for row in [] if out is None else out.rows:
            for key, values in per_client.items():
                values[int(row["client"])] = row.get(key, 0.0)
        return {
            "round": self.round,
            "delivered": [] if out is None else list(out.delivered),
            **per_client,
            "test_loss": None if out is None else out.test_loss,
            "test_acc": (
                None if out is None or np.isnan(out.test_acc).all() else out.test_acc
            ),
        }


def _repeated(action: Any, num_clients: int) -> list[int]:
    """The clients an assignment names again after their first subchannel."""
    assignment = action["assignment"] if isinstance(action, Mapping) else action
    seen: set[int] = set()
    repeated = []
    for client in np.asarray(assignment).reshape(-1).tolist():
        if client != num_clients and client in seen:
            repeated.append(int(client))
        seen.add(client)
    return repeated


def _subchannels(schedule: Any) -> list[int]:
    """The schedule's subchannel per client (the i-th on i where it has none, -1)."""
    return [int(k) if k >= 0 else i for i, k in enumerate(schedule.subchannel)]
