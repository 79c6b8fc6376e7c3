"""The command line of ``rayfl bench policies`` (:mod:`rayfl.benchmarks.policies`).

Its flags (:func:`parser`), :func:`main`, and what ``--merge`` and
``--surrogate`` read.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import yaml

from rayfl.benchmarks import BenchError, bench_parser, parse_seeds
from rayfl.benchmarks.policies.scenarios import SIZES, scenarios, scenarios_for
from rayfl.benchmarks.policies.tuning import SEARCHES
from rayfl.registry import topology_names

__all__ = ["main", "merge", "parser", "surrogate", "surrogate_overrides"]


#: The first line of ``rayfl bench policies``'s help.
DESCRIPTION = (
    "``rayfl bench policies``: every scheduling policy on registered scenarios."
)


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``rayfl bench policies``."""
    p = bench_parser("policies", DESCRIPTION)
    p.add_argument(
        "--topology",
        default="all",
        help=f"{', '.join(topology_names())} or all (default)",
    )
    p.add_argument("--size", default="all", help=f"{', '.join(SIZES)} or all")
    p.add_argument(
        "--scenario",
        action="append",
        default=None,
        help=f"a registered scenario (repeatable): {', '.join(scenarios())}",
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
    _tuning_flags(p)
    p.add_argument(
        "--merge",
        default=None,
        help="instead of running: report earlier --out directories together "
        "(comma-separated; DIR:MODE keeps one mode's episodes)",
    )
    p.add_argument("--num-cpus", type=int, default=2, help="Ray CPUs (emulate)")
    p.add_argument("--out", default="bench-policies", help="output directory")
    return p


def _tuning_flags(p: argparse.ArgumentParser) -> None:
    """The flags of the tuned rows: ``--constant-search`` and ``--self-tune``."""
    p.add_argument(
        "--constant-search",
        default=SEARCHES[0],
        choices=SEARCHES,
        help="how constant_tuned (and --self-tune's rows) search: the grid "
        "(0.2, 0.5, 1, 2 x the configured value) extended x2 past an edge that "
        "holds the best value "
        "(extend, default) or the grid only (fixed, what runs before 29 Nov "
        "2026 did)",
    )
    p.add_argument(
        "--self-tune",
        nargs="?",
        const="all",
        default=None,
        metavar="POLICIES",
        help="add <policy>_tuned rows: each heuristic with its own parameters "
        "and the topology's constants tuned for it on --train-seeds, as "
        "constant_tuned's are (all, the default when the flag is given, or "
        "comma-separated heuristics)",
    )


def merge(sources: str, out: Path) -> None:
    """``--merge DIRS``: report earlier ``--out`` directories together under ``out``."""
    from rayfl.benchmarks.policies.report import merge_outputs

    try:
        merge_outputs([d.strip() for d in sources.split(",") if d.strip()], out)
    except ValueError as e:
        raise BenchError(str(e)) from None
    print(f"wrote {out}/")


def surrogate(path: str | None, out: Path) -> dict[str, Any]:
    """``--surrogate``: its ``rl.surrogate_*`` overrides, copied beside the results."""
    try:
        return surrogate_overrides(path, copy_to=out) if path else {}
    except ValueError as e:
        raise BenchError(str(e)) from None


def surrogate_overrides(
    path: str | Path, copy_to: Path | None = None
) -> dict[str, Any]:
    """The ``rl.surrogate_*`` overrides of a fitted fragment (``surrogate_fit.yaml``).

    ``copy_to``: a directory to copy the fragment into (``surrogate_used.yaml``).

    Raises:
        ValueError: If the file is missing or has no ``rl`` mapping of
            ``surrogate_*`` fields.
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"--surrogate: no such file {p}")
    tree = yaml.safe_load(p.read_text()) or {}
    rl = tree.get("rl") if isinstance(tree, dict) else None
    if (
        not isinstance(rl, dict)
        or not rl
        or any(not str(k).startswith("surrogate_") for k in rl)
    ):
        raise ValueError(
            f"--surrogate: {p} must hold an `rl:` mapping of surrogate_* fields "
            "(as `rayfl bench fit-surrogate` writes)"
        )
    if copy_to is not None:
        copy_to.mkdir(parents=True, exist_ok=True)
        (copy_to / "surrogate_used.yaml").write_text(p.read_text())
    return {f"rl.{k}": v for k, v in rl.items()}


def main(argv: list[str] | None = None) -> None:
    """Run ``rayfl bench policies`` with the command-line flags ``argv``."""
    from rayfl.benchmarks.policies.benchmark import bench_policies, learned_checkpoints
    from rayfl.config import parse_overrides

    args = parser().parse_args(argv)
    try:
        if args.scenario:
            known = scenarios()
            unknown = [s for s in args.scenario if s not in known]
            if unknown:
                raise ValueError(
                    f"--scenario must be one of {', '.join(known)}; got {unknown[0]!r}"
                )
            chosen = [known[s] for s in args.scenario]
        else:
            chosen = scenarios_for(args.topology, args.size)
    except ValueError as e:
        raise BenchError(str(e)) from None
    modes = ["surrogate", "emulate"] if args.mode == "both" else [args.mode]
    only = [p.strip() for p in (args.policies or "").split(",") if p.strip()]
    out = Path(args.out)
    t0 = time.perf_counter()
    if args.merge:
        merge(args.merge, out)
        return
    overrides = surrogate(args.surrogate, out) | parse_overrides(args.set or [])
    bench_policies(
        chosen,
        modes=modes,
        seeds=parse_seeds(args.seeds),
        train_seeds=parse_seeds(args.train_seeds),
        out=out,
        learned=learned_checkpoints(args.learned),
        only=only,
        num_cpus=args.num_cpus,
        overrides=overrides,
        constant_search=args.constant_search,
        self_tune=args.self_tune,
    )
    print(
        f"\nwrote {out}/summary.csv, summary.md, episodes.csv, runs.csv, "
        f"*.png in {time.perf_counter() - t0:.0f} s"
    )
