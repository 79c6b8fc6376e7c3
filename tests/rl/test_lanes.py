"""Emulate lanes in `rayfl train-policy`: the RLlib config and env, no Ray needed.

Training on lanes is tests/rl/test_train.py's
``test_emulate_mode_trains_on_lanes_of_shared_hosts``; the lanes env against
``make_rl_env`` is tests/envs/test_rl_vector.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rayfl.config import load_config
from rayfl.train_policy import rllib_available

pytestmark = pytest.mark.skipif(
    not rllib_available(),
    reason="RLlib not installed: pip install -e '.[rl]' (ray[rllib]==2.60.0)",
)

TINY = {
    "name": "tiny-lanes",
    "rounds": 3,
    "data": {"dataset": "digits", "num_clients": 5, "partition": "iid"},
    "model": {"kind": "mlr"},
    "wireless": {"num_subchannels": 2},
    "rl": {"train_batch_size": 40, "minibatch_size": 20, "hidden": [8]},
}


def _captured_config(overrides):
    """The PPO config ``build_algorithm`` makes (stopped before any actor)."""
    from ray.rllib.algorithms.ppo import PPOConfig

    from rayfl.train_policy import build_algorithm

    captured = {}

    def fake_build(self):
        captured["config"] = self
        raise RuntimeError("stop")

    cfg = load_config(TINY, overrides)
    mp = pytest.MonkeyPatch()
    mp.setattr(PPOConfig, "build_algo", fake_build)
    try:
        with pytest.raises(RuntimeError, match="stop"):
            build_algorithm(cfg, cfg.rl)
    finally:
        mp.undo()
    return captured["config"]


@pytest.mark.parametrize(
    ("overrides", "envs", "vectorize", "env_class"),
    [
        (
            ["rl.mode=emulate", "rl.num_envs_per_env_runner=4"],
            4,
            "vector_entry_point",
            "RLlibLanesEnv",
        ),
        (["rl.mode=emulate"], 1, "sync", "RLlibScoresEnv"),
        (["rl.num_envs_per_env_runner=4"], 4, "sync", "RLlibScoresEnv"),
    ],
    ids=["emulate-lanes", "emulate-one-run", "surrogate-copies"],
)
def test_lanes_per_runner_reach_rllib_in_emulate_mode(
    overrides, envs, vectorize, env_class
):
    config = _captured_config(overrides)
    assert config.num_envs_per_env_runner == envs
    assert (
        str(
            getattr(
                config.gym_env_vectorize_mode, "value", config.gym_env_vectorize_mode
            )
        )
        == vectorize
    )
    assert config.env.__name__ == env_class
    lanes = env_class == "RLlibLanesEnv"
    assert (config.callbacks_on_environment_created is not None) == lanes


def test_the_lanes_env_starts_at_its_runners_partition():
    from rayfl.train_policy.algorithm import RLlibLanesEnv, _lanes_partition_offset

    cfg = load_config(TINY, ["rl.mode=emulate", "rl.num_envs_per_env_runner=2"])
    env_config = _captured_config(
        ["rl.mode=emulate", "rl.num_envs_per_env_runner=2"]
    ).env_config
    # Act: what RLlib's vector entry point and callback do in runner 3
    env = RLlibLanesEnv({**env_config, "num_envs": 2, "partition_seeds": [7, 8, 9, 10]})
    _lanes_partition_offset(
        env=env.unwrapped, env_context=SimpleNamespace(worker_index=3)
    )
    # Assert: 2 lanes of the config's star, starting at partition index 3
    assert env.num_envs == 2 and env.unwrapped.num_envs == 2
    assert env.single_action_space.shape == (cfg.data.num_clients,)
    assert env.unwrapped.offset == 3 and env.unwrapped.partition_seed == 10
    env.close()


def test_a_config_lanes_cannot_share_is_a_one_line_error_before_ray():
    import ray

    from rayfl.train_policy import check_lanes_config

    cfg = load_config(
        TINY,
        ["algorithm.kind=ditto", "rl.mode=emulate", "rl.num_envs_per_env_runner=2"],
    )
    with pytest.raises(
        ValueError, match=r"^rl.num_envs_per_env_runner=2 .*ditto"
    ) as error:
        check_lanes_config(cfg, cfg.rl)
    assert "\n" not in str(error.value) and not ray.is_initialized()
    one = load_config(TINY, ["algorithm.kind=ditto", "rl.mode=emulate"])
    check_lanes_config(one, one.rl)  # one FL run per runner: any config


def test_env_copies_are_counted_per_training_run_not_per_process():
    """A second train-policy run in one process starts its envs at offset 0 again."""
    from rayfl.train_policy.algorithm import _partition_offset

    first = [_partition_offset({"run": "run-a"}) for _ in range(3)]
    second = [_partition_offset({"run": "run-b"}) for _ in range(2)]
    assert first == [0, 1, 2] and second == [0, 1]
    assert _partition_offset({"run": "run-a"}) == 3  # its own count goes on
