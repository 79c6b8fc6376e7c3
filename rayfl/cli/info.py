"""``rayfl info`` and ``rayfl runs``: what is here (datasets, Ray, runs).

Split from :mod:`rayfl.cli`, which registers them; nothing heavy is imported
before a command runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["cmd_info", "cmd_runs", "human_resource"]


def cmd_runs(args: argparse.Namespace) -> int:
    """``rayfl runs [DIR] [--csv FILE]``: print (and write) the table of runs."""
    from rayfl.rundir.runs import format_runs, runs_table

    root = Path(args.dir)
    if not root.is_dir():
        print(f"rayfl runs: no directory {root}", file=sys.stderr)
        return 2
    table = runs_table(root)
    print(format_runs(table))
    if args.csv:
        from rayfl.rundir.results import atomic_write

        atomic_write(Path(args.csv), lambda p: table.to_csv(p, index=False))
        print(f"\ntable: {args.csv}")
    return 0


def human_resource(key: str, value: float) -> str:
    """Format a Ray resource: memory in GiB, counts as plain numbers.

    Example:
        >>> human_resource("memory", 3.54304e10)
        '33.0 GiB'
        >>> human_resource("CPU", 2.0)
        '2'
    """
    if "memory" in key:
        return f"{value / 2**30:.1f} GiB"
    return f"{value:g}"


def cmd_info(args: argparse.Namespace) -> int:
    """``rayfl info``: datasets found, Ray resources, where a run's actors ran."""
    import ray

    from rayfl.data.datasets import available_datasets

    if args.run:
        import json

        summary = json.loads((Path(args.run) / "summary.json").read_text())
        placement = summary.get("placement", {})
        print(f"run {args.run}: {placement.get('num_nodes', '?')} node(s)")
        for i, actor in enumerate(placement.get("client_actors", [])):
            first, last = actor["clients"]
            print(
                f"  client actor {i:3d} (clients {first}-{last}) on node {actor['node'][:12]}"
            )
        print(f"  cloud server on node {placement.get('cloud', '?')[:12]}")
        return 0
    print("datasets:")
    for name, status in available_datasets(args.data_root).items():
        print(f"  {name:14s} {status}")
    if args.address or ray.is_initialized():
        started = False
        if not ray.is_initialized():
            ray.init(address=args.address, logging_level="ERROR")  # type: ignore[arg-type]  # Ray stubs: a level name works
            started = True
        print("ray cluster resources:")
        for key, value in sorted(ray.cluster_resources().items()):
            if not key.startswith("node:"):
                print(f"  {key:24s} {human_resource(key, value)}")
        alive = [n for n in ray.nodes() if n.get("Alive")]
        print(f"nodes: {len(alive)} alive")
        for node in alive:
            cpus = node.get("Resources", {}).get("CPU", 0)
            print(
                f"  {node['NodeID'][:12]} {node['NodeManagerAddress']:15s} {cpus:g} CPU"
            )
        if started:
            ray.shutdown()
    else:
        import os

        print(
            f"ray: no cluster address given (local runs use {os.cpu_count()} CPUs); "
            "pass --address auto to inspect a running cluster"
        )
    return 0
