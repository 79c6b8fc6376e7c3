"""The star as a topology plug-in (:class:`rayfl.topology.TopologyPlugin`)."""

from __future__ import annotations

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
        "lanes": "envs.star.rl_vector:make_rl_vector_env",
        "vector": "envs.star.vector:WirelessFLVectorEnv",
        "surrogate": "envs.star.backends:SurrogateBackend",
    }
    capabilities = frozenset({"keeps_warm"})

    # ------------------------------------------------------------ engine, runner
    def strategy(self) -> Any:
        """Return a new engine strategy."""
        from rayfl.star.round import StarRound

        return StarRound()

    # -------------------------------------------------------------------- config

    # ------------------------------------------------------------ envs and RL
    rl_options = frozenset({"controls"})

    def check_lanes(self, cfg: Any) -> None:
        """Lanes share client hosts (:func:`rayfl.star.lanes.check_lanes`)."""
        from rayfl.star.lanes import check_lanes

        check_lanes(cfg)

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

    def check_train(self, cfg: Any) -> None:
        """Refuse a star without a ``wireless`` section (nothing to schedule)."""
        if cfg.wireless is None:
            raise ValueError(
                "rayfl train-policy needs a config with a `wireless` section, "
                "topology.kind: hierarchical or topology.kind: d2d"
            )

    # ------------------------------------------------------------- benchmarks
