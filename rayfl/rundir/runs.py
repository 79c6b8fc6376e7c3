"""``rayfl runs [DIR]``: one table of the runs under a folder.

Every run directory under ``DIR`` (default ``runs``; the runs inside
``compare-*`` folders too) is one row, read from its ``summary.json`` and
``config.yaml`` only (nothing is recomputed, no Ray):

| column | from |
|---|---|
| ``run`` | the run directory, relative to ``DIR`` |
| ``status`` | ``summary.json``'s status (``completed``, ``failed``, ``interrupted``, ...); ``running?`` without a summary |
| ``rounds`` | rounds done / rounds configured |
| ``final_acc`` | the last evaluation's accuracy (D2D: the target's) |
| ``max_loss`` | the last evaluation's worst client test loss |
| ``epsilon`` | the largest per-client ε spent (empty without DP) |
| ``time_s`` | wall time of the run, set-up included |

Example:
    >>> runs_table("no-such-folder").columns.tolist()
    ['run', 'status', 'rounds', 'final_acc', 'max_loss', 'epsilon', 'time_s']
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

__all__ = ["COLUMNS", "find_runs", "format_runs", "run_row", "runs_table"]

COLUMNS = ["run", "status", "rounds", "final_acc", "max_loss", "epsilon", "time_s"]


def find_runs(root: str | Path) -> list[Path]:
    """Return the run directories under ``root`` (those holding ``config.yaml``).

    ``root`` itself counts when it is a run directory.
    """
    root = Path(root)
    if not root.is_dir():
        return []
    runs: list[Path] = []
    # shallowest first: a folder inside a run (mlruns/ holds a copy of
    # config.yaml as an artifact) is never a run of its own
    for path in sorted(root.rglob("config.yaml"), key=lambda p: len(p.parts)):
        if not any(path.parent.is_relative_to(run) for run in runs):
            runs.append(path.parent)
    return sorted(runs, key=lambda p: p.relative_to(root).as_posix())


def _first(mapping: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if mapping.get(key) is not None:
            return mapping[key]
    return None


def run_row(run_dir: Path, root: Path) -> dict[str, Any]:
    """Return one run's row of :func:`runs_table`."""
    summary_path, config_path = run_dir / "summary.json", run_dir / "config.yaml"
    try:
        summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    except (OSError, ValueError):
        summary = {"status": "unreadable summary.json"}
    try:
        config = yaml.safe_load(config_path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        config = {}
    final = summary.get("final") or {}
    planned = config.get("rounds", "?")
    done = summary.get("rounds_done", "?" if summary else 0)
    return {
        "run": run_dir.relative_to(root).as_posix(),
        "status": summary.get("status", "running?"),
        "rounds": f"{done}/{planned}",
        "final_acc": _first(final, "eval_acc", "target_acc", "global_acc"),
        "max_loss": _first(final, "eval_max_loss", "max_loss"),
        "epsilon": (summary.get("privacy") or {}).get("epsilon_max"),
        "time_s": summary.get("total_s"),
    }


def runs_table(root: str | Path = "runs") -> pd.DataFrame:
    """Return one row per run directory under ``root`` (columns :data:`COLUMNS`)."""
    root = Path(root)
    rows = [run_row(d, root) for d in find_runs(root)]
    table = pd.DataFrame(rows, columns=COLUMNS)
    for column in ("final_acc", "max_loss", "epsilon", "time_s"):
        table[column] = pd.to_numeric(table[column], errors="coerce")
    return table


def format_runs(table: pd.DataFrame) -> str:
    """Return the table as aligned text (empty cells for missing numbers)."""
    if table.empty:
        return "no runs found"
    shown = table.copy()
    for column, digits in (("final_acc", 4), ("max_loss", 4), ("epsilon", 3)):
        shown[column] = ["" if pd.isna(v) else f"{v:.{digits}f}" for v in shown[column]]
    shown["time_s"] = ["" if pd.isna(v) else f"{v:.1f}" for v in shown["time_s"]]
    return shown.to_string(index=False)
