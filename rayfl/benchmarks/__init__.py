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
    "fit-surrogate": "rayfl.benchmarks.surrogate_fit",
    "train": "rayfl.benchmarks.train_speed",
}

__all__ = ["BENCHMARKS", "BenchError", "bench_parser", "parse_seeds"]


class BenchError(ValueError):
    """Bad arguments or a policy that cannot run: printed in one line by ``rayfl``."""


def parse_seeds(text: str) -> list[int]:
    """``START:STOP`` (a range) or ``a,b,c`` to a list of seeds.

    Example:
        >>> parse_seeds("3:6"), parse_seeds("1, 5")
        ([3, 4, 5], [1, 5])
    """
    if ":" in text:
        start, stop = (int(v) for v in text.split(":"))
        return list(range(start, stop))
    return [int(s) for s in text.split(",") if s.strip()]


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
