"""``rayfl train-policy``: PPO (RLlib) on the scheduling env, its evaluation and plots.

An application of the engine, like :mod:`rayfl.runner`: :mod:`.train` (the
training loop, checkpoints, the exported policy), :mod:`.algorithm` (the env
RLlib builds and the PPO config), :mod:`.evaluate` (the learned policy against
the baselines, figures). Importing this package imports no RLlib.
"""

from __future__ import annotations

from rayfl.train_policy.algorithm import (
    RLlibLanesEnv,
    RLlibScoresEnv,
    build_algorithm,
    check_env_runner_resources,
    check_lanes_config,
)
from rayfl.train_policy.evaluate import evaluate_policies
from rayfl.train_policy.export import export_policy
from rayfl.train_policy.train import (
    INSTALL_HINT,
    TrainingFailed,
    check_iteration,
    env_runner_placement,
    rllib_available,
    train_policy,
)

__all__ = [
    "INSTALL_HINT",
    "RLlibLanesEnv",
    "RLlibScoresEnv",
    "TrainingFailed",
    "build_algorithm",
    "check_env_runner_resources",
    "check_iteration",
    "check_lanes_config",
    "env_runner_placement",
    "evaluate_policies",
    "export_policy",
    "rllib_available",
    "train_policy",
]
