"""Benchmarks behind ``rayfl bench`` (also runnable as ``bench/*.py``).

Each benchmark module has ``parser()`` (its flags, each with help text, under
the program name ``rayfl bench NAME``) and ``main(argv)``.
"""

from __future__ import annotations

import argparse

BENCHMARKS = {
    "round-time": "rayfl.benchmarks.round_time",
    "flute": "rayfl.benchmarks.flute_workload",
    "scale": "rayfl.benchmarks.scale",
    "env": "rayfl.benchmarks.env_speed",
    "startup": "rayfl.benchmarks.startup",
    "policies": "rayfl.benchmarks.policies",
    "fit-surrogate": "rayfl.benchmarks.surrogate_fit_cli",
}

__all__ = ["BENCHMARKS", "bench_parser"]


def bench_parser(name: str, doc: str | None) -> argparse.ArgumentParser:
    r"""An argument parser named ``rayfl bench NAME``, described by ``doc``.

    The description is the docstring's first paragraph; the rest of it is the
    epilog, kept as written.

    Example:
        >>> bench_parser("flute", "FLUTE's workload.\n\nMore.").prog
        'rayfl bench flute'
    """
    head, _, rest = (doc or "").strip().partition("\n\n")
    return argparse.ArgumentParser(
        prog=f"rayfl bench {name}",
        description=" ".join(head.split()),
        epilog=rest or None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
