"""The argument parser of ``rayfl bench policies`` (:mod:`rayfl.benchmarks.policies`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rayfl.benchmarks import bench_parser
from rayfl.benchmarks.policies_scenarios import SCENARIOS
from rayfl.benchmarks.policies_tuning import SEARCHES


class BenchError(ValueError):
    """Bad arguments or a policy that cannot run: printed in one line by ``rayfl``."""


#: The first line of ``rayfl bench policies``'s help.
DESCRIPTION = (
    "``rayfl bench policies``: every scheduling policy on registered scenarios."
)


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``rayfl bench policies``."""
    p = bench_parser("policies", DESCRIPTION)
    p.add_argument(
        "--topology", default="all", help="star, hierarchical, d2d or all (default)"
    )
    p.add_argument("--size", default="all", help="small, medium, large or all")
    p.add_argument(
        "--scenario",
        action="append",
        default=None,
        help=f"a registered scenario (repeatable): {', '.join(SCENARIOS)}",
    )
    p.add_argument(
        "--mode",
        default="surrogate",
        choices=["surrogate", "emulate", "both"],
        help="where the episodes run: the surrogate (default), the emulation "
        "(real training on Ray) or both",
    )
    p.add_argument(
        "--seeds",
        default="1000:1010",
        help="held-out seeds, START:STOP or a,b,c (default 1000:1010)",
    )
    p.add_argument(
        "--train-seeds",
        default="0:3",
        help="seeds the constant controls are tuned on (default 0:3)",
    )
    p.add_argument(
        "--policies",
        default=None,
        help="comma-separated labels to keep (default: all that apply)",
    )
    p.add_argument(
        "--learned",
        default=None,
        help="checkpoint of the learned policy (default: the shipped one), or "
        "learned_<name>=PATH,... to add trained policies side by side",
    )
    p.add_argument(
        "--surrogate",
        default=None,
        help="a fitted surrogate_fit.yaml (rayfl bench fit-surrogate) for the star",
    )
    p.add_argument(
        "--set",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="a config override applied to every scenario (repeatable), e.g. "
        "topology.lr.gamma=0.1; recorded in runs.csv",
    )
    p.add_argument(
        "--constant-search",
        default=SEARCHES[0],
        choices=SEARCHES,
        help="how constant_tuned searches: the grid (0.2, 0.5, 1, 2 x the "
        "configured value) extended x2 past an edge that holds the best value "
        "(extend, default) or the grid only (fixed, what runs before 29 Nov "
        "2026 did)",
    )
    p.add_argument(
        "--merge",
        default=None,
        help="instead of running: report earlier --out directories together "
        "(comma-separated; DIR:MODE keeps one mode's episodes)",
    )
    p.add_argument("--num-cpus", type=int, default=2, help="Ray CPUs (emulate)")
    p.add_argument("--out", default="bench-policies", help="output directory")
    return p


def parse_seeds(text: str) -> list[int]:
    """``START:STOP`` (a range) or ``a,b,c`` to a list of seeds."""
    if ":" in text:
        start, stop = (int(v) for v in text.split(":"))
        return list(range(start, stop))
    return [int(s) for s in text.split(",") if s.strip()]


def merge(sources: str, out: Path) -> None:
    """``--merge DIRS``: report earlier ``--out`` directories together under ``out``."""
    from rayfl.benchmarks.policies_report import merge_outputs

    try:
        merge_outputs([d.strip() for d in sources.split(",") if d.strip()], out)
    except ValueError as e:
        raise BenchError(str(e)) from None
    print(f"wrote {out}/")


def surrogate(path: str | None, out: Path) -> dict[str, Any]:
    """``--surrogate``: its ``rl.surrogate_*`` overrides, copied beside the results."""
    from rayfl.benchmarks.surrogate_fit import surrogate_overrides

    try:
        return surrogate_overrides(path, copy_to=out) if path else {}
    except ValueError as e:
        raise BenchError(str(e)) from None
