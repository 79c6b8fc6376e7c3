"""The figures of examples/reproduce_pfedwn.py (the script re-exports both).

``counts.png``, ``curves_<dataset>.png`` and ``em_weights.png`` from the CSVs
(``plots``), and the Fig. 4-style drop of one layout (``layout_plot``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.selection import make_layout, select_neighbors


def plots(
    counts: pd.DataFrame, curves: pd.DataFrame, em: pd.DataFrame, out: Path
) -> None:
    """Write counts.png, curves_<dataset>.png (seed means) and em_weights.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.4), dpi=120)
    for eps, part in counts.groupby("epsilon"):
        stats = part.groupby(part["sinr_threshold"].astype(float))["selected"]
        mean, std = stats.mean(), stats.std()
        ax.errorbar(
            mean.index,
            mean.values,
            yerr=std.values,
            marker="o",
            capsize=3,
            label=f"ε={eps}",
        )
    ax.set_xlabel("γ_th (linear)")
    ax.set_ylabel("selected neighbors (of 10)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "counts.png")
    plt.close(fig)
    for dataset, part in curves.groupby("dataset"):
        gammas = sorted(part["sinr_threshold"].unique(), key=float)
        fig, axes = plt.subplots(
            1, len(gammas), figsize=(4.2 * len(gammas), 3.2), dpi=120, squeeze=False
        )
        for ax, g in zip(axes[0], gammas, strict=True):
            case = part[part["sinr_threshold"] == g]
            for method, rows in case.groupby("method", sort=False):
                mean = rows.groupby("round")["target_acc"].mean()
                ax.plot(mean.index + 1, mean.values, label=method)
            seeds = case["seed"].nunique()
            ax.set_title(f"{dataset}, γ_th={g}, mean of {seeds} seeds", fontsize=9)
            ax.set_xlabel("round")
            ax.set_ylabel("target test accuracy (%)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(out / f"curves_{dataset}.png")
        plt.close(fig)
    if em.empty:
        return
    # The first run with the most selected neighbors (the most to weigh).
    keys = ["dataset", "sinr_threshold", "method", "seed"]
    sizes = em.groupby(keys, sort=False)["neighbor"].nunique()
    first = dict(zip(keys, sizes.idxmax(), strict=True))
    one = em[
        (em["dataset"] == first["dataset"])
        & (em["sinr_threshold"] == first["sinr_threshold"])
        & (em["method"] == first["method"])
        & (em["seed"] == first["seed"])
    ]
    fig, ax = plt.subplots(figsize=(5, 3.4), dpi=120)
    for neighbor, rows in one.groupby("neighbor"):
        ax.plot(rows["step"], rows["pi"], marker=".", label=f"neighbor {neighbor}")
    ax.set_xlabel("EM step (one per round)")
    ax.set_ylabel("π")
    ax.set_title(
        f"EM weights, {first['dataset']} γ_th={first['sinr_threshold']}, "
        f"{first['method']}, seed {first['seed']}",
        fontsize=8,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "em_weights.png")
    plt.close(fig)


def layout_plot(out: Path, seed: int = 0) -> None:
    """Fig. 4-style: one layout, P^err to the target, selected neighbors ringed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gammas = (5.0, 10.0, 15.0)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), dpi=120)
    for ax, gamma in zip(axes, gammas, strict=True):
        topology = D2DTopologyConfig(sinr_threshold=gamma)
        layout = make_layout(topology, 11, seed=seed)
        (sel,) = select_neighbors(layout, topology, seed=seed)
        pos = layout.positions_m
        others = [s for s in range(11) if s != sel.target]
        points = ax.scatter(
            pos[others, 0],
            pos[others, 1],
            c=sel.error_probability[others],
            cmap="viridis_r",
            vmin=0.0,
            vmax=0.14,
            s=60,
        )
        ax.scatter(*pos[sel.target], marker="*", s=250, c="red", label="target")
        if sel.neighbors:
            chosen = list(sel.neighbors)
            ax.scatter(
                pos[chosen, 0],
                pos[chosen, 1],
                s=200,
                facecolors="none",
                edgecolors="black",
                label="selected",
            )
        for s in others:
            ax.annotate(str(s), pos[s], textcoords="offset points", xytext=(5, 5))
        ax.set_title(f"γ_th={gamma:g}: {len(sel.neighbors)} selected", fontsize=9)
        ax.set_xlim(0, 50)
        ax.set_ylim(0, 50)
        ax.set_aspect("equal")
        ax.legend(fontsize=7, loc="lower right")
    fig.colorbar(points, ax=axes, label="P_err to the target")
    fig.savefig(out / "layout.png")
    plt.close(fig)
