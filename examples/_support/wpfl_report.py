"""``results.csv`` of examples/reproduce_wpfl.py and its table and plots.

The run-independent half of the script: a finished run's PL metrics (at the end
and at the first client's T0-th upload), the ``results.csv`` and
``settings.json`` files of one ``--out``, and ``table.md`` and the figures
written from the rows. The script re-exports every public name.
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

#: Paper's claims for CNN (abstract; spec §7.5), relative to the second best.
PAPER_CNN = {"max_test_loss": 16.21, "jain": 38.37, "accuracy": 87.08}
#: Jain's index columns: (results.csv field, rounds.parquet column, label).
JAIN_READINGS = (
    ("jain", "jain_train_loss", "Jain (PL train CE)"),
    ("jain_reg", "jain_train_reg_loss", "Jain (CE + λ/2·‖ω̂−ϖ‖, PFLlib)"),
    ("jain_objective", "jain_train_pl_objective", "Jain (PL objective, eq. 3a)"),
)
METRICS = ("accuracy", "max_test_loss", *(j[0] for j in JAIN_READINGS))
#: Suffix of the columns read at the round where the first client used its T0-th
#: upload (``--report-at first_t0``); the plain columns are read at the end.
FIRST_T0 = "_first_t0"
POLICIES = ("minmax", "round_robin", "random", "non_adjustment", "error_free")
FIELDS = (
    "pair",
    "policy",
    "t0",
    "seed",
    "accuracy",
    "max_test_loss",
    "jain",
    "jain_reg",
    "jain_objective",
    "mean_acc",
    "rounds",
    "first_t0_round",
    *(m + FIRST_T0 for m in METRICS),
    "wall_s",
)
#: The settings of one ``--out`` directory (``settings.json``) and their
#: defaults; a key absent from an older settings.json had its default.
SETTING_DEFAULTS: dict[str, Any] = {
    "pl_scheduled_only": False,
    "rr_subchannels": "best_gain",
    "c5": False,
    "downlink_band": "subchannel",
    "partition": "pathological",
    "alpha": 0.1,
}


def _pl_metrics(row: Any, suffix: str = "") -> dict[str, float]:
    """Return the PL metrics of one evaluated ``rounds.parquet`` row."""
    return {
        "accuracy" + suffix: float(row["personal_acc"]),
        "max_test_loss" + suffix: float(row["personal_max_loss"]),
        **{
            field + suffix: float(row.get(column, math.nan))
            for field, column, _ in JAIN_READINGS
        },
    }


def first_t0_round(metrics: Any, t0: int) -> int | None:
    """Return the round in which some client makes its T0-th upload (None: never).

    Args:
        metrics: The run's round × client rows (``metrics.parquet``), with
            ``round``, ``client`` and ``scheduled``.
        t0: T0, the upload cap.

    Example:
        >>> import pandas as pd
        >>> m = pd.DataFrame({"round": [0, 0, 1, 1], "client": [0, 1, 0, 1],
        ...                   "scheduled": [True, False, True, True]})
        >>> first_t0_round(m, 2)
        1
    """
    table = metrics.pivot(index="round", columns="client", values="scheduled")
    uploads = table.sort_index().astype(int).cumsum()
    hit = uploads.index[(uploads >= t0).any(axis=1)]
    return int(hit[0]) if len(hit) else None


def final_metrics(result: Any, t0: int | None = None) -> dict[str, float]:
    """Return a run's PL metrics at the end and at the first client's T0-th upload.

    The plain columns come from the last evaluated round (after the tail in
    which the last clients spend their uploads). With ``t0``, the ``*_first_t0``
    columns come from the first evaluated round at or after the round in which
    some client made its T0-th upload (``first_t0_round``), the last round in
    which every client could still be scheduled.
    """
    rounds = result.rounds
    evaluated = rounds.dropna(subset=["personal_acc"])
    last = evaluated.iloc[-1]
    out: dict[str, Any] = {
        **_pl_metrics(last),
        "mean_acc": float(last["mean_acc"]),
        "rounds": int(len(rounds)),
    }
    first = None if t0 is None else first_t0_round(result.metrics, t0)
    out["first_t0_round"] = "" if first is None else first
    at = evaluated[evaluated["round"] >= first] if first is not None else evaluated[:0]
    if len(at):
        out.update(_pl_metrics(at.iloc[0], FIRST_T0))
    else:
        out.update({m + FIRST_T0: math.nan for m in METRICS})
    return out


def load_rows(path: Path) -> list[dict[str, Any]]:
    """Read finished runs from ``results.csv`` (empty if absent)."""
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def check_settings(path: Path, args: argparse.Namespace, fresh: bool) -> None:
    """Keep one run setting per ``--out``.

    Finished runs are keyed by (pair, policy, T0, seed) only, so a different
    setting must not reuse them.

    Raises:
        SystemExit: ``path`` records a different setting (and not ``fresh``).
    """
    import json

    setting = {
        "samples_per_client": args.samples_per_client,
        "steps": args.steps,
        "batch_size": args.batch_size,
        "rounds": args.rounds,
        **{key: getattr(args, key) for key in SETTING_DEFAULTS},
    }
    if path.exists() and not fresh:
        old = {**SETTING_DEFAULTS, **json.loads(path.read_text())}
        if old != setting:
            raise SystemExit(
                f"{path.parent} holds runs with {old}, not {setting}: "
                "use another --out (or --fresh to start over)"
            )
    path.write_text(json.dumps(setting, indent=1) + "\n")


def append_row(path: Path, row: dict[str, Any]) -> None:
    """Append one run's row to ``results.csv`` (header on first write).

    A file written before a column was added is rewritten with it (empty for
    the old rows).
    """
    new = not path.exists()
    if not new:
        with path.open() as f:
            header = next(csv.reader(f), [])
        if tuple(header) != FIELDS:
            old = load_rows(path)
            with path.open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=FIELDS)
                writer.writeheader()
                writer.writerows({k: r.get(k, "") for k in FIELDS} for r in old)
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        writer.writerow({k: row[k] for k in FIELDS})


def aggregate(
    rows: list[dict[str, Any]], suffix: str = ""
) -> dict[tuple[str, str, int], dict[str, float]]:
    """Return seed means, sample stds (``<metric>_std``) and counts per (pair, policy, T0).

    ``suffix`` ``"_first_t0"`` reads the metrics at the first client's T0-th
    upload instead of the end (``--report-at``).
    """
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["pair"], r["policy"], int(r["t0"])), []).append(r)
    out = {}
    for key, items in groups.items():
        out[key] = {m: _mean([i.get(m + suffix) for i in items]) for m in METRICS}
        for m in METRICS:
            out[key][m + "_std"] = _std([i.get(m + suffix) for i in items])
        out[key]["seeds"] = len(items)
    return out


def _finite(values: list[Any]) -> npt.NDArray[np.float64]:
    x = np.array([float(v) if v not in (None, "") else math.nan for v in values])
    return x[np.isfinite(x)]


def _mean(values: list[Any]) -> float:
    """Mean of the values that parse as finite floats (NaN if none)."""
    x = _finite(values)
    return float(x.mean()) if x.size else math.nan


def _std(values: list[Any]) -> float:
    """Sample std (ddof 1) of the finite values (NaN with fewer than two)."""
    x = _finite(values)
    return float(x.std(ddof=1)) if x.size > 1 else math.nan


def relative_gain(ours: float, others: list[float], higher_is_better: bool) -> float:
    """Return (ours − best other)/best other in %, signed so that > 0 is better."""
    if not others:
        return math.nan
    best = max(others) if higher_is_better else min(others)
    gain = (ours - best) / abs(best) * 100.0
    return gain if higher_is_better else -gain


def write_table(rows: list[dict[str, Any]], out: Path, suffix: str = "") -> str:
    """Write ``table.md`` (means over seeds, relative gaps) and return its text."""
    means = aggregate(rows, suffix)
    lines = [
        "| pair | policy | T0 | seeds | PL accuracy | max PL test loss | "
        + " | ".join(j[2] for j in JAIN_READINGS)
        + " |",
        "|---|---|---|---|---|---|" + "---|" * len(JAIN_READINGS),
    ]
    for (pair, policy, t0), m in sorted(means.items()):
        jains = " | ".join(f"{m[j[0]]:.4f}" for j in JAIN_READINGS)
        lines.append(
            f"| {pair} | {policy} | {t0} | {m['seeds']:.0f} | {m['accuracy']:.4f} | "
            f"{m['max_test_loss']:.4f} | {jains} |"
        )
    lines += [
        "",
        "Relative gain of `minmax` over the best of round_robin / random / "
        "non_adjustment (positive = minmax better; loss: lower is better):",
        "",
        "| pair | T0 | accuracy % | max test loss % | "
        + " | ".join(f"{j[2]} %" for j in JAIN_READINGS)
        + " |",
        "|---|---|---|---|" + "---|" * len(JAIN_READINGS),
    ]
    baselines = ("round_robin", "random", "non_adjustment")
    for pair, policy, t0 in sorted(means):
        if policy != "minmax":
            continue
        ours = means[(pair, "minmax", t0)]
        others = [means[(pair, b, t0)] for b in baselines if (pair, b, t0) in means]
        if not others:
            continue
        acc = relative_gain(ours["accuracy"], [o["accuracy"] for o in others], True)
        loss = relative_gain(
            ours["max_test_loss"], [o["max_test_loss"] for o in others], False
        )
        jains = " | ".join(
            f"{relative_gain(ours[j], [o[j] for o in others], True):+.2f}"
            for j, _, _ in JAIN_READINGS
        )
        lines.append(f"| {pair} | {t0} | {acc:+.2f} | {loss:+.2f} | {jains} |")
    when = "at the first client's T0-th upload" if suffix else "at the end"
    lines += [
        "",
        f"Metrics read {when}.",
        "",
        f"Paper (CNN, vs second best): accuracy +{PAPER_CNN['accuracy']}%, "
        f"max test loss {PAPER_CNN['max_test_loss']}% lower, Jain "
        f"+{PAPER_CNN['jain']}%.",
    ]
    text = "\n".join(lines) + "\n"
    (out / "table.md").write_text(text)
    return text


def write_plots(rows: list[dict[str, Any]], out: Path, suffix: str = "") -> None:
    """Write one figure per metric vs T0, one panel per pair.

    One line per policy (the seeds' mean) with a band of ± one sample std when
    there are several seeds.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    means = aggregate(rows, suffix)
    pairs = sorted({k[0] for k in means})
    for metric, label, fname in (
        ("accuracy", "PL test accuracy", "accuracy_vs_t0.png"),
        ("jain", "Jain's index of PL training losses", "jain_vs_t0.png"),
        ("jain_reg", "Jain, PL train loss + λ/2·‖ω̂−ϖ‖", "jain_reg_vs_t0.png"),
        ("max_test_loss", "max client PL test loss", "max_loss_vs_t0.png"),
    ):
        fig, axes = plt.subplots(
            1, len(pairs), figsize=(5 * len(pairs), 3.6), squeeze=False
        )
        for ax, pair in zip(axes[0], pairs, strict=True):
            for policy in POLICIES:
                pts = sorted(
                    (t0, m[metric], m[metric + "_std"])
                    for (p, pol, t0), m in means.items()
                    if p == pair and pol == policy
                )
                if not pts:
                    continue
                t0s, mean, std = (np.array(v) for v in zip(*pts, strict=True))
                (line,) = ax.plot(t0s, mean, marker="o", label=policy)
                if np.isfinite(std).any():  # ± one sample std over the seeds
                    ax.fill_between(
                        t0s, mean - std, mean + std, color=line.get_color(), alpha=0.15
                    )
            ax.set_title(pair)
            ax.set_xlabel("T0 (max uploads per client)")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / fname, dpi=120)
        plt.close(fig)
