"""The RLlib side of ``rayfl train-policy``: the env RLlib builds and the PPO algorithm.

:class:`RLlibScoresEnv` is what every EnvRunner builds (``make_rl_env`` of the
star env, found by name through :mod:`rayfl.registry`); in emulate mode with
``rl.num_envs_per_env_runner`` = E > 1 each runner builds instead
:class:`RLlibLanesEnv`, E episodes stepping in lockstep on one set of client
hosts (:class:`envs.rl_vector.RLVectorEnv`, RLlib's ``vector_entry_point``
vectorisation); :func:`build_algorithm`
turns a run config's ``rl`` section into RLlib's PPO (new API stack);
:func:`check_env_runner_resources` refuses, before RLlib would wait forever, a
session too small for the remote EnvRunners.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from rayfl.config import RunConfig, load_config
from rayfl.registry import RL_ENV, load, topology_of
from rayfl.rl.config import RLConfig

__all__ = [
    "RLlibLanesEnv",
    "RLlibScoresEnv",
    "build_algorithm",
    "check_env_runner_resources",
    "check_lanes_config",
    "learned_controls",
    "uses_lanes",
]


# ------------------------------------------------------------------ config → env
def _env_creator(env_config: Mapping[str, Any]) -> Any:
    make_rl_env = load(RL_ENV)
    return make_rl_env(
        env_config["config"],
        mode=env_config["mode"],
        reward=env_config["reward"],
        reward_scale=env_config["reward_scale"],
        partition_seeds=env_config.get("partition_seeds"),
        partition_every=env_config.get("partition_every", 1),
        partition_offset=_partition_offset(env_config),
        controls=env_config.get("controls", False),
        neighbor_cost=env_config.get("neighbor_cost", 0.0),
    )


class RLlibScoresEnv(gym.Wrapper):
    """The env every RLlib EnvRunner builds: ``make_rl_env`` of its env config.

    RLlib calls the class with its ``EnvContext`` (the ``env_config`` of
    :func:`build_algorithm` plus the runner's ``worker_index``).

    Args:
        env_config: ``config`` (the run config as a dict), ``mode``,
            ``reward``, ``reward_scale``, ``partition_seeds``,
            ``partition_every``, ``controls``, ``neighbor_cost``.
    """

    def __init__(self, env_config: Mapping[str, Any]) -> None:
        super().__init__(_env_creator(env_config))


def uses_lanes(rl: RLConfig) -> bool:
    """Whether each runner steps ``rl.num_envs_per_env_runner`` emulate lanes."""
    return rl.mode == "emulate" and rl.num_envs_per_env_runner > 1


def check_lanes_config(cfg: RunConfig, rl: RLConfig) -> None:
    """Raise ``ValueError`` if emulate lanes cannot run ``cfg`` (one line).

    Lanes share their client hosts (the plug-in's ``check_lanes``; on the
    star: clients that train from their own context alone).
    """
    if not uses_lanes(rl):
        return
    try:
        topology_of(cfg).check_lanes(cfg)
    except ValueError as error:
        raise ValueError(
            f"rl.num_envs_per_env_runner={rl.num_envs_per_env_runner} in emulate "
            f"mode steps that many FL runs on shared client hosts, and {error}; "
            "set rl.num_envs_per_env_runner=1 (one FL run per env runner)"
        ) from None


class RLlibLanesEnv(gym.vector.VectorWrapper):
    """RLlib's vector entry point in lanes mode: E lanes of ``make_rl_env``.

    RLlib calls the class with the env config plus ``num_envs`` (a plain dict:
    the runner's index is set afterwards by :func:`_lanes_partition_offset`).
    A class, not a function: RLlib's env specifiers are classes or names.

    Args:
        env_config: As :class:`RLlibScoresEnv`'s, plus ``num_envs`` (E).
    """

    def __init__(self, env_config: Mapping[str, Any]) -> None:
        # the topology's lanes env, loaded by name: rayfl never imports envs
        make = load(topology_of(load_config(env_config["config"])).envs["lanes"])
        super().__init__(
            make(
                env_config["config"],
                num_envs=int(env_config.get("num_envs", 1)),
                mode=env_config["mode"],
                reward=env_config["reward"],
                reward_scale=env_config["reward_scale"],
                partition_seeds=env_config.get("partition_seeds"),
                partition_every=env_config.get("partition_every", 1),
                controls=env_config.get("controls", False),
                neighbor_cost=env_config.get("neighbor_cost", 0.0),
            )
        )


def _lanes_partition_offset(*, env: Any, env_context: Any, **_: Any) -> None:
    """``on_environment_created``: the lanes of runner i start at partition i."""
    setter = getattr(env, "set_partition_offset", None)
    if setter is not None:
        setter(int(getattr(env_context, "worker_index", 0) or 0))


#: Envs this process built for each training run (``env_config["run"]``;
#: RLlib's new stack gives every vector copy of an EnvRunner the same
#: EnvContext, without a ``vector_index``). Counted per run: a process-wide
#: count gave a second run in the same process (``rayfl bench train``'s
#: repeats, tests) other partition offsets, hence other returns.
_ENVS_BUILT: dict[str, itertools.count[int]] = {}


def _partition_offset(env_config: Mapping[str, Any]) -> int:
    """Index of the first partition seed of a new env copy.

    EnvRunner i (0 = the driver's) of R remote ones gives its j-th env copy the
    offset j·(R + 1) + i, so all copies start on different partitions while
    there are enough ``partition_seeds``.
    """
    worker = int(getattr(env_config, "worker_index", 0) or 0)
    runners = int(getattr(env_config, "num_workers", 0) or 0)
    built = _ENVS_BUILT.setdefault(str(env_config.get("run", "")), itertools.count())
    return next(built) * (runners + 1) + worker


# ------------------------------------------------------------------ networks
def learned_controls(cfg: RunConfig) -> dict[str, float]:
    """The per-client controls the policy learns (``rl.controls``), else none.

    Returns:
        Each control's name → its configured value, around which the
        network's output is decoded (the topology plug-in's ``learned_controls``).
    """
    return topology_of(cfg).learned_controls(cfg)


def build_algorithm(cfg: RunConfig, rl: RLConfig) -> Any:
    """Return the RLlib PPO algorithm for ``cfg`` with the ``rl`` settings."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from rayfl.rl.module import ScoreRLModule

    resolve_checkpoint = load("policies.learned:resolve_checkpoint")

    model_config: dict[str, Any] = {
        "hidden": list(rl.hidden),
        "initial_log_std": rl.initial_log_std,
        "outputs": 1 + len(learned_controls(cfg)),
    }
    if rl.init_from:
        model_config["init_from"] = str(resolve_checkpoint(rl.init_from).resolve())
        model_config["reset_log_std"] = rl.reset_log_std
    env_config = {
        "config": _with_runner_cpus(cfg, rl).to_dict(),
        "mode": rl.mode,
        "reward": rl.reward,
        "reward_scale": rl.reward_scale,
        "partition_seeds": rl.partition_seeds,
        "partition_every": rl.partition_every,
        "controls": rl.controls,
        "neighbor_cost": rl.neighbor_cost,
        "run": uuid.uuid4().hex,  # this run's env copies are counted apart
    }
    lanes = uses_lanes(rl)
    config = (
        PPOConfig()
        .environment(
            RLlibLanesEnv if lanes else RLlibScoresEnv,
            env_config=env_config,
            normalize_actions=False,
            clip_actions=False,
        )
        .env_runners(
            num_env_runners=rl.num_env_runners,
            num_cpus_per_env_runner=rl.num_cpus_per_env_runner,  # type: ignore[arg-type]  # RLlib stubs: a float works
            # emulate mode: E lanes on one set of client hosts, or one FL run
            num_envs_per_env_runner=(
                1 if rl.mode == "emulate" and not lanes else rl.num_envs_per_env_runner
            ),
            gym_env_vectorize_mode="vector_entry_point" if lanes else "sync",
        )
        .learners(num_learners=0)
        .training(
            train_batch_size_per_learner=rl.train_batch_size,
            minibatch_size=rl.minibatch_size,
            num_epochs=rl.num_epochs,
            lr=rl.lr,
            gamma=rl.gamma,
            lambda_=rl.gae_lambda,
            clip_param=rl.clip_param,
            entropy_coeff=rl.entropy_coeff,
            vf_loss_coeff=rl.vf_loss_coeff,
            vf_clip_param=1e6,
        )
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=ScoreRLModule, model_config=model_config
            )
        )
        .debugging(seed=cfg.seed, log_level="ERROR")
    )
    if lanes:
        config = config.callbacks(on_environment_created=_lanes_partition_offset)
    return config.build_algo()


