"""Start-up cost as ratios: --help, a run's set-up, a warm second run.

Three ratios, each against a reference measured in the same invocation, so
they mean something on a busy machine too:

1. ``rayfl --help`` wall time / ``python -c "import torch"`` wall time (fresh
   interpreters; median of ``--repeats``). Target ≤ 0.25.
2. The quickstart's set-up (``setup_s`` of ``summary.json``: Ray start, data,
   actors; ``rayfl run examples/quickstart.yaml rounds=2`` in a fresh process) /
   one bare ``ray.init`` (fresh process, same CPUs). Target ≤ 1.5.
3. In one Python session with Ray running, the second quickstart run's set-up /
   the first's (what a notebook sees). Target ≤ 0.2.

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

__all__ = ["main", "measure"]

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

_WARM = """
import json, sys, ray, rayfl
ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
setups = [rayfl.run(sys.argv[1], ["rounds=2", "output.progress=false",
                     "output.plots=false", "output.dir=" + sys.argv[2]])
          .summary["setup_s"] for _ in range(2)]
print(json.dumps(setups))
ray.shutdown()
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

    Ray's start-up can time out on a busy machine (:mod:`rayfl.session` retries
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
    init_s = statistics.median(
        float(_last_line([py, "-c", _RAY_INIT])) for _ in range(repeats)
    )
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [py, "-m", "rayfl.cli", "run", str(QUICKSTART), "rounds=2",
             "output.plots=false", "output.progress=false", f"output.dir={out}"],
            env=_env(), capture_output=True, check=True,
        )  # fmt: skip
        (summary,) = Path(out).glob("*/summary.json")
        setup_s = float(json.loads(summary.read_text())["setup_s"])
        rows.append(("setup_vs_ray_init", setup_s, init_s))
        cold, warm = json.loads(_last_line([py, "-c", _WARM, str(QUICKSTART), out]))
        rows.append(("warm_vs_cold", float(warm), float(cold)))
    load = os.getloadavg()[0]
    return [
        {
            "ratio": name,
            "measured_s": round(value, 3),
            "reference_s": round(reference, 3),
            "value": round(value / reference, 3),
            "target": TARGETS[name],
            "met": value / reference <= TARGETS[name],
            "load_avg_1min": round(load, 1),
            "cpus": os.cpu_count(),
        }
        for name, value, reference in rows
    ]


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark, print and write its table (``argv``: its flags)."""
    import pandas as pd

    from rayfl.results import atomic_write

    parser = argparse.ArgumentParser(prog="rayfl bench startup")
    parser.add_argument("--repeats", type=int, default=3, help="runs per median")
    parser.add_argument(
        "--out",
        default=str(ROOT / "docs" / "performance" / "startup.csv"),
        help="CSV written (one row per ratio)",
    )
    args = parser.parse_args(argv)
    table = pd.DataFrame(measure(args.repeats))
    print(table.to_string(index=False))
    atomic_write(Path(args.out), lambda p: table.to_csv(p, index=False))
    print(f"wrote {args.out}")
