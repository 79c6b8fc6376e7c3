"""Seconds per FedAvg round: rayfl vs Flower's simulation engine, same workload.

Issue 12 (item 5): rayfl <= 0.05x Flower's round time on ``examples/bench_fedavg_mlp.yaml``
(real Fashion-MNIST, 100 iid clients x 600 samples, MLP 784-200-10, batch 32, one local
epoch, lr 0.05, FedAvg over all clients every round) on 2 CPUs.

Flower pins its own Ray, so it runs in a separate venv, ``bench/_flower_venv`` (gitignored),
created here on first use with ``torch==2.13.0`` (CPU wheel) and ``flwr[simulation]``,
and reused afterwards. The Flower side is ``bench/flower_client_app.py`` (ServerApp +
ClientApp, ``flwr.simulation.run_simulation``), run once per client-resource setting
(Flower's default ``num_cpus=2`` per client, i.e. one actor; and ``num_cpus=1``, two
actors); the rayfl side is ``bench/round_time.py`` in the main venv. All runs are
subprocesses of one invocation, one after the other; logs go to ``bench/_flower_venv/logs``.

Run:  python3 bench/flower_compare.py [--rounds 4] [--cpus 2] [--client-cpus default,1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
VENV = BENCH / "_flower_venv"
VENV_PY = VENV / "bin" / "python"
MAIN_PY = REPO / ".venv" / "bin" / "python"
LOGS = VENV / "logs"
PIP_REQS = [["torch==2.13.0"], ["flwr[simulation]"]]  # torch first: the CPU build


def sh(cmd: list[str], log: Path | None = None, **kw) -> subprocess.CompletedProcess:
    """Run ``cmd``, capturing output (also written to ``log``); never raises."""
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(
            f"$ {' '.join(cmd)}\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
        )
    return proc


def flower_versions() -> dict | None:
    """Versions in the Flower venv, or None when it is missing or flwr does not import."""
    if not VENV_PY.exists():
        return None
    code = (
        "import json,flwr,ray,torch;print(json.dumps({'flwr':flwr.__version__,"
        "'ray':ray.__version__,'torch':torch.__version__}))"
    )
    proc = sh([str(VENV_PY), "-c", code])
    return (
        json.loads(proc.stdout.strip().splitlines()[-1])
        if proc.returncode == 0
        else None
    )


def ensure_flower_venv() -> dict:
    """Create ``bench/_flower_venv`` with Flower's simulation engine unless it works already."""
    versions = flower_versions()
    if versions is not None:
        return versions
    print(
        f"creating {VENV.relative_to(REPO)} (torch==2.13.0, flwr[simulation]) ...",
        flush=True,
    )
    if not VENV_PY.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    for reqs in PIP_REQS:
        proc = sh([str(VENV / "bin" / "pip"), "install", *reqs], LOGS / "pip.log")
        if proc.returncode != 0:
            errors = [ln for ln in proc.stderr.splitlines() if "ERROR" in ln]
            sys.exit(
                f"pip install {' '.join(reqs)} failed:\n" + "\n".join(errors[-10:])
            )
    versions = flower_versions()
    if versions is None:
        sys.exit(
            "flwr installed but does not import; see bench/_flower_venv/logs/pip.log"
        )
    return versions


def clean_env() -> dict[str, str]:
    """The environment minus anything that would tie a child to another venv or Ray."""
    drop = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "RAY_ADDRESS")
    return {k: v for k, v in os.environ.items() if k not in drop}


def run_flower(rounds: int, cpus: int, client_cpus: str) -> dict:
    """Flower's s/round for one client-resource setting (``default`` = Flower's own)."""
    cmd = [
        str(VENV_PY),
        str(BENCH / "flower_client_app.py"),
        "--rounds",
        str(rounds + 1),
        "--cpus",
        str(cpus),
    ]
    if client_cpus != "default":
        cmd += ["--client-cpus", client_cpus]
    log = LOGS / f"flower_client_cpus_{client_cpus}.log"
    proc = sh(cmd, log, cwd=BENCH, env=clean_env())
    found = re.search(r"^FLOWER_RESULT (.*)$", proc.stdout, re.M)
    if proc.returncode != 0 or not found:
        sys.exit(f"Flower run failed (exit {proc.returncode}); see {log}")
    return json.loads(found.group(1))


