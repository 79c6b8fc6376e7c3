"""A real two-node Ray cluster inside this machine, following docs/cluster.md.

The head and the worker are started with the `ray start` commands of the
"Two nodes on one machine" recipe (same flags: ``RECIPE_HEAD_FLAGS`` /
``RECIPE_WORKER_FLAGS``, checked against the doc and scripts/two_node.sh below), a
rayfl run connects with ``ray.address=auto`` + ``RAY_ADDRESS``, and its
``metrics.parquet`` must equal a single-node run with the same seed.

Isolation from other Ray instances on the machine (other people's test runs):

* every Ray process of this test gets ``RAY_TMPDIR`` under a private directory
  (sessions, sockets and the ``ray_current_cluster`` file live there, not in
  /tmp/ray), ports are picked free, and the token of ``RAY_AUTH_MODE=token`` is a
  fresh file (``RAY_AUTH_TOKEN_PATH``), so ~/.ray/auth_token is neither read nor made;
* the cluster is stopped by PID, never with ``ray stop``: ``ray stop`` kills every
  raylet / gcs_server on the machine whatever cluster it belongs to, and deletes
  /tmp/ray/ray_current_cluster. The processes to stop are those whose environment
  holds this test's ``RAY_TMPDIR`` (they all inherit it).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RAY = BIN / "ray"
RAYFL = BIN / "rayfl"

pytestmark = [
    pytest.mark.skipif(
        not sys.platform.startswith("linux"),
        reason="multi-node Ray clusters are Linux-only (and the cleanup reads /proc)",
    ),
    pytest.mark.skipif(
        not (RAY.exists() and RAYFL.exists()),
        reason="`ray` / `rayfl` executables not installed next to this Python",
    ),
    pytest.mark.timeout(600),
]

# The flags of the recipe in docs/cluster.md (ports are filled in at run time).
RECIPE_HEAD_FLAGS = (
    "--head",
    "--num-cpus",
    "--port",
    "--dashboard-host",
    "--include-dashboard",
    "--dashboard-port",
    "--ray-client-server-port",
    "--dashboard-agent-listen-port",
    "--min-worker-port",
    "--max-worker-port",
    "--object-store-memory",
    "--temp-dir",
    "--disable-usage-stats",
)
RECIPE_WORKER_FLAGS = (
    "--address",
    "--num-cpus",
    "--dashboard-agent-listen-port",
    "--min-worker-port",
    "--max-worker-port",
    "--object-store-memory",
    "--temp-dir",
    "--disable-usage-stats",
)
OBJECT_STORE_BYTES = "200000000"  # 200 MB per node: two of them fit any /dev/shm

CONFIG = """\
name: two-node
seed: 3
rounds: 2
data:
  dataset: digits
  num_clients: 4
  partition: dirichlet
  alpha: 0.5
  min_partition_size: 20
model:
  kind: mlp
  hidden: [16]
algorithm:
  kind: fedavg
  local_epochs: 1
  batch_size: 16
  lr: 0.1
scheduler:
  policy: random
wireless:
  num_subchannels: 3
  effects: bit_flip
