"""Plots of a run (and of several runs overlaid) as PNG files."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

__all__ = ["plot_rounds"]

_PANELS = (
    ("eval_acc", "test accuracy"),
    ("eval_max_loss", "max client test loss"),
    ("jain_train_loss", "Jain's index (train loss)"),
    ("epsilon_max", "max client ε"),
    ("latency_s", "round uplink latency (s)"),
    ("energy_j", "round uplink energy (J)"),
)


def plot_rounds(runs: Mapping[str, pd.DataFrame], out_dir: str | Path) -> list[Path]:
    """Write one PNG per metric, each overlaying every run's curve over rounds.

    Args:
        runs: Label → that run's ``rounds`` DataFrame.
        out_dir: Directory of the PNGs (created).

    Returns:
        The paths written.
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
                d["round"] + 1,
                d[column],
                marker="." if len(d) < 40 else None,
                label=name,
            )
        ax.set_xlabel("round")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if len(present) > 1:
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = out / f"{column}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written
