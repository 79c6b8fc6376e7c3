"""D2D as a topology plug-in (:class:`rayfl.topology.TopologyPlugin`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rayfl.d2d.config import D2DTopologyConfig
from rayfl.observation import CORE_KEYS, EXTRA_KEYS
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
        "single": "envs.d2d:D2DNeighborEnv",
    }

    # ------------------------------------------------------------ engine, runner
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

    # ------------------------------------------------------------ envs and RL

    # ------------------------------------------------------------- benchmarks
