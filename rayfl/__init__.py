"""rayfl: emulate wireless federated learning on Ray.

Public API (imported lazily, so ``import rayfl.wireless`` stays light)::

    result = rayfl.run("examples/quickstart.yaml", rounds=5)
    result.rounds        # per-round DataFrame
    result.metrics       # round × client DataFrame
    cfg = rayfl.load_config("examples/quickstart.yaml", ["data.num_clients=50"])
    with rayfl.Session() as session:   # runs reuse the live actors when they can
        session.run(cfg); session.run(cfg, rounds=40)
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"
__all__ = [
    "ConfigError",
    "RunConfig",
    "Session",
    "__version__",
    "load_config",
    "load_run",
    "resume",
    "run",
]

_LAZY = {
    "run": "rayfl.runner",
    "load_config": "rayfl.config",
    "ConfigError": "rayfl.config",
    "RunConfig": "rayfl.config",
    "load_run": "rayfl.rundir.results",
    "resume": "rayfl.runner",
    "Session": "rayfl.notebook",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rayfl' has no attribute {name!r}")