"""
RUN_OVERRIDES = [
    "ray.clients_per_actor=2",
    "output.progress=false",
    "output.plots=false",
]


def _free_ports(n: int) -> list[int]:
    """Return n distinct ports free on every interface (Ray's servers bind to *)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _pids_with_tmpdir(root: str) -> list[int]:
    """PIDs whose environment has RAY_TMPDIR under ``root`` (this test's Ray)."""
    key = b"RAY_TMPDIR=" + root.encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if any(var.startswith(key) for var in environ.split(b"\0")):
            pids.append(int(entry.name))
    return pids


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _stop_ray_under(root: str, grace_s: float = 2.0) -> None:
    """Stop (SIGTERM, then SIGKILL) every process of this test's Ray, by PID."""
    pids = _pids_with_tmpdir(root)
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while pids and time.monotonic() < deadline:
        time.sleep(0.2)
        pids = _pids_with_tmpdir(root)
    _signal_all(pids, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while _pids_with_tmpdir(root) and time.monotonic() < deadline:
        time.sleep(0.2)


def _startup_timeout(message: str) -> bool:
    """Whether a failed ``ray start`` timed out (Ray's raylet wait, or ours)."""
    return "timed out during startup" in message or message.startswith(
        "timed out after"
    )


def _tail(path: Path, n: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _run(argv: list[str], env: dict[str, str], log: Path, timeout: float) -> str:
    """Run a command to completion in its own session; fail with its log."""
    return _finish(_start(argv, env, log), log, timeout)


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start a command in the background, in its own session, output to ``log``."""
    with open(log, "w") as out:
        return subprocess.Popen(
            argv,
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _finish(proc: subprocess.Popen, log: Path, timeout: float) -> str:
    """Wait for a command started with ``_start``; fail with its log."""
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"timed out after {timeout:.0f} s: {proc.args}\n{_tail(log)}")
    if rc != 0:
        pytest.fail(f"exit code {rc}: {' '.join(proc.args)}\n{_tail(log)}")
    return log.read_text(errors="replace")


@dataclass
class RayRoot:
    """The private directory, token and environment of this test's Ray processes."""

    path: Path  # RAY_TMPDIR root (short, private, removed at the end)
    work: Path  # pytest's tmp_path: config, logs and run outputs (kept for debugging)
    env: dict[str, str]
    config: Path


@pytest.fixture
def ray_root(tmp_path: Path) -> Iterator[RayRoot]:
    # A short private root: Ray's Unix socket paths (<temp>/session_<date>_<pid>/
    # sockets/plasma_store) must stay under 107 characters, which a pytest
    # tmp_path does not guarantee.
    root = Path(tempfile.mkdtemp(prefix="rayfl-2n-", dir="/tmp"))
    try:
        token = root / "token"
        token.write_text(secrets.token_hex(32))
        token.chmod(0o600)
        config = tmp_path / "two_node.yaml"
        config.write_text(CONFIG)
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        env.update(
            RAY_TMPDIR=str(root),
            RAY_AUTH_MODE="token",
            RAY_AUTH_TOKEN_PATH=str(token),
            RAY_USAGE_STATS_ENABLED="0",
            OMP_NUM_THREADS="1",
            PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        )
        yield RayRoot(path=root, work=tmp_path, env=env, config=config)
    finally:
        # Every Ray process of this test (both nodes, their workers, the local Ray
        # of the single-node run) has RAY_TMPDIR under root: stop exactly those.
        _stop_ray_under(str(root))
        leftover = _pids_with_tmpdir(str(root))
        shutil.rmtree(root, ignore_errors=True)
        assert not leftover, f"Ray processes of this test still alive: {leftover}"


@dataclass
class Background:
    """A command running in the background (see ``_start`` / ``_finish``)."""

    proc: subprocess.Popen
    log: Path
    out: Path
    started: float


@pytest.fixture
def single_node_run(ray_root: RayRoot) -> Iterator[Background]:
    """The reference run: same config and seed, its own local 2-CPU Ray.

    Started first and left running while the cluster comes up (it only needs CPU
    time; both fit in the test's time budget only when overlapped).
    """
    env = dict(ray_root.env)  # no RAY_ADDRESS: rayfl starts a local Ray
    env["RAY_TMPDIR"] = str(ray_root.path / "single")
    (ray_root.path / "single").mkdir()
    out = ray_root.work / "out-single"
    argv = [str(RAYFL), "run", str(ray_root.config), "ray.num_cpus=2",
            f"output.dir={out}", *RUN_OVERRIDES]  # fmt: skip
    log = ray_root.work / "single.log"
    proc = _start(argv, env, log)
    try:
        yield Background(proc=proc, log=log, out=out, started=time.monotonic())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@dataclass
class Cluster:
    address: str
    env: dict[str, str]
    timings: dict[str, float] = field(default_factory=dict)


@pytest.fixture
def two_node_cluster(ray_root: RayRoot) -> Cluster:
    """Head + worker on this machine: the `ray start` commands of docs/cluster.md.

    Stopped by ``ray_root``'s finalizer (by PID), whatever happens in the test.
    """
    root, env = ray_root.path, ray_root.env
    gcs, client, dashboard, head_agent, worker_agent = _free_ports(5)
    address = f"127.0.0.1:{gcs}"
    head = [
        str(RAY), "start", "--head",
        "--num-cpus", "1",
        "--port", str(gcs),
        "--dashboard-host", "127.0.0.1",
        "--include-dashboard", "false",
        "--dashboard-port", str(dashboard),
        "--ray-client-server-port", str(client),
        "--dashboard-agent-listen-port", str(head_agent),
        "--min-worker-port", "0", "--max-worker-port", "0",
        "--object-store-memory", OBJECT_STORE_BYTES,
        "--temp-dir", str(root / "head"),
        "--disable-usage-stats",
    ]  # fmt: skip
    worker = [
        str(RAY), "start",
        "--address", address,
        "--num-cpus", "1",
        "--dashboard-agent-listen-port", str(worker_agent),
        "--min-worker-port", "0", "--max-worker-port", "0",
        "--object-store-memory", OBJECT_STORE_BYTES,
        "--temp-dir", str(root / "worker"),
        "--disable-usage-stats",
    ]  # fmt: skip
    timings: dict[str, float] = {}
    # Ray waits only 30 s for a raylet: under load, start the pair once more
    for attempt in (1, 2):
        try:
            t0 = time.monotonic()
            _run(head, env, ray_root.work / "head.log", timeout=180)
            timings["head_start_s"] = time.monotonic() - t0
            t0 = time.monotonic()
            _run(worker, env, ray_root.work / "worker.log", timeout=120)
            timings["worker_start_s"] = time.monotonic() - t0
            break
        except pytest.fail.Exception as e:
            if attempt == 2 or not _startup_timeout(str(e)):
                raise
            _stop_ray_under(str(root))
    return Cluster(
        address=address, env={**env, "RAY_ADDRESS": address}, timings=timings
    )


def _run_dir(out: Path) -> Path:
    (run_dir,) = [p for p in out.iterdir() if (p / "metrics.parquet").exists()]
    return run_dir


def test_two_node_run_spreads_clients_and_matches_single_node(
    ray_root: RayRoot, single_node_run: Background, two_node_cluster: Cluster
) -> None:
    work, cluster = ray_root.work, two_node_cluster

    # `rayfl info --address auto` (RAY_ADDRESS set) sees both nodes.
    t0 = time.monotonic()
    for attempt in range(5):
        info = _run(
            [str(RAYFL), "info", "--address", "auto"],
            cluster.env,
            work / "info.log",
            timeout=120,
        )
        if "nodes: 2 alive" in info or attempt == 4:
            break
        time.sleep(2)
    assert "nodes: 2 alive" in info, info
    cluster.timings["info_s"] = time.monotonic() - t0

    # The experiment on the two-node cluster.
    t0 = time.monotonic()
    multi_out = work / "out-multi"
    _run(
        [str(RAYFL), "run", str(ray_root.config), "ray.address=auto",
         f"output.dir={multi_out}", *RUN_OVERRIDES],
        cluster.env,
        work / "multi.log",
        timeout=300,
    )  # fmt: skip
    cluster.timings["multi_run_s"] = time.monotonic() - t0
    multi = _run_dir(multi_out)
    placement = json.loads((multi / "summary.json").read_text())["placement"]
    actor_nodes = {a["node"] for a in placement["client_actors"]}
    assert len(placement["client_actors"]) == 2
    assert len(actor_nodes) == 2, f"client actors did not spread: {placement}"
    assert placement["num_nodes"] == 2

    # The same config and seed in a separate single-node local Ray.
    _finish(single_node_run.proc, single_node_run.log, timeout=300)
    cluster.timings["single_run_s"] = time.monotonic() - single_node_run.started
    single = _run_dir(single_node_run.out)
    single_placement = json.loads((single / "summary.json").read_text())["placement"]
    assert single_placement["num_nodes"] == 1
    assert not {a["node"] for a in single_placement["client_actors"]} & actor_nodes

    pd.testing.assert_frame_equal(
        pd.read_parquet(multi / "metrics.parquet"),
        pd.read_parquet(single / "metrics.parquet"),
        check_exact=True,
    )
    # Per-round aggregates too, except the wall-clock column.
    wall = ["round_time_s"]
    pd.testing.assert_frame_equal(
        pd.read_parquet(multi / "rounds.parquet").drop(columns=wall),
        pd.read_parquet(single / "rounds.parquet").drop(columns=wall),
        check_exact=True,
    )
    print("two-node timings:", {k: round(v, 1) for k, v in cluster.timings.items()})


# Issue 37's scale test: a 10^5-client resampled population (digits: no download),
# K = 100 random participants and K sampled evaluation clients per round, so a
# round costs O(K); two hosts of 50,000 clients, one per node on the cluster.
SCALE_CLIENTS = 100_000
SCALE_CONFIG = f"""\
name: two-node-scale
seed: 5
rounds: 2
data:
  dataset: digits
  num_clients: {SCALE_CLIENTS}
  population: resampled
  samples_per_client: 8
model:
  kind: mlr
algorithm:
  kind: fedavg
  local_epochs: 1
  batch_size: 8
  lr: 0.1
scheduler:
  policy: random
  clients_per_round: 100
eval_clients: 100
"""
SCALE_OVERRIDES = [
    f"ray.clients_per_actor={SCALE_CLIENTS // 2}",
    "output.progress=false",
    "output.plots=false",
]


@pytest.fixture
def scale_single_run(ray_root: RayRoot) -> Iterator[Background]:
    """The 10^5-client reference run in its own local 2-CPU Ray (started first)."""
    config = ray_root.work / "two_node_scale.yaml"
    config.write_text(SCALE_CONFIG)
    env = dict(ray_root.env)  # no RAY_ADDRESS: rayfl starts a local Ray
    env["RAY_TMPDIR"] = str(ray_root.path / "single")
    (ray_root.path / "single").mkdir()
    out = ray_root.work / "out-scale-single"
    argv = [str(RAYFL), "run", str(config), "ray.num_cpus=2",
            "ray.object_store_memory_mb=150", f"output.dir={out}",
            *SCALE_OVERRIDES]  # fmt: skip
    log = ray_root.work / "scale-single.log"
    proc = _start(argv, env, log)
    try:
        yield Background(proc=proc, log=log, out=out, started=time.monotonic())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_two_node_scale_run_shards_population_and_matches_single_node(
    ray_root: RayRoot, scale_single_run: Background, two_node_cluster: Cluster
) -> None:
    work, cluster = ray_root.work, two_node_cluster
    config = work / "two_node_scale.yaml"
    multi_out = work / "out-scale-multi"
    _run(
        [str(RAYFL), "run", str(config), "ray.address=auto",
         f"output.dir={multi_out}", *SCALE_OVERRIDES],
        cluster.env,
        work / "scale-multi.log",
        timeout=400,
    )  # fmt: skip
    multi = _run_dir(multi_out)
    placement = json.loads((multi / "summary.json").read_text())["placement"]
    actors = placement["client_actors"]
    assert placement["num_nodes"] == 2
    # One host per node, each with half of the population.
    assert [a["clients"] for a in actors] == [
        [0, SCALE_CLIENTS // 2 - 1],
        [SCALE_CLIENTS // 2, SCALE_CLIENTS - 1],
    ]
    assert len({a["node"] for a in actors}) == 2, f"hosts did not spread: {placement}"

    _finish(scale_single_run.proc, scale_single_run.log, timeout=400)
    single = _run_dir(scale_single_run.out)
    single_placement = json.loads((single / "summary.json").read_text())["placement"]
    assert single_placement["num_nodes"] == 1

    metrics = pd.read_parquet(multi / "metrics.parquet")
    # Participants from both halves, i.e. clients trained on both nodes.
    trained = metrics.loc[metrics["scheduled"], "client"]
    assert (trained < SCALE_CLIENTS // 2).any()
    assert (trained >= SCALE_CLIENTS // 2).any()
    assert metrics["round"].nunique() == 2
    pd.testing.assert_frame_equal(
        metrics, pd.read_parquet(single / "metrics.parquet"), check_exact=True
    )
    wall = ["round_time_s"]
    pd.testing.assert_frame_equal(
        pd.read_parquet(multi / "rounds.parquet").drop(columns=wall),
        pd.read_parquet(single / "rounds.parquet").drop(columns=wall),
        check_exact=True,
    )


def _recipe_commands(text: str) -> tuple[str, str]:
    """Return the (head, worker) `ray start` commands of a recipe, lines joined."""
    joined = text.replace("\\\n", " ")
    starts = [ln for ln in joined.splitlines() if ln.strip().startswith("ray start")]
    head = next(ln for ln in starts if "--head" in ln)
    worker = next(ln for ln in starts if "--address" in ln)
    return head, worker


@pytest.mark.parametrize("path", ["docs/cluster.md", "scripts/two_node.sh"])
def test_recipe_uses_the_flags_this_test_runs(path: str) -> None:
    text = (ROOT / path).read_text()
    head, worker = _recipe_commands(text)
    for flag in RECIPE_HEAD_FLAGS:
        assert flag in head.split(), f"{path}: head command lacks {flag}"
    for flag in RECIPE_WORKER_FLAGS:
        assert flag in worker.split(), f"{path}: worker command lacks {flag}"
    for var in (
        "RAY_TMPDIR",
        "RAY_AUTH_MODE=token",
        "RAY_AUTH_TOKEN_PATH",
        "RAY_ADDRESS",
    ):
        assert var in text, f"{path} does not set {var}"
    assert "ray.address=auto" in text


def test_two_node_script_is_valid_bash() -> None:
    script = ROOT / "scripts" / "two_node.sh"
    assert os.access(script, os.X_OK), "scripts/two_node.sh must be executable"
    subprocess.run(["bash", "-n", str(script)], check=True)
