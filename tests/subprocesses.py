"""Running rayfl in a subprocess that starts its own Ray, apart from other tests.

The private Ray temp dir is the ``ray_tmp`` fixture of tests/conftest.py.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def isolated_env(ray_tmp: Path | str) -> dict[str, str]:
    """The environment of such a subprocess: this checkout first on the path,
    Ray's temp dir ``ray_tmp`` (its session directories are the test's alone),
    no ``RAY_ADDRESS`` (it starts a local session)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "RAY_TMPDIR": str(ray_tmp)}
    env.pop("RAY_ADDRESS", None)
    return env
