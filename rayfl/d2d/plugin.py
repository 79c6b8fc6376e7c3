"""D2D as a topology plug-in (:class:`rayfl.topology.TopologyPlugin`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rayfl.d2d.config import D2DTopologyConfig
from rayfl.observation import CORE_KEYS, EXTRA_KEYS
from rayfl.rl.rewards import COST_REWARDS, REWARDS
from rayfl.topology import TopologyPlugin

__all__ = ["D2D"]


class D2D(TopologyPlugin):
    """Server-free device-to-device personalized FL (pFedWN)."""

    name = "d2d"
    config = D2DTopologyConfig
    default_policy = "channel_threshold"
    removed_fields = ("policy", "policy_params")
    observation_keys = (*CORE_KEYS, *EXTRA_KEYS)
    action_parts = frozenset({"assignment"})
    envs = {
        "single": "envs.d2d.neighbor:D2DNeighborEnv",
        "flat": "envs.d2d.flat:D2DNeighborFlatEnv",
        "rl_base": "envs.d2d.rl:target_env",
        "surrogate": "envs.d2d.surrogate:D2DSurrogateBackend",
        "multiagent": "envs.d2d.multiagent:D2DTargetsParallelEnv",
        "lanes": "envs.rl_vector:make_rl_vector_env",
        "vector": "envs.d2d.vector:D2DNeighborVectorEnv",
    }

    # ------------------------------------------------------------ engine, runner
    def check_lanes(self, cfg: Any) -> None:
        """Lanes share hosts (:func:`rayfl.d2d.lane_runs.check_d2d_lanes`)."""
        from rayfl.d2d.lane_runs import check_d2d_lanes

        check_d2d_lanes(cfg)

    def strategy(self) -> Any:
        """Return a new engine strategy."""
        from rayfl.d2d.round import D2DRound

        return D2DRound()

    def context(self, cfg: Any, system: Any = None) -> Any:
        """Return a target's context: the run's seed and ``topology.epsilon``."""
        from rayfl.observation import SystemContext

        return SystemContext(
            topology=self.name,
            seed=int(cfg.seed),
            rounds=int(cfg.rounds),
            model_dim=1 if system is None else int(system.dim),
            selection_epsilon=float(cfg.topology.epsilon),
        )

    def deciders(self, cfg: Any, system: Any, policy_decider: Any) -> list[Any]:
        """Return one decider per target (:func:`rayfl.d2d.deciders.selection_deciders`)."""
        from rayfl.d2d.deciders import selection_deciders

        return selection_deciders(system, policy_decider)

    def loop_settings(self, cfg: Any, base: Any) -> Any:
        """D2D rows (:func:`rayfl.d2d.records.round_records`), no per-client summary.

        Every round evaluates the targets; the shared cadence and cost columns
        do not apply.
        """
        from rayfl.d2d.records import round_records

        return replace(
            base,
            eval_every=1,
            evaluate_every_round=False,
            wireless=False,
            logged=(),
            records=round_records,
            client_summary=False,
        )

    def summary(self, system: Any, rows: list[dict[str, Any]], **common: Any) -> Any:
        """Return D2D's own summary (``target_acc_max``, the selection report)."""
        from rayfl.d2d.records import summary_document

        return summary_document(system, rows, **common)

    # -------------------------------------------------------------------- config
    rewards = frozenset(REWARDS) - frozenset(COST_REWARDS)  # no cost model here
    rl_features = frozenset({"neighbor_cost"})

    def check_run(self, cfg: Any) -> None:
        """Its own channel, N >= 2, the target and method rules; no K, no eval sample."""
        from rayfl.d2d.config import check_d2d_run

        check_d2d_run(cfg)
        self.refuse_unread(
            cfg,
            evaluates="its targets",
            clients_per_round="scheduler.policy selects each target's neighbors "
            "(channel_threshold: P^err < topology.epsilon) and every selected "
            "neighbor sends each round",
        )

    def check_rl(self, cfg: Any) -> None:
        """Training needs one target; then the common ``rl`` rules."""
        if cfg.topology.target == "all":
            raise ValueError(
                "rl: training on D2D needs one target (topology.target: an id or "
                "random); got topology.target=all"
            )
        super().check_rl(cfg)

    def dp_claim(self, cfg: Any) -> Any:
        """The federated baselines use the uplink's DP; the other methods have none."""
        if cfg.topology.method == "federated":
            return None
        from rayfl.privacy.sensitivity import DPClaim

        return DPClaim(
            mechanism=None,
            no_dp_reason=f"topology.method={cfg.topology.method} sends models "
            "without a DP mechanism (privacy.mechanism must be none)",
        )

    # ------------------------------------------------------------ envs and RL
    def rl_meta(self, cfg: Any) -> dict[str, Any]:
        """A target takes every eligible positive score, at most F neighbors.

        Its features also read the moving devices' keys
        (:func:`rayfl.d2d.devices.device_keys`).
        """
        from rayfl.d2d.devices import device_keys

        return {
            "selection": "positive",
            "num_subchannels": cfg.topology.num_subchannels,
            "observation_keys": list(device_keys(cfg.topology)),
        }

    # ------------------------------------------------------------- benchmarks
    untrained_params = {"selection": "positive"}  # how D2D policies are trained

    def scenarios(self) -> Mapping[str, tuple[Any, ...]]:
        """Return D2D's benchmark scenarios (:mod:`rayfl.d2d.scenarios`)."""
        from rayfl.d2d.scenarios import scenarios

        return scenarios()