def check_env_runner_resources(cfg: RunConfig, rl: RLConfig) -> None:
    """Raise if the Ray session cannot hold the remote EnvRunners.

    Called before Ray starts (a local session: ``ray.num_cpus``, else the
    machine's cores) and again once connected (the cluster's total CPUs).

    Raises:
        ValueError: If ``rl.num_env_runners × rl.num_cpus_per_env_runner``
            exceeds the CPUs available to the session.
    """
    import os

    import ray

    needed = rl.num_env_runners * rl.num_cpus_per_env_runner
    if needed == 0:
        return
    if ray.is_initialized():
        total = float(ray.cluster_resources().get("CPU", 0.0))
        where = "the Ray cluster has"
    elif cfg.ray.address == "local" or (
        cfg.ray.address is None and not os.environ.get("RAY_ADDRESS")
    ):
        total = float(cfg.ray.num_cpus or os.cpu_count() or 1)
        where = "the local Ray session gets (ray.num_cpus)"
    else:
        return  # a cluster not connected yet: checked once connected
    if rl.mode == "emulate" and needed > total - 1e-9:
        # E lanes share one set of client actors: E does not change the CPUs
        raise ValueError(
            f"rl.mode=emulate: each of the rl.num_env_runners={rl.num_env_runners} "
            "runners steps FL runs (rl.num_envs_per_env_runner lanes on one set of "
            "client actors) whose actors need CPUs besides "
            f"the runner's rl.num_cpus_per_env_runner={rl.num_cpus_per_env_runner:g}, "
            f"but the runners take {needed:g} and {where} {total:g}: lower "
            "rl.num_env_runners or rl.num_cpus_per_env_runner (e.g. 0.5), or add "
            "CPUs/nodes"
        )
    if needed > total + 1e-9:
        raise ValueError(
            f"rl.num_env_runners={rl.num_env_runners} × "
            f"rl.num_cpus_per_env_runner={rl.num_cpus_per_env_runner:g} needs "
            f"{needed:g} Ray CPUs but {where} {total:g}: lower "
            "rl.num_env_runners, give each runner a fraction "
            "(rl.num_cpus_per_env_runner=0.5) or add CPUs/nodes"
        )


def _with_runner_cpus(cfg: RunConfig, rl: RLConfig) -> RunConfig:
    """``cfg`` with each remote runner's share of the cluster as ``ray.run_cpus``.

    In emulate mode every runner's env is a whole FL run: without a share, the
    first would reserve every free CPU and the others would wait for ever.
    The share is (cluster CPUs − the runners' own) / runners; a ``ray.run_cpus``
    the user set is kept.
    """
    import ray

    if rl.mode != "emulate" or rl.num_env_runners == 0 or cfg.ray.run_cpus:
        return cfg
    total = float(ray.cluster_resources().get("CPU", 0.0))
    free = total - rl.num_env_runners * rl.num_cpus_per_env_runner
    share = free / rl.num_env_runners
    return cfg.model_copy(
        update={"ray": cfg.ray.model_copy(update={"run_cpus": share})}
    )
