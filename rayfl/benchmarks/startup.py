"""Start-up cost as ratios: --help, a run's set-up, a warm second run.

Three ratios, each against a reference measured in the same invocation, so
they mean something on a busy machine too:

1. ``rayfl --help`` wall time / ``python -c "import torch"`` wall time (fresh
   interpreters; median of ``--repeats``). Target ≤ 0.25.
2. The quickstart's set-up (``setup_s`` of ``summary.json``: Ray start, data,
   actors; ``rayfl.run("examples/quickstart.yaml", rounds=2)`` in a fresh
   process; median of ``--repeats``) / one bare ``ray.init`` (fresh process,
   same CPUs; median of ``--repeats``, each timed just before a cold run).
   Target ≤ 1.5.
   The same runs also report where the set-up went, each phase's median / the same
   ``ray.init`` (rows ``phase:*``, no target): ``ray_start``
   (``rayfl.cluster.session.RaySession``: ``ray.init`` and the watchdog), ``data`` (the
   federated dataset on the driver), ``actors`` (the star's build: client hosts
   and cloud started and pinged, data shared) and ``other`` (the rest: ω⁰,
   policy, run directory).
3. In one Python session with Ray running (a notebook), the second quickstart
   run of a :class:`rayfl.Session`'s set-up (it reuses the live actors) / the
   first's (it builds them). Target ≤ 0.2.

Writes ``--out`` (default ``docs/performance/startup.csv``): one row per ratio
with both times, the target, whether it is met and the load average.

Run:  rayfl bench startup [--repeats 3] [--out docs/performance/startup.csv]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rayfl.benchmarks import bench_parser

__all__ = ["main", "measure", "parser"]

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart.yaml"
TARGETS = {"help_vs_import_torch": 0.25, "setup_vs_ray_init": 1.5, "warm_vs_cold": 0.2}

_RAY_INIT = """
import time, ray
t0 = time.perf_counter()
ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
print(time.perf_counter() - t0)
ray.shutdown()
"""

_RUN_ARGS = (
    '["rounds=2", "output.progress=false", "output.plots=false", '
    '"output.dir=" + sys.argv[2]]'
)

_WARM = f"""
import json, sys, ray, rayfl
ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
with rayfl.Session() as session:
    setups = [session.run(sys.argv[1], {_RUN_ARGS}).summary["setup_s"]
              for _ in range(2)]
    assert session.last_reused, session.last_reason
print(json.dumps(setups))
ray.shutdown()
"""

#: A cold quickstart run in a fresh process, timing its set-up's phases.
_COLD = f"""
import json, sys, time
import rayfl, rayfl.engine.engine as engine, rayfl.cluster.session, rayfl.star.round
spent = {{}}

def timed(owner, name, phase):
    inner = getattr(owner, name)
    def call(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[phase] = spent.get(phase, 0.0) + time.perf_counter() - t0
    setattr(owner, name, call)

timed(rayfl.cluster.session.RaySession, "__init__", "ray_start")
timed(engine, "build_federated", "data")
timed(rayfl.star.round.StarRound, "build", "actors")
setup_s = rayfl.run(sys.argv[1], {_RUN_ARGS}).summary["setup_s"]
spent["other"] = setup_s - sum(spent.values())
print(json.dumps({{"setup_s": setup_s, **spent}}))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "RAY_DEDUP_LOGS": "1"}


def _wall(argv: list[str], repeats: int) -> float:
    """Median wall time [s] of running ``argv`` ``repeats`` times."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(argv, env=_env(), capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _last_line(argv: list[str], attempts: int = 3) -> str:
    """Return the last line ``argv`` prints, retried on failure.

    Ray's start-up can time out on a busy machine (:mod:`rayfl.cluster.session` retries
    it the same way).
    """
    for attempt in range(attempts):
        out = subprocess.run(argv, env=_env(), capture_output=True, text=True)
        if out.returncode == 0:
            return out.stdout.strip().splitlines()[-1]
        if attempt == attempts - 1:
            raise RuntimeError(f"{argv[:3]} failed: {out.stderr.strip()[-500:]}")
    raise AssertionError("unreachable")


def measure(repeats: int = 3) -> list[dict[str, object]]:
    """Measure the three ratios; return one row each."""
    py = sys.executable
    rows = []
    help_s = _wall([py, "-m", "rayfl.cli", "--help"], repeats)
    torch_s = _wall([py, "-c", "import torch"], repeats)
    rows.append(("help_vs_import_torch", help_s, torch_s))
    with tempfile.TemporaryDirectory() as out:
        # Alternated (ray.init, cold run, ray.init, ...): a load that changes
        # during the benchmark weighs on both sides of the ratio alike.
        inits: list[float] = []
        cold_runs: list[dict[str, float]] = []
        for _ in range(repeats):
            inits.append(float(_last_line([py, "-c", _RAY_INIT])))
            cold_runs.append(
                json.loads(_last_line([py, "-c", _COLD, str(QUICKSTART), out]))
            )
        init_s = statistics.median(inits)
        median = {k: statistics.median(r[k] for r in cold_runs) for k in cold_runs[0]}
        rows.append(("setup_vs_ray_init", median.pop("setup_s"), init_s))
        rows += [(f"phase:{k}", v, init_s) for k, v in median.items()]
        cold, warm = json.loads(_last_line([py, "-c", _WARM, str(QUICKSTART), out]))
        rows.append(("warm_vs_cold", float(warm), float(cold)))
    load = os.getloadavg()[0]
    return [
        {
            "ratio": name,
            "measured_s": round(value, 3),
            "reference_s": round(reference, 3),
            "value": round(value / reference, 3),
            "target": TARGETS.get(name),
            "met": value / reference <= TARGETS[name] if name in TARGETS else None,
            "load_avg_1min": round(load, 1),
            "cpus": os.cpu_count(),
        }
        for name, value, reference in rows
    ]


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``rayfl bench startup``."""
    p = bench_parser("startup", __doc__)
    p.add_argument("--repeats", type=int, default=3, help="runs per median (default 3)")
    p.add_argument(
        "--out",
        default=str(ROOT / "docs" / "performance" / "startup.csv"),
        help="CSV written, one row per ratio (default docs/performance/startup.csv)",
    )
    return p


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark, print and write its table (``argv``: its flags)."""
    import pandas as pd

    from rayfl.rundir.results import atomic_write

    args = parser().parse_args(argv)
    table = pd.DataFrame(measure(args.repeats))
    print(table.to_string(index=False))
    atomic_write(Path(args.out), lambda p: table.to_csv(p, index=False))
    print(f"wrote {args.out}")
