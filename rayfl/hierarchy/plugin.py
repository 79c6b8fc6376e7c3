"""The hierarchy as a topology plug-in (:class:`rayfl.topology.TopologyPlugin`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayfl.hierarchy.config import TopologyConfig
from rayfl.observation import CORE_KEYS
from rayfl.topology import TopologyPlugin

__all__ = ["Hierarchy"]


class Hierarchy(TopologyPlugin):
    """Devices → edge servers → cloud with hierarchical DP (H2FDP)."""

    name = "hierarchical"
    config = TopologyConfig
    default_policy = "uniform"
    removed_fields = ("scheduling.policy", "scheduling.params")
    observation_keys = CORE_KEYS
    action_parts = frozenset({"participants", "assignment"})
    envs = {
        "single": "envs.hierarchy.scheduling:HierarchicalSchedulingEnv",
        "flat": "envs.hierarchy.flat:HierarchicalFLFlatEnv",
        "rl_scores": "envs.hierarchy.rl:EdgeScores",
        "surrogate": "envs.hierarchy.surrogate:HierarchicalSurrogate",
        "policies": "envs.hierarchy.scheduling:EdgePolicies",
        "multiagent": "envs.hierarchy.multiagent:HierarchicalEdgesParallelEnv",
        "lanes": "envs.rl_vector:make_rl_vector_env",
        "vector": "envs.hierarchy.vector:HierarchicalFLVectorEnv",
    }

    # ------------------------------------------------------------ engine, runner
    def check_lanes(self, cfg: Any) -> None:
        """Lanes share hosts (:func:`rayfl.hierarchy.lanes.check_lanes`)."""
        from rayfl.hierarchy.lanes import check_lanes

        check_lanes(cfg)

    def strategy(self) -> Any:
        """Return a new engine strategy."""
        from rayfl.hierarchy.round import HierarchicalRound

        return HierarchicalRound()

    def context(self, cfg: Any, system: Any = None) -> Any:
        """Return edge 0's context (:func:`rayfl.hierarchy.deciders.edge_context`)."""
        from rayfl.hierarchy.deciders import edge_context

        return edge_context(cfg, system)

    def deciders(self, cfg: Any, system: Any, policy_decider: Any) -> list[Any]:
        """Return one decider per edge (:func:`rayfl.hierarchy.deciders.edge_policies`)."""
        from rayfl.hierarchy.deciders import edge_policies

        return [
            policy_decider(policy, rules.to_schedule)
            for policy, rules in edge_policies(cfg, system)
        ]

    # -------------------------------------------------------------------- config
    def check_run(self, cfg: Any) -> None:
        """Its own DP and links; subnets and cost model that fit; no K, no eval sample."""
        from rayfl.hierarchy.run_checks import check_cost, check_sections, check_subnets

        check_sections(cfg)
        self.refuse_unread(
            cfg,
            evaluates="every device",
            clients_per_round="each edge's scheduler.policy chooses its devices, at "
            "most topology.scheduling.subchannels_per_edge per edge per global round "
            "(topology.clients_per_edge or topology.assignment sets the subnets)",
        )
        check_subnets(cfg.topology, cfg.data.num_clients, cfg.seed)
        check_cost(cfg.topology.cost)

    def dp_claim(self, cfg: Any) -> Any:
        """H2FDP's device-level DP (:mod:`rayfl.hierarchy.dp`), or none."""
        from rayfl.privacy.sensitivity import ADJACENCY_CLIENT, DPClaim

        topology = cfg.topology
        if not topology.dp.enabled or topology.baseline == "hfl":
            return DPClaim(
                mechanism=None,
                no_dp_reason="topology.dp is off (enabled false or baseline hfl): "
                "no noise",
            )
        sizes = []
        if topology.weighting == "data_size":
            sizes.append("topology.weighting=data_size weighs devices by abs(D_i)")
        if topology.dp.calibration_sample_rate is None:
            sizes.append(
                "sigma uses eq. 15's q = B / mean abs(D_i) "
                "(topology.dp.calibration_sample_rate unset)"
            )
        return DPClaim(
            mechanism=(
                ADJACENCY_CLIENT,
                "each device's step is clipped to eta*s*G and noised on the device "
                "(untrusted edge) or in the trusted edge's mean, whatever its data",
            ),
            size_releases=tuple(sizes),
        )

    # ------------------------------------------------------------ envs and RL
    def rl_meta(self, cfg: Any) -> dict[str, Any]:
        """Each edge decides on its own K_e subchannels (top K_e scores)."""
        k = cfg.topology.scheduling.subchannels_per_edge
        return {"selection": "top_k", "num_subchannels": k}

    # ------------------------------------------------------------- benchmarks
    bench_parts = frozenset({"assignment"})  # the env schedules subchannels
    capabilities = frozenset({"tunes_config"})  # constant_tuned sets config values

    def scenarios(self) -> Mapping[str, tuple[Any, ...]]:
        """Return the hierarchy's benchmark scenarios (:mod:`rayfl.hierarchy.scenarios`)."""
        from rayfl.hierarchy.scenarios import scenarios

        return scenarios()

    def tunable_constants(self, cfg: Any) -> dict[str, tuple[float, float, float]]:
        """Return the configured step size's key (:mod:`rayfl.hierarchy.bench`)."""
        from rayfl.hierarchy.bench import tunable_constants

        return tunable_constants(cfg)

    def bench_policy(
        self, env: Any, cfg: Any, name: str, params: Mapping[str, Any], mode: str
    ) -> Any:
        """Build one policy ``name`` per edge (:mod:`rayfl.hierarchy.bench`)."""
        from rayfl.hierarchy.bench import bench_policy

        return bench_policy(env, name, params)
