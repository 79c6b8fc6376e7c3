"""The ``rayfl`` command: run, plot, info.

    rayfl run CONFIG [key.path=value ...]   run an experiment, print its table
    rayfl resume RUN_DIR                    continue a run from its last checkpoint
    rayfl compare CONFIG --policies a,b,c   same config and seed under each policy
    rayfl compare CONFIG --algorithms a,b   same config and seed under each algorithm
    rayfl plot RUN_DIR [RUN_DIR ...]        (re)draw plots; several runs: overlaid
                                            in ./plots-<run>-vs-<run> (or --out)
    rayfl runs [DIR]                        a table of the runs under DIR
    rayfl info [--data-root DIR]            Ray resources and datasets found
    rayfl bench NAME [args]                 benchmarks (bench/results.md); `bench
                                            policies`: every scheduler, held-out seeds
    rayfl train-policy CONFIG [options]     train the learned scheduler (PPO, RLlib)

Configuration errors print in a few lines, without a traceback (exit code 2). A
run that fails prints its error, the run directory and how to resume it (exit
code 1; 130 when interrupted by Ctrl-C or SIGTERM), also when it fails during its
set-up (Ray start-up, data loading, actor creation); a full disk prints one line
naming the file and the space left (exit code 1). ``rayfl --debug ...`` or the
environment variable ``RAYFL_DEBUG=1`` prints the full traceback as well.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rayfl.cli.info import cmd_info, cmd_runs

__all__ = ["main"]

_TABLE_HEADER = "evaluated rounds (counted from 0, as in rounds.parquet and the plots):"


def _cmd_run(args: argparse.Namespace) -> int:
    from rayfl.config import load_config

    config = load_config(args.config, args.overrides)  # errors before torch/Ray load
    from rayfl.compare.variants import sweep
    from rayfl.config.sweep import record_replaced_sweep, replaced_sweep_lines
    from rayfl.runner import run

    for line in replaced_sweep_lines(config.replaced_sweep):  # the override wins
        print(line, file=sys.stderr)
    if config.sweep:
        table, out = sweep(config)
        print(
            table.drop(columns=["run_dir"]).to_string(
                index=False, float_format=lambda v: f"{v:.4g}"
            )
        )
        print(f"\nsweep directory: {out}")
        return 0
    result = run(config)
    record_replaced_sweep(result.run_dir, config.replaced_sweep)
    print(_TABLE_HEADER)
    print(result.table())
    final = result.summary.get("final", {})
    names = (
        {"target_acc": "target accuracy"}  # D2D: the target's score
        if "target_acc" in final
        else {"global_acc": "global accuracy", "max_loss": "max client loss"}
    )
    scores = [f"{name} {final[key]:.4f}" for key, name in names.items() if key in final]
    parts = [f"final {', '.join(scores)}"] if scores else []
    parts.append(f"{result.summary['total_s']:.1f} s ({result.summary['status']})")
    print(f"\nrun directory: {result.run_dir}\n{', '.join(parts)}")
    for warning in result.summary.get("warnings") or []:
        print(f"warning: {warning}", file=sys.stderr)
    privacy = result.summary.get("privacy") or {}
    if privacy.get("epsilon_max") is not None:
        print(
            "per-client ε at δ={delta}: max {epsilon_max:.3f}, median {epsilon_median:.3f},"
            " min {epsilon_min:.3f}".format(**privacy)
        )
    return 0


def _cmd_resume(args: argparse.Namespace) -> int:
    from rayfl.runner import resume

    result = resume(args.run_dir)
    print(_TABLE_HEADER)
    print(result.table())
    print(f"\nrun directory: {result.run_dir} ({result.summary['status']})")
    return 0


def _cmd_tune_ditto(args: argparse.Namespace) -> int:
    import numpy as np

    from rayfl.algorithms.ditto_analysis import inputs_from_run_config, tune
    from rayfl.config import load_config, parse_overrides

    rest = [
        o
        for o in args.overrides
        if o.split("=", 1)[0] not in load_config().model_fields
    ]
    cfg = load_config(args.config, [o for o in args.overrides if o not in rest])
    result = tune({**inputs_from_run_config(cfg), **parse_overrides(rest)})
    for key, value in result.items():
        if np.ndim(value) == 0:
            print(f"{key:24s} {value}")
    curve = {
        k: np.asarray(v, dtype=float)
        for k, v in result.items()
        if np.ndim(v) == 1 and len(v) and np.issubdtype(np.asarray(v).dtype, np.number)
    }
    for warning in result.get("warnings") or []:
        print(f"warning: {warning}")
    if curve:
        names = sorted(curve, key=lambda n: (n != "rounds_axis", n))
        print("\n" + "  ".join(f"{n:>12s}" for n in names))
        length = min(len(v) for v in curve.values())
        for i in np.unique(np.linspace(0, length - 1, 15).astype(int)):
            print("  ".join(f"{curve[n][i]:12.5g}" for n in names))
    return 0


def _parse_seeds(text: str) -> list[int]:
    """``"0,1,2"`` → [0, 1, 2]; ``"1000:1003"`` → [1000, 1001, 1002]."""
    if ":" in text:
        start, stop = (int(v) for v in text.split(":"))
        return list(range(start, stop))
    return [int(s) for s in text.split(",") if s.strip()]


def _cmd_compare(args: argparse.Namespace) -> int:
    from rayfl.compare.variants import compare, compare_algorithms

    names = [n.strip() for n in (args.algorithms or args.policies or "").split(",")]
    names = [n for n in names if n]
    if not names:
        print("rayfl compare: give --policies or --algorithms", file=sys.stderr)
        return 2
    if args.policies and args.algorithms:
        print(
            "rayfl compare: give --policies or --algorithms, not both", file=sys.stderr
        )
        return 2
    if (args.fast or args.csv) and not args.seeds:
        flag = "--fast" if args.fast else "--csv"
        print(f"rayfl compare: {flag} needs --seeds", file=sys.stderr)
        return 2
    if args.seeds:
        from rayfl.compare.seeds import compare_seeds, pretty_summary
        from rayfl.compare.variants import markdown_table

        seeds = _parse_seeds(args.seeds)
        summary, out = compare_seeds(
            args.config,
            names,
            seeds,
            args.overrides,
            fast=args.fast,
            algorithms=bool(args.algorithms),
            csv=args.csv,
        )
        print(markdown_table(pretty_summary(summary)))
        if args.csv:
            print(f"\nper-seed table: {args.csv}")
        print(f"\ncomparison directory: {out}")
        return 0
    run = compare_algorithms if args.algorithms else compare
    table, out = run(args.config, names, args.overrides)
    print(
        table.drop(columns=["run_dir"]).to_string(
            index=False, float_format=lambda v: f"{v:.4g}"
        )
    )
    print(f"\ncomparison directory: {out}")
    return 0


def _cmd_train_policy(args: argparse.Namespace) -> int:
    from rayfl.train_policy.train import INSTALL_HINT, rllib_available, train_policy

    if not rllib_available():
        print(f"rayfl: {INSTALL_HINT}", file=sys.stderr)
        return 2
    if args.resume is not None and args.config is not None and "=" in args.config:
        # `--resume RUN_DIR rl.iterations=60`: the first override, not a config
        args.overrides, args.config = [args.config, *args.overrides], None
    if (args.config is None) == (args.resume is None):
        print("rayfl: train-policy needs CONFIG or --resume RUN_DIR", file=sys.stderr)
        return 2
    extra = list(args.overrides)
    for key, value in (
        ("mode", args.mode),
        ("iterations", args.iterations),
        ("num_env_runners", args.num_env_runners),
        ("init_from", args.init_from),
        ("time_budget_s", args.time_budget),
    ):
        if value is not None:
            extra.append(f"rl.{key}={value}")
    from rayfl.train_policy.train import TrainingFailed

    try:
        run_dir = train_policy(args.config, extra, resume=args.resume)
    except TrainingFailed as e:
        print(f"rayfl: train-policy failed: {e}", file=sys.stderr)
        return 1
    print(f"\nrun directory: {run_dir}\npolicy: {run_dir / 'policy'}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from importlib import import_module

    from rayfl.benchmarks import BENCHMARKS

    # `all`: the quick ones; `policies` is a study of its own (rayfl bench policies)
    names = (
        [n for n in BENCHMARKS if n not in ("policies", "fit-surrogate", "train")]
        if args.name == "all"
        else [args.name]
    )
    for name in names:
        if args.name == "all":
            print(f"== rayfl bench {name}")
        import_module(BENCHMARKS[name]).main(list(args.overrides))
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from rayfl.rundir.plots import overlay_dir, plot_rounds
    from rayfl.rundir.results import load_run

    runs = {Path(d).resolve().name: load_run(d).rounds for d in args.run_dirs}
    if len(args.run_dirs) == 1:
        out = Path(args.out) if args.out else Path(args.run_dirs[0]) / "plots"
    else:
        out = Path(args.out) if args.out else overlay_dir(args.run_dirs)
        own = {(Path(d) / "plots").resolve() for d in args.run_dirs}
        if out.resolve() in own or any(
            out.resolve() == Path(d).resolve() for d in args.run_dirs
        ):
            print(
                f"rayfl plot: --out {out} is a run's own plot folder; an overlay of "
                "several runs goes elsewhere (default ./plots-<run>-vs-<run>)",
                file=sys.stderr,
            )
            return 2
    for path in plot_rounds(runs, out):
        print(path)
    return 0


def _add_compare(sub: Any) -> None:
    """Add the ``compare`` subcommand to the subparsers ``sub``."""
    p = sub.add_parser("compare", help="run one config under several policies")
    p.add_argument("config", help="YAML config file with a wireless section")
    p.add_argument("overrides", nargs="*", help="key.path=value overrides")
    p.add_argument(
        "--policies",
        required=False,
        help="comma-separated names, e.g. random,round_robin,proportional_fair; "
        "name:key=value sets a parameter of that policy only, e.g. "
        "learned:checkpoint=runs/train-x",
    )
    p.add_argument(
        "--algorithms",
        default=None,
        help="comma-separated algorithm kinds, e.g. fedavg,ditto,fedamp "
        "(instead of --policies)",
    )
    p.add_argument(
        "--seeds",
        default=None,
        help="comma-separated seeds, e.g. 0,1,2, or a range START:STOP "
        "(e.g. 1000:1050): mean ± std over seeds",
    )
    p.add_argument(
        "--fast",
        action="store_true",
        help="with --seeds: run every policy on one FL system per seed (actors "
        "restarted, not rebuilt) and keep only the final metrics; same numbers "
        "as full runs, no run directories",
    )
    p.add_argument(
        "--csv",
        default=None,
        help="with --seeds: also write the per-seed table (one row per seed and "
        "policy or algorithm, without the run directories) to this CSV file",
    )
    p.set_defaults(func=_cmd_compare)


def _add_train_policy(sub: Any) -> None:
    """Add the ``train-policy`` subcommand to the subparsers ``sub``."""
    p = sub.add_parser(
        "train-policy", help="train the learned scheduler with PPO (needs .[rl])"
    )
    p.add_argument("config", nargs="?", help="YAML config with a wireless section")
    p.add_argument("overrides", nargs="*", help="key.path=value overrides")
    p.add_argument(
        "--mode",
        choices=["surrogate", "emulate"],
        default=None,
        help="train on the cheap surrogate or on the emulation itself "
        "(sets rl.mode; default: the config's)",
    )
    p.add_argument(
        "--iterations", type=int, default=None, help="PPO iterations (rl.iterations)"
    )
    p.add_argument(
        "--num-env-runners",
        type=int,
        default=None,
        help="RLlib environment runners, one Ray actor each (rl.num_env_runners)",
    )
    p.add_argument(
        "--init-from",
        default=None,
        help="start from an exported policy directory (rl.init_from)",
    )
    p.add_argument(
        "--time-budget",
        type=float,
        default=None,
        help="stop training after this many seconds (rl.time_budget_s)",
    )
    p.add_argument(
        "--resume", default=None, help="continue a train-policy run directory"
    )
    p.set_defaults(func=_cmd_train_policy)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``rayfl`` command."""
    from rayfl import __version__

    parser = argparse.ArgumentParser(prog="rayfl", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"rayfl {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="print the full traceback of a failed run (also: RAYFL_DEBUG=1)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run an experiment from a YAML config")
    p.add_argument("config", help="YAML config file (see examples/)")
    p.add_argument("overrides", nargs="*", help="key.path=value overrides")
    p.set_defaults(func=_cmd_run)
    p = sub.add_parser("resume", help="continue a run from its last checkpoint")
    p.add_argument("run_dir", help="the run directory (runs/<name>-<timestamp>)")
    p.set_defaults(func=_cmd_resume)
    p = sub.add_parser(
        "tune-ditto",
        help="the rounds T* and Ditto weight λ* that the DP-Ditto paper's bound "
        "(Zhao et al., arXiv:2506.14251) recommends for a DP-Ditto config",
    )
    p.add_argument("config", help="YAML config of a DP-Ditto run")
    p.add_argument(
        "overrides", nargs="*", help="config overrides, or analysis inputs (dim=582026)"
    )
    p.set_defaults(func=_cmd_tune_ditto)
    _add_compare(sub)
    _add_train_policy(sub)
    p = sub.add_parser(
        "bench",
        help="run a benchmark (round-time, flute, scale, env, startup, policies, "
        "fit-surrogate, train, all)",
    )
    p.add_argument(
        "name",
        choices=[
            "round-time",
            "flute",
            "scale",
            "env",
            "startup",
            "policies",
            "fit-surrogate",
            "train",
            "all",
        ],
        help="which benchmark (all: the quick ones, not policies/fit-surrogate/train)",
    )
    p.add_argument(
        "overrides",
        nargs=argparse.REMAINDER,
        help="arguments of the benchmark (e.g. rayfl bench policies --help)",
    )
    p.set_defaults(func=_cmd_bench)
    p = sub.add_parser("plot", help="draw the plots of one or more run directories")
    p.add_argument("run_dirs", nargs="+", help="one or more run directories")
    p.add_argument(
        "--out",
        help="output directory (default: RUN_DIR/plots for one run; for two, "
        "./plots-<run>-vs-<run>; for more, ./plots-<first run>-vs-<k>-more; "
        "never a run's own plots/)",
    )
    p.set_defaults(func=_cmd_plot)
    p = sub.add_parser(
        "runs", help="a table of the runs under a folder (status, accuracy, ε, time)"
    )
    p.add_argument(
        "dir", nargs="?", default="runs", help="folder of run directories (runs)"
    )
    p.add_argument("--csv", default=None, help="also write the table to this CSV file")
    p.set_defaults(func=cmd_runs)
    p = sub.add_parser("info", help="show Ray resources and the datasets found")
    p.add_argument("--data-root", default=None, help="directory of user datasets")
    p.add_argument("--address", default=None, help="Ray address, e.g. auto")
    p.add_argument("--run", default=None, help="a run directory: where its actors ran")
    p.set_defaults(func=cmd_info)
    return parser


def _command(args: argparse.Namespace) -> str:
    """``"compare: "`` for commands that run many runs, else ``""``."""
    many = ("compare", "train-policy")
    return f"{args.command}: " if args.command in many else ""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rayfl`` console script."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if "--debug" in extra:  # also accepted after the subcommand
        extra = [e for e in extra if e != "--debug"]
        args.debug = True
    # Overrides may follow options (`compare CFG --policies a,b rounds=5`);
    # a benchmark's own flags go to it (`bench startup --repeats 5`).
    if (
        extra
        and hasattr(args, "overrides")
        and (args.command == "bench" or not any(e.startswith("-") for e in extra))
    ):
        args.overrides = list(args.overrides) + extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from rayfl.compare.progress import CompareFailed
    from rayfl.config import ConfigError
    from rayfl.rundir.atomic import DiskFullError
    from rayfl.rundir.status import RunFailed, RunInterrupted

    try:
        return int(args.func(args))
    except (RunFailed, RunInterrupted, CompareFailed) as e:
        # The run directory holds the rounds done, summary.json and error.txt.
        import os

        if args.debug or os.environ.get("RAYFL_DEBUG", "") not in ("", "0"):
            import traceback

            traceback.print_exception(e.__cause__ or e, file=sys.stderr)
        print(f"rayfl: {_command(args)}{e}", file=sys.stderr)
        return 130 if e.status == "interrupted" else 1
    except ConfigError as e:
        print(f"rayfl: {e}", file=sys.stderr)
        return 2
    except DiskFullError as e:
        print(f"rayfl: {e}", file=sys.stderr)  # one line: the file, the space left
        return 1
    except RuntimeError as e:
        from rayfl.cluster.resources import ResourceError

        if isinstance(e, ResourceError):
            print(f"rayfl: {e}", file=sys.stderr)
            return 2
        raise
    except (FileNotFoundError, ValueError) as e:
        # Bad input (missing dataset, impossible partition...): one screen, no traceback.
        if type(e).__module__.startswith("rayfl") or isinstance(e, FileNotFoundError):
            print(f"rayfl: {e}", file=sys.stderr)
            return 2
        raise
