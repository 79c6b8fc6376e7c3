"""A quiet, truthful console (issue 45): no worker traceback reaches the driver.

Ray's SIGTERM handler in a worker raises ``SystemExit``; inside a weakref
callback Python swallows it and prints "Exception ignored ... Traceback", which
Ray forwards to the driver's stderr (``rayfl.actors.quiet_exit``). These run
real commands in subprocesses (each starts its own small Ray session) and look
at their stderr; one reproduces the swallowed exit itself.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.subprocesses import isolated_env

ROOT = Path(__file__).resolve().parents[1]
TINY = {
    "name": "quiet",
    "rounds": 1,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"kind": "mlr"},
    "algorithm": {"local_steps": 1, "batch_size": 16, "lr": 0.1},
    "ray": {"num_cpus": 2, "clients_per_actor": 2, "object_store_memory_mb": 128},
    "output": {"progress": False, "plots": False},
}
NOISE = ("Traceback", "Exception ignored")


def _rayfl(args: list[str], ray_tmp: Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rayfl.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=isolated_env(ray_tmp),
        cwd=cwd,
    )


def test_bench_policies_emulate_prints_no_traceback(tmp_path, ray_tmp):
    # Act: the smallest star scenario, 2 policies, 2 seeds, 2 rounds, emulated
    proc = _rayfl(
        [
            "bench", "policies", "--scenario", "star-small", "--mode", "emulate",
            "--seeds", "1000,1001", "--train-seeds", "0",
            "--policies", "random,round_robin", "--set", "rounds=2",
            "--num-cpus", "2", "--out", str(tmp_path / "bench"),
        ],
        ray_tmp,
        tmp_path,
    )  # fmt: skip
    # Assert
    assert proc.returncode == 0, proc.stderr
    for word in NOISE:
        assert word not in proc.stderr, proc.stderr
    assert (tmp_path / "bench" / "summary.csv").exists()


def test_run_of_a_sweep_prints_no_traceback(tmp_path, ray_tmp):
    # Arrange: a 2-value sweep of one round each
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(yaml.safe_dump({**TINY, "sweep": {"algorithm.lr": [0.05, 0.1]}}))
    # Act
    proc = _rayfl(
        ["run", str(cfg), f"output.dir={tmp_path / 'runs'}"], ray_tmp, tmp_path
    )
    # Assert
    assert proc.returncode == 0, proc.stderr
    for word in NOISE:
        assert word not in proc.stderr, proc.stderr
    assert len(list((tmp_path / "runs").rglob("summary.json"))) >= 2


ENGINE_LEFT_OPEN = textwrap.dedent(
    """
    import gymnasium as gym, envs
    from rayfl.cluster.resources import ResourceError
    venv = gym.make_vec("HierarchicalFL-v0", num_envs=4, vectorization_mode="sync")
    try:  # 4 hierarchy engines cannot share 2 CPUs: the second one is refused
        venv.reset(seed=0)
    except ResourceError:
        print("refused")
    """
)


LANES_LEFT_OPEN = textwrap.dedent(
    """
    import gymnasium as gym, envs
    venv = gym.make_vec("HierarchicalFL-v0", num_envs=2)  # lanes on shared hosts
    venv.reset(seed=0)
    print("left open")
    """
)


def _script_exits_quietly(script, ending, tmp_path, ray_tmp):
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=600,
        env=isolated_env(ray_tmp),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith(ending), proc.stdout
    for word in NOISE:
        assert word not in proc.stderr, proc.stderr


def test_lanes_left_open_at_exit_close_quietly(tmp_path, ray_tmp):
    # The vector env is closed by the garbage collector at interpreter exit:
    # releasing its CPU reservation used to import Ray while Python shut down.
    _script_exits_quietly(LANES_LEFT_OPEN, "left open", tmp_path, ray_tmp)


def test_an_engine_left_open_at_exit_closes_quietly(tmp_path, ray_tmp):
    # The first engine is left to the garbage collector at interpreter exit,
    # after Ray shut down: closing it used to start a new Ray session (a
    # traceback on stderr).
    _script_exits_quietly(ENGINE_LEFT_OPEN, "refused", tmp_path, ray_tmp)


SWALLOWED_EXIT = textwrap.dedent(
    """
    import os, signal, sys, time, weakref
    import ray
    quiet = sys.argv[1] == "quiet"
    ray.init(address="local", num_cpus=1, include_dashboard=False,
             logging_level="ERROR", object_store_memory=80 * 2**20)

    class Obj:
        pass

    @ray.remote(num_cpus=0)
    class Churn:
        def __init__(self):
            if quiet:
                from rayfl.actors.quiet_exit import quiet_exit
                assert quiet_exit()
        def pid(self):
            return os.getpid()
        def churn(self):
            def callback(ref):  # most of the time is spent in here
                start = time.time()
                while time.time() - start < 0.05:
                    pass
            refs = []
            while True:
                obj = Obj()
                refs.append(weakref.ref(obj, callback))
                del obj

    actor = Churn.remote()
    pid = ray.get(actor.pid.remote())
    actor.churn.remote()
    time.sleep(1.5)
    os.kill(pid, signal.SIGTERM)  # what the raylet sends a job's workers
    for _ in range(80):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            print("worker gone", flush=True)
            break
        time.sleep(0.05)
    else:
        print("worker alive", flush=True)
    time.sleep(2)  # time for Ray to forward the worker's stderr
    """
)


@pytest.mark.parametrize("mode", ["default", "quiet"])
def test_sigterm_in_a_weakref_callback(tmp_path, ray_tmp, mode):
    # Act: SIGTERM an actor busy in weakref callbacks, with and without quiet_exit
    proc = subprocess.run(
        [sys.executable, "-c", SWALLOWED_EXIT, mode],
        capture_output=True,
        text=True,
        timeout=300,
        env=isolated_env(ray_tmp),
        cwd=tmp_path,
    )
    # Assert: Ray's default swallows the exit (traceback forwarded, worker lives);
    # quiet_exit ends the worker and prints nothing of it
    assert proc.returncode == 0, proc.stderr
    if mode == "default":
        assert "Exception ignored" in proc.stderr and "SystemExit" in proc.stderr
        assert "worker alive" in proc.stdout
    else:
        assert "Exception ignored" not in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        assert "worker gone" in proc.stdout, proc.stdout + proc.stderr


def test_quiet_exit_is_a_no_op_in_the_driver():
    from rayfl.actors.quiet_exit import quiet_exit

    hook = sys.unraisablehook
    assert quiet_exit() is False
    assert sys.unraisablehook is hook
