"""The argument parser of ``rayfl bench policies`` (:mod:`rayfl.benchmarks.policies`)."""

from __future__ import annotations

import argparse

from rayfl.benchmarks.policies_scenarios import SCENARIOS

#: The first line of ``rayfl bench policies``'s help.
DESCRIPTION = (
    "``rayfl bench policies``: every scheduling policy on registered scenarios."
)


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``rayfl bench policies``."""
    p = argparse.ArgumentParser(prog="rayfl bench policies", description=DESCRIPTION)
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
        "--mode", default="surrogate", choices=["surrogate", "emulate", "both"]
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
        "--merge",
        default=None,
        help="instead of running: report earlier --out directories together "
        "(comma-separated; DIR:MODE keeps one mode's episodes)",
    )
    p.add_argument("--num-cpus", type=int, default=2, help="Ray CPUs (emulate)")
    p.add_argument("--out", default="bench-policies", help="output directory")
    return p