def run_rayfl(rounds: int, cpus: int) -> dict:
    """rayfl's (and the plain one-core loop's) s/round from ``bench/round_time.py``."""
    cmd = [
        str(MAIN_PY),
        str(BENCH / "round_time.py"),
        "--rounds",
        str(rounds),
        "--cpus",
        str(cpus),
    ]
    proc = sh(cmd, LOGS / "rayfl_round_time.log", cwd=REPO, env=clean_env())
    out = {}
    for key, pattern in [
        ("rayfl", r"rayfl\s+s/round:\s*([\d.]+)"),
        ("plain", r"plain\s+s/round:\s*([\d.]+)"),
    ]:
        found = re.search(pattern, proc.stdout)
        if proc.returncode != 0 or not found:
            sys.exit(f"round_time.py failed (exit {proc.returncode}); see {LOGS}")
        out[key] = float(found.group(1))
    ver = sh(
        [
            str(MAIN_PY),
            "-c",
            "import ray,torch;print(ray.__version__,torch.__version__)",
        ]
    )
    out["ray"], out["torch"] = ver.stdout.split()
    return out


def print_table(flower: dict[str, dict], rayfl: dict, versions: dict, args) -> None:
    best = min(flower, key=lambda k: flower[k]["s_per_round"])
    print(
        f"\nWorkload: examples/bench_fedavg_mlp.yaml shape, {args.cpus} CPUs, "
        f"median of {args.rounds} rounds after 1 warm-up round per side"
    )
    print(
        f"Flower side: flwr {versions['flwr']}, ray {versions['ray']}, "
        f"torch {versions['torch']} (bench/_flower_venv)"
    )
    print(f"rayfl side:  ray {rayfl['ray']}, torch {rayfl['torch']} (.venv)\n")
    print(f"{'run':<40}{'s/round':>9}{'rayfl/this':>12}")
    for key, res in flower.items():
        label = "Flower, client num_cpus=" + (
            "2 (default)" if key == "default" else key
        )
        print(
            f"{label:<40}{res['s_per_round']:>9.3f}"
            f"{rayfl['rayfl'] / res['s_per_round']:>12.4f}"
        )
        print(f"{'  (warm-up round 1, s)':<40}{res['warmup_s']:>9.1f}")
    print(
        f"{'plain PyTorch loop, 1 thread':<40}{rayfl['plain']:>9.3f}"
        f"{rayfl['rayfl'] / rayfl['plain']:>12.4f}"
    )
    print(f"{'rayfl':<40}{rayfl['rayfl']:>9.3f}{1.0:>12.4f}")
    ratio = rayfl["rayfl"] / flower[best]["s_per_round"]
    verdict = "met" if ratio <= 0.05 else "NOT met"
    print(
        f"\nratio rayfl/Flower (best Flower setting, num_cpus={best}): {ratio:.4f} "
        f"(goal <= 0.05: {verdict})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="timed rounds per side")
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument(
        "--client-cpus",
        default="default,1",
        help="comma list of Flower client num_cpus ('default' = Flower's)",
    )
    args = parser.parse_args()
    versions = ensure_flower_venv()
    t0 = time.perf_counter()
    print("rayfl (bench/round_time.py) ...", flush=True)
    rayfl = run_rayfl(args.rounds, args.cpus)
    flower = {}
    for setting in args.client_cpus.split(","):
        print(f"Flower, client num_cpus={setting} ...", flush=True)
        flower[setting] = run_flower(args.rounds, args.cpus, setting)
    print_table(flower, rayfl, versions, args)
    print(f"(whole comparison: {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
