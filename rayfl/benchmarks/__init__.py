"""Benchmarks behind ``rayfl bench`` (also runnable as ``bench/*.py``)."""

BENCHMARKS = {
    "round-time": "rayfl.benchmarks.round_time",
    "flute": "rayfl.benchmarks.flute_workload",
    "scale": "rayfl.benchmarks.scale",
    "env": "rayfl.benchmarks.env_speed",
    "startup": "rayfl.benchmarks.startup",
    "policies": "rayfl.benchmarks.policies",
    "fit-surrogate": "rayfl.benchmarks.surrogate_fit_cli",
}

__all__ = ["BENCHMARKS"]
