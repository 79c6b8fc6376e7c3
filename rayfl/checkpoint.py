"""Checkpoints of a run: everything needed to continue it after the driver dies.

A checkpoint is ``<run_dir>/checkpoint/state.pkl`` (pickled, written atomically)
plus ``checkpoint/round.json`` (the next round, readable without unpickling). It
holds the global model, every client's state, the privacy ledger, the
scheduler's or policy's state and the log rows so far. Random draws need no
saved state: each is keyed by (seed, purpose, round, client) (``rayfl.seeding``),
so a resumed run draws exactly what the uninterrupted run would have.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

from rayfl.results import atomic_write

__all__ = ["load_checkpoint", "save_checkpoint"]

_FORMAT = 1


def save_checkpoint(run_dir: Path, state: dict[str, Any]) -> None:
    """Write ``state`` (which must hold ``next_round``) atomically."""
    folder = Path(run_dir) / "checkpoint"
    blob = pickle.dumps({"format": _FORMAT, **state}, protocol=pickle.HIGHEST_PROTOCOL)
    atomic_write(folder / "state.pkl", lambda p: p.write_bytes(blob))
    meta = json.dumps({"next_round": state["next_round"]})
    atomic_write(folder / "round.json", lambda p: p.write_text(meta))


def load_checkpoint(run_dir: str | Path) -> dict[str, Any]:
    """Return the checkpoint of ``run_dir``.

    Raises:
        FileNotFoundError: If the run has no checkpoint (set
            ``output.checkpoint_every`` to make them).
        ValueError: If the checkpoint is of another format version.
    """
    path = Path(run_dir) / "checkpoint" / "state.pkl"
    if not path.is_file():
        raise FileNotFoundError(
            f"{run_dir} has no checkpoint: run with output.checkpoint_every=N to "
            "checkpoint every N rounds"
        )
    state = pickle.loads(path.read_bytes())
    if state.get("format") != _FORMAT:
        raise ValueError(
            f"{path}: checkpoint format {state.get('format')} not supported"
        )
    return state
