"""`rayfl train-policy` with remote EnvRunners, on one node and on a two-node cluster.

The fast tests check the config path (no Ray); the slow ones build a loopback
cluster of two Ray nodes (``ray.cluster_utils.Cluster``, 1 CPU each). In
surrogate mode they train three times through ``ray.address`` (one runner;
three runners, which must fail clearly; two runners) and check that the two
runners ran on both nodes, that the exported policy loads as ``learned`` and
that each run leaves the cluster to the caller, which then shuts it down. In
emulate mode two runners, one per node, each step a real FL run on their share
of the CPUs.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from rayfl.config import ConfigError, load_config
from rayfl.train_policy import check_env_runner_resources, rllib_available

needs_rllib = pytest.mark.skipif(
    not rllib_available(),
    reason="RLlib not installed: pip install -e '.[rl]' (ray[rllib]==2.60.0)",
)

ROOT = Path(__file__).resolve().parents[2]

TINY = {
    "name": "tiny-cluster",
    "rounds": 5,
    "data": {"dataset": "digits", "num_clients": 5, "partition": "iid"},
    "model": {"kind": "mlr"},
    "wireless": {"num_subchannels": 2},
    "output": {"progress": False, "plots": False},
    "rl": {
        "mode": "surrogate",
        "train_batch_size": 40,
        "minibatch_size": 20,
        "num_epochs": 2,
        "hidden": [8],
        "iterations": 2,
        "eval_episodes": 2,
        "baselines": ["round_robin"],
        "num_env_runners": 2,
    },
}


@needs_rllib
def test_env_runner_settings_reach_the_algorithm_config():
    from ray.rllib.algorithms.ppo import PPOConfig

    from rayfl import train_policy as train

    captured = {}

    def fake_build(self):  # stop before any actor starts: no Ray needed
        captured["config"] = self
        raise RuntimeError("stop")

    cfg = load_config(
        TINY,
        ["rl.num_env_runners=3", "rl.num_cpus_per_env_runner=0.5"],
    )
    mp = pytest.MonkeyPatch()
    mp.setattr(PPOConfig, "build_algo", fake_build)
    try:
        with pytest.raises(RuntimeError, match="stop"):
            train.build_algorithm(cfg, cfg.rl)
    finally:
        mp.undo()
    config = captured["config"]
    assert config.num_env_runners == 3
    assert config.num_cpus_per_env_runner == 0.5
    assert config.num_envs_per_env_runner == 1
    assert config.env_config["mode"] == "surrogate"


def test_cli_flag_and_override_set_num_env_runners():
    cfg = load_config(TINY, ["rl.num_env_runners=4"])
    assert cfg.rl.num_env_runners == 4 and cfg.rl.num_cpus_per_env_runner == 1.0
    with pytest.raises(ConfigError, match="num_cpus_per_env_runner"):
        load_config(TINY, ["rl.num_cpus_per_env_runner=0"])


def test_too_many_runners_for_the_local_session_fail_before_ray_starts():
    import ray

    cfg = load_config(TINY, ["ray.num_cpus=2", "rl.num_env_runners=3"])
    assert not ray.is_initialized()
    with pytest.raises(ValueError, match=r"rl.num_env_runners=3 .* needs 3 Ray CPUs"):
        check_env_runner_resources(cfg, cfg.rl)
    assert not ray.is_initialized()
    halves = load_config(
        TINY,
        ["ray.num_cpus=2", "rl.num_env_runners=3", "rl.num_cpus_per_env_runner=0.5"],
    )
    check_env_runner_resources(halves, halves.rl)  # 1.5 CPUs fit in 2


def test_emulate_runners_must_leave_cpus_for_their_runs_before_ray_starts():
    import ray

    # each emulate runner steps a whole FL run: its client actors need CPUs too
    cfg = load_config(
        TINY, ["ray.num_cpus=2", "rl.num_env_runners=2", "rl.mode=emulate"]
    )
    with pytest.raises(ValueError, match=r"rl.mode=emulate: .* runners take 2 "):
        check_env_runner_resources(cfg, cfg.rl)
    assert not ray.is_initialized()
    halves = load_config(
        TINY,
        [
            "ray.num_cpus=2",
            "rl.num_env_runners=2",
            "rl.mode=emulate",
            "rl.num_cpus_per_env_runner=0.5",
        ],
    )
    check_env_runner_resources(halves, halves.rl)  # 1 CPU left for the two runs


@needs_rllib
@pytest.mark.slow
def test_two_emulate_runners_on_a_two_node_cluster(two_node_cluster, tmp_path):
    """Two remote EnvRunners in emulate mode, one per node, both sample.

    Before, each runner's FL run reserved every CPU of the cluster (its own
    runner's included) and waited until ``ray.reserve_timeout_s``, then failed.
    Now each run gets ``ray.run_cpus`` = (2 − 2 × 0.5) / 2 = 0.5.
    """
    import ray

    from rayfl.train_policy import train_policy

    cluster, nodes = two_node_cluster
    config = {
        **TINY,
        "rounds": 3,
        "algorithm": {"kind": "fedavg", "local_steps": 1, "batch_size": 16},
        "ray": {"address": cluster.address, "reserve_timeout_s": 90},
        "output": {**TINY["output"], "dir": str(tmp_path)},
        "rl": {
            **TINY["rl"],
            "mode": "emulate",
            "train_batch_size": 8,
            "minibatch_size": 8,
            "iterations": 1,
            "eval_episodes": 0,
            "num_cpus_per_env_runner": 0.5,
        },
    }
    run_dir = train_policy(config, verbose=False)
    placement = json.loads((run_dir / "env_runners.json").read_text())
    assert [r["worker_index"] for r in placement] == [1, 2]
    assert {r["node_id"] for r in placement} == {n.node_id for n in nodes}
    progress = (run_dir / "progress.csv").read_text().splitlines()
    assert len(progress) == 2  # header + the iteration
    assert not ray.is_initialized()


@pytest.fixture
def two_node_cluster(monkeypatch):
    """Head (1 CPU) + worker (1 CPU) on this machine; shut down at the end."""
    from ray.cluster_utils import Cluster

    # the nodes' worker processes must import this checkout's rayfl/envs/policies
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), path) if p))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    small = {"num_cpus": 1, "object_store_memory": 80 * 2**20}
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**small, "include_dashboard": False},
    )
    nodes = [cluster.head_node, cluster.add_node(**small)]
    cluster.wait_for_nodes()
    try:
        yield cluster, nodes
    finally:
        cluster.shutdown()


@needs_rllib
@pytest.mark.slow
def test_two_env_runners_on_a_two_node_cluster(two_node_cluster, tmp_path):
    import ray

    from envs.episode import run_episode
    from envs.star.scheduling import WirelessFLEnv
    from policies import make_policy
    from rayfl.train_policy import train_policy

    cluster, nodes = two_node_cluster
    config = {**TINY, "output": {**TINY["output"], "dir": str(tmp_path)}}
    assert not ray.is_initialized()
    # a first, short run: every later run on the cluster is a new Ray job (the
    # env must still reach the runners; a name in Ray Tune's registry did not)
    first = train_policy(
        {**config, "rl": {**config["rl"], "eval_episodes": 0}},
        [
            f"ray.address={cluster.address}",
            "rl.num_env_runners=1",
            "rl.iterations=1",
        ],
        verbose=False,
    )
    assert len(json.loads((first / "env_runners.json").read_text())) == 1
    # more runners than the cluster's 2 CPUs: a clear error, not an endless wait
    with pytest.raises(ValueError, match="the Ray cluster has 2"):
        train_policy(
            config,
            [f"ray.address={cluster.address}", "rl.num_env_runners=3"],
            verbose=False,
        )
    assert not ray.is_initialized()
    # Act: the run connects through ray.address (as `rayfl train-policy
    # ... ray.address=HOST:PORT` does) and disconnects at the end
    run_dir = train_policy(config, [f"ray.address={cluster.address}"], verbose=False)
    # Assert: the two runners ran on the two different nodes of the cluster
    placement = json.loads((run_dir / "env_runners.json").read_text())
    assert [r["worker_index"] for r in placement] == [1, 2]
    assert {r["node_id"] for r in placement} == {n.node_id for n in nodes}
    # ... they sampled (2 iterations × 40 steps at least) ...
    progress = (run_dir / "progress.csv").read_text().splitlines()
    assert len(progress) == 3
    # ... the run closed its connection and left the cluster to its owner ...
    assert not ray.is_initialized()
    assert cluster.remaining_processes_alive()
    # ... and the exported policy runs as `learned` without Ray or RLlib
    env = WirelessFLEnv(TINY, mode="surrogate")  # truncates after its 5 rounds
    policy = make_policy("learned", env, checkpoint=str(run_dir))
    result = run_episode(env, policy, seed=123)
    assert result.steps == 5 and np.isfinite(result.total_reward)
    # the cluster's processes end with it, the runners' worker processes too
    cluster.shutdown()
    for node in nodes:
        assert not node.any_processes_alive()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_alive(r["pid"]) for r in placement):
        time.sleep(0.2)
    assert not any(_alive(r["pid"]) for r in placement)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has exited: it only waits for its parent to reap it
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
