"""The star as a topology plug-in (:class:`rayfl.topology.TopologyPlugin`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rayfl.observation import ACTION_PARTS, CORE_KEYS
from rayfl.star.config import StarTopologyConfig
from rayfl.topology import TopologyPlugin

__all__ = ["Star"]


class Star(TopologyPlugin):
    """N clients, one cloud, one wireless uplink (WPFL, DP-Ditto, DP-SparFL)."""

    name = "star"
    aliases = ("flat",)
    config = StarTopologyConfig
    default_policy = "all"
    observation_keys = CORE_KEYS
    action_parts = frozenset(ACTION_PARTS)
    envs = {
        "single": "envs.star.scheduling:WirelessFLEnv",
        "flat": "envs.star.flat:WirelessFLFlatEnv",
        "lanes": "envs.rl_vector:make_rl_vector_env",
        "vector": "envs.star.vector:WirelessFLVectorEnv",
        "surrogate": "envs.star.backends:SurrogateBackend",
    }
    capabilities = frozenset({"keeps_warm", "fits_surrogate"})

    # ------------------------------------------------------------ engine, runner
    def strategy(self) -> Any:
        """Return a new engine strategy."""
        from rayfl.star.round import StarRound

        return StarRound()

    def context(self, cfg: Any, system: Any = None) -> Any:
        """Return the star's context (:mod:`rayfl.star.context`): of ``system``, else of ``cfg``."""
        from rayfl.star.context import config_context, star_context

        return config_context(cfg) if system is None else star_context(system)

    def deciders(self, cfg: Any, system: Any, policy_decider: Any) -> list[Any]:
        """Return the star's one decider (:func:`rayfl.star.deciders.make_deciders`)."""
        from rayfl.star.deciders import make_deciders

        return make_deciders(cfg, system, policy_decider)

    def loop_settings(self, cfg: Any, base: Any) -> Any:
        """Evaluate every round unless the policy picks a client set (it may read the test metrics)."""
        from rayfl.star.deciders import chooses_participants

        return replace(base, evaluate_every_round=not chooses_participants(cfg))

    def check_policy_build(self, cfg: Any) -> None:
        """Build the policy on the scheduling env's spaces (:mod:`rayfl.star.deciders`)."""
        from rayfl.star.deciders import check_policy_build

        check_policy_build(cfg)

    def env_policy(self, cfg: Any, env: Any) -> Any:
        """Return the policy of a reset scheduling env (:func:`rayfl.star.deciders.env_policy`)."""
        from rayfl.star.deciders import env_policy

        return env_policy(cfg, env)

    # -------------------------------------------------------------------- config
    rl_features = frozenset({"controls"})

    def check_scheduler(self, cfg: Any) -> None:
        """Subchannel policies need a ``wireless`` section; K is read or refused."""
        from rayfl.star.run_checks import check_star_scheduler, check_star_world

        check_star_scheduler(cfg, self.name)
        check_star_world(cfg)

    def policy_parts(self, cfg: Any) -> frozenset[str]:
        """The client set, or the subchannels (+ power, controls) with a channel."""
        from rayfl.star.run_checks import star_policy_parts

        return star_policy_parts(cfg)

    # ------------------------------------------------------------ envs and RL
    def plots(self, cfg: Any, out_dir: Path) -> list[Path]:
        """Client 0's channel and availability when the world moves (issue 48)."""
        from rayfl.star.world_plot import moves, plot_client_world

        if not moves(cfg):
            return []
        return [plot_client_world(cfg, out_dir / "world_client0.png", client=0)]

    def check_lanes(self, cfg: Any) -> None:
        """Lanes share client hosts (:func:`rayfl.star.lanes.check_lanes`)."""
        from rayfl.star.lanes import check_lanes

        check_lanes(cfg)

    def check_train(self, cfg: Any) -> None:
        """Refuse a star without a ``wireless`` section (nothing to schedule).

        At training time only: an ``rl`` section on such a config is valid
        (``rayfl bench fit-surrogate`` writes one).
        """
        if cfg.wireless is None:
            raise ValueError(
                "rayfl train-policy needs a config with a `wireless` section, "
                "topology.kind: hierarchical or topology.kind: d2d"
            )

    def rl_meta(self, cfg: Any) -> dict[str, Any]:
        """The base decision, and the moving world's keys the features read."""
        from rayfl.star.moving import moving_keys

        return {
            **super().rl_meta(cfg),
            "observation_keys": list(moving_keys(cfg.wireless)),
        }

    def learned_controls(self, cfg: Any) -> dict[str, float]:
        """The algorithm's controls as the env holds them, with ``rl.controls``.

        (:meth:`rayfl.star.actions.StarActions.from_config`).
        """
        if cfg.rl is None or not cfg.rl.controls:
            return {}
        from rayfl.star.actions import StarActions

        actions = StarActions.from_config(cfg, controls=True)
        assert actions.default_controls is not None  # from_config always sets it
        values = map(float, actions.default_controls[0])
        return dict(zip(actions.control_names, values, strict=True))

    # ------------------------------------------------------------- benchmarks
    bench_parts = frozenset({"assignment", "controls"})  # the env exposes the controls
    bench_env_options = {"controls": True}

    def scenarios(self) -> Mapping[str, tuple[Any, ...]]:
        """Return the star's benchmark scenarios (:mod:`rayfl.star.scenarios`)."""
        from rayfl.star.scenarios import scenarios

        return scenarios()

    def tunable_constants(self, cfg: Any) -> dict[str, tuple[float, float, float]]:
        """Return the algorithm's per-client controls (:mod:`rayfl.star.bench`)."""
        from rayfl.star.bench import tunable_constants

        return tunable_constants(cfg)

    def bench_policy(
        self, env: Any, cfg: Any, name: str, params: Mapping[str, Any], mode: str
    ) -> Any:
        """Build policy ``name`` with the star's context (:mod:`rayfl.star.bench`)."""
        from rayfl.star.bench import bench_policy

        return bench_policy(env, cfg, name, params, mode)
