"""Runs sharing a cluster reserve their actors at once: they queue, never deadlock."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import yaml

from rayfl.cluster.resources import ResourceError, release_cpus, reserve_cpus
from rayfl.config import ConfigError, load_config


def test_reservation_waits_with_a_message_then_times_out(ray_session, capsys):
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    total = ray.cluster_resources()["CPU"]
    # another run holds every CPU (a group this process did not reserve)
    other = placement_group([{"CPU": 1.0}] * int(total))
    ray.get(other.ready(), timeout=60)
    try:
        started = time.monotonic()
        with pytest.raises(ResourceError, match=r"ray\.reserve_timeout_s"):
            reserve_cpus(1, 1.0, timeout_s=2.0, poll_s=0.5, report_every_s=0.0)
        assert 2.0 <= time.monotonic() - started < 30
        out = capsys.readouterr().out
        assert "rayfl: waiting for 1 CPUs on the cluster" in out
        assert "0 of" in out  # says how many are free
    finally:
        remove_placement_group(other)
    again = reserve_cpus(1, 1.0, timeout_s=60)  # released: it fits now, silently
    release_cpus(again)
    assert "waiting" not in capsys.readouterr().out


def test_waiting_on_this_process_own_reservation_fails_at_once(ray_session, capsys):
    """Two open emulate envs in one 2-CPU session: the second used to wait 600 s."""
    import ray

    total = ray.cluster_resources()["CPU"]
    held = reserve_cpus(int(total), 1.0, timeout_s=60)  # this process, every CPU
    try:
        started = time.monotonic()
        with pytest.raises(ResourceError, match="this process already holds"):
            reserve_cpus(1, 1.0, timeout_s=600.0, poll_s=0.5, report_every_s=0.0)
        assert time.monotonic() - started < 5
        assert "waiting" not in capsys.readouterr().out
    finally:
        release_cpus(held)
    # a part of the cluster held by this process still leaves room for the rest
    half = reserve_cpus(1, 1.0, timeout_s=60)
    try:
        if total >= 2:
            release_cpus(reserve_cpus(int(total) - 1, 1.0, timeout_s=60))
    finally:
        release_cpus(half)


@pytest.mark.parametrize("bad", ["0", "-5", ".inf"])
def test_reserve_timeout_must_be_positive_and_finite(bad):
    with pytest.raises(ConfigError, match="reserve_timeout_s"):
        load_config({"name": "x"}, [f"ray.reserve_timeout_s={bad}"])


CFG = {
    "name": "shared",
    "rounds": 2,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": {"local_steps": 20, "batch_size": 16, "lr": 0.05},
    "output": {"progress": False, "plots": False},
}


@pytest.mark.slow
def test_three_runs_share_a_two_node_cluster_without_deadlock(tmp_path):
    # Arrange: two loopback nodes of 1 CPU; each run wants 2 actors of 1 CPU
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        cfg = tmp_path / "cfg.yaml"
        cfg.write_text(yaml.safe_dump(CFG))
        # Act: three drivers at once
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "rayfl.cli",
                    "run",
                    str(cfg),
                    f"ray.address={cluster.address}",
                    f"output.dir={tmp_path / f'run{i}'}",
                    "ray.reserve_timeout_s=400",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for i in range(3)
        ]
        outs = [p.communicate(timeout=600)[0] for p in procs]
        # Assert: all finished; the ones that had to queue said so
        for p, out in zip(procs, outs, strict=True):
            assert p.returncode == 0, out[-2000:]
        assert sum("waiting for 2 CPUs on the cluster" in o for o in outs) >= 1
        for i in range(3):
            assert len(list((tmp_path / f"run{i}").glob("*/metrics.parquet"))) == 1
    finally:
        for p in locals().get("procs", []):
            if p.poll() is None:
                p.kill()
        cluster.shutdown()
