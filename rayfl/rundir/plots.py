"""Plots of a run (and of several runs overlaid) as PNG files."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from rayfl.rundir.atomic import atomic_write  # noqa: E402

__all__ = ["ROUND_AXIS", "overlay_dir", "plot_rounds"]

#: Rounds are counted from 0 everywhere: rounds.parquet, the console table, plots.
ROUND_AXIS = "round t (from 0, as in rounds.parquet)"

_PANELS = (
    ("eval_acc", "test accuracy"),
    ("eval_max_loss", "max client test loss"),
    ("jain_train_loss", "Jain's index (train loss)"),
    ("epsilon_max", "max client ε"),
    ("latency_s", "round uplink latency (s)"),
    ("energy_j", "round uplink energy (J)"),
)


def overlay_dir(run_dirs: Sequence[str | Path], root: str | Path = ".") -> Path:
    """Return the default folder of an overlay of several runs, named after them.

    ``root/plots-<run A>-vs-<run B>`` for two runs; ``root/plots-<run A>-vs-<k>-more``
    for more (or when two names exceed 120 characters), so the name stays short.
    Never inside a run directory, whose ``plots/`` holds that run's own curves.

    Example:
        >>> overlay_dir(["runs/a-1", "runs/b-2"]).as_posix()
        'plots-a-1-vs-b-2'
        >>> overlay_dir(["runs/a-1", "runs/b-2", "runs/c-3"]).as_posix()
        'plots-a-1-vs-2-more'
    """
    names = [Path(d).resolve().name for d in run_dirs]
    name = "plots-" + "-vs-".join(names)
    if len(names) > 2 or len(name) > 120:
        name = f"plots-{names[0][:80]}-vs-{len(names) - 1}-more"
    return Path(root) / name


def _save_png(fig: Any, path: Path) -> None:
    fig.savefig(path, format="png")


def plot_rounds(runs: Mapping[str, pd.DataFrame], out_dir: str | Path) -> list[Path]:
    """Write one PNG per metric, each overlaying every run's curve over rounds.

    The x axis is the round index of ``rounds.parquet`` (from 0), as in the
    console table.

    Args:
        runs: Label → that run's ``rounds`` DataFrame.
        out_dir: Directory of the PNGs (created).

    Returns:
        The paths written.

    Raises:
        rayfl.rundir.atomic.DiskFullError: If the disk is full (each PNG is written
            atomically: the ones not written keep their previous version).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for column, label in _PANELS:
        present = {
            k: df for k, df in runs.items() if column in df and df[column].notna().any()
        }
        if not present:
            continue
        fig, ax = plt.subplots(figsize=(5.0, 3.4), dpi=120)
        for name, df in present.items():
            d = df.dropna(subset=[column])
            ax.plot(
                d["round"],
                d[column],
                marker="." if len(d) < 40 else None,
                label=name,
            )
        ax.set_xlabel(ROUND_AXIS)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if len(present) > 1:
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = out / f"{column}.png"
        try:  # atomically: a full disk leaves the previous PNG, not a cut one
            atomic_write(path, partial(_save_png, fig))
        finally:
            plt.close(fig)
        written.append(path)
    return written
