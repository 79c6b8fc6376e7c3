"""``rayfl train-policy`` fails loudly; a 0-step policy is not evaluated (issue 34).

The fast tests check :func:`rayfl.train_policy.check_iteration` on fake RLlib
result dicts and the refusal of an untrained checkpoint; the slow one kills
every remote EnvRunner (SIGKILL, as Ray's memory monitor does) during a real
``rayfl train-policy`` and expects exit code 1 with a one-line reason.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import yaml

from rayfl.train_policy import TrainingFailed, check_iteration, rllib_available

TINY = {
    "name": "tiny",
    "rounds": 4,
    "data": {"dataset": "digits", "num_clients": 5, "partition": "iid"},
    "model": {"kind": "mlr"},
    "wireless": {"num_subchannels": 2},
    "output": {"progress": False, "plots": False},
    "rl": {
        "mode": "surrogate",
        "train_batch_size": 16,
        "minibatch_size": 8,
        "num_epochs": 1,
        "hidden": [4],
        "iterations": 3,
        "eval_episodes": 1,
        "baselines": ["random"],
    },
}


@pytest.mark.parametrize(
    ("result", "steps", "runners", "match"),
    [
        ({"fault_tolerance": {"num_healthy_workers": 2}}, 0, 2, "sampled 0 env steps"),
        ({}, 0.0, 0, "sampled 0 env steps"),
        ({}, float("nan"), 0, "sampled nan env steps"),
        (
            {
                "fault_tolerance": {
                    "num_healthy_workers": 0,
                    "num_remote_worker_restarts": 3,
                }
            },
            0,
            2,
            "all 2 env runners are lost",
        ),
        (
            {"fault_tolerance": {"num_healthy_workers": 0}},
            40,
            1,
            "all 1 env runners are lost",
        ),
    ],
    ids=["no-steps", "no-steps-local", "nan-steps", "runners-lost", "lost-after-steps"],
)
def test_check_iteration_raises_one_line(result, steps, runners, match):
    with pytest.raises(TrainingFailed, match=match) as info:
        check_iteration(result, iteration=2, steps=steps, num_env_runners=runners)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("result", "runners"),
    [
        ({"fault_tolerance": {"num_healthy_workers": 1}}, 2),  # one left: trains on
        ({}, 0),
        ({"fault_tolerance": {"num_healthy_workers": 0}}, 0),  # no remote runners
    ],
    ids=["one-healthy", "local", "local-with-stats"],
)
def test_check_iteration_passes_an_iteration_that_trained(result, runners):
    check_iteration(result, iteration=1, steps=16, num_env_runners=runners)


def test_cli_exits_1_with_one_line(monkeypatch, capsys, tmp_path):
    import rayfl.train_policy.train as train
    from rayfl.cli import main

    def fail(*args, **kwargs):
        raise TrainingFailed("PPO iteration 1 sampled 0 env steps; stopping")

    monkeypatch.setattr(train, "train_policy", fail)
    monkeypatch.setattr(train, "rllib_available", lambda: True)
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))

    code = main(["train-policy", str(config)])

    err = capsys.readouterr().err.strip()
    assert code == 1
    assert err.splitlines() == [
        "rayfl: train-policy failed: PPO iteration 1 sampled 0 env steps; stopping"
    ]


def _write_policy(out: Path, **meta) -> Path:
    from policies.features import FEATURE_NAMES
    from policies.learned import FORMAT, FORMAT_VERSION, initial_arrays

    out.mkdir(parents=True)
    np.savez(out / "policy.npz", **initial_arrays([4], seed=1))
    info = {"format": FORMAT, "version": FORMAT_VERSION}
    info |= {"features": list(FEATURE_NAMES), "hidden": [4], **meta}
    (out / "policy.json").write_text(json.dumps(info))
    return out


def test_a_zero_step_policy_is_refused_unless_allowed(tmp_path):
    from envs.star.scheduling import WirelessFLEnv
    from rayfl.registry import make_policy

    env = WirelessFLEnv(TINY, mode="surrogate")
    zero = _write_policy(tmp_path / "zero" / "policy", iterations=4, env_steps=0)
    trained = _write_policy(tmp_path / "ok" / "policy", iterations=4, env_steps=64)

    with pytest.raises(ValueError, match="trained on 0 env steps") as info:
        make_policy("learned", env, checkpoint=str(zero))
    allowed = make_policy("learned", env, checkpoint=str(zero), allow_untrained=True)
    make_policy("learned", env, checkpoint=str(trained))  # no error

    assert "allow_untrained=true" in str(info.value)
    assert "\n" not in str(info.value)
    obs, _ = env.reset(seed=0)
    assert env.action_space.contains(allowed(obs))


def test_evaluation_of_a_zero_step_policy_is_refused(tmp_path):
    from rayfl.config import load_config
    from rayfl.train_policy import evaluate_policies

    zero = _write_policy(tmp_path / "zero" / "policy", iterations=4, env_steps=0)
    cfg = load_config(TINY)

    with pytest.raises(ValueError, match="trained on 0 env steps"):
        evaluate_policies(cfg, zero, episodes=1, baselines=[])
    table = evaluate_policies(
        cfg, zero, episodes=1, baselines=[], mode="surrogate", allow_untrained=True
    )

    assert table["policy"].tolist() == ["learned"]
    assert np.isfinite(table["return"]).all()


@pytest.mark.slow
@pytest.mark.skipif(not rllib_available(), reason="RLlib not installed")
def test_killing_every_env_runner_stops_train_policy(monkeypatch, capsys, tmp_path):
    import rayfl.train_policy.train as train
    from rayfl.cli import main

    build = train.build_algorithm
    killed: list[int] = []

    def build_and_kill_runners_before_each_iteration(cfg, rl):
        algo = build(cfg, rl)
        run_iteration = algo.train

        def kill_then_train():
            pids = algo.env_runner_group.foreach_env_runner(
                lambda runner: os.getpid(), local_env_runner=False
            )
            for pid in pids:  # Ray's memory monitor kills the worker process
                os.kill(pid, signal.SIGKILL)
            killed.extend(pids)
            return run_iteration()

        algo.train = kill_then_train
        return algo

    monkeypatch.setattr(
        train, "build_algorithm", build_and_kill_runners_before_each_iteration
    )
    config = {
        **TINY,
        "output": {**TINY["output"], "dir": str(tmp_path)},
        "ray": {"num_cpus": 2, "object_store_memory_mb": 150},
        "rl": {**TINY["rl"], "num_env_runners": 2, "num_cpus_per_env_runner": 0.5},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))

    code = main(["train-policy", str(path)])

    err = [line for line in capsys.readouterr().err.splitlines() if "rayfl:" in line]
    assert len(killed) >= 2
    assert code == 1
    assert len(err) == 1 and "train-policy failed: PPO iteration 1" in err[0]
    assert not list(tmp_path.glob("train-tiny-*/evaluation.csv"))
