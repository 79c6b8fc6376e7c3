"""Compare scheduling policies on one config: same seed, one table, overlaid plots.

``rayfl compare CONFIG --policies random,round_robin,...`` runs the config once per
policy (``scheduler.policy`` overridden, everything else equal, same seed) in one
Ray session; a config with a ``sweep`` section (``rayfl run``) runs the grid of its
values the same way. Both write ``<output.dir>/compare-<name>-<timestamp>/``:

| file | content |
|------|---------|
| ``table.csv`` / ``table.md`` | per policy: final accuracy, max client test loss, Jain's index, total latency, energy, bits |
| ``plots/*.png`` | every run's curves overlaid |
| ``<name>-<policy>-*/`` | each run's own directory |
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rayfl.config import RunConfig, load_config, parse_overrides
from rayfl.plots import plot_rounds
from rayfl.results import atomic_write, make_run_dir
from rayfl.runner import run
from rayfl.session import RaySession

__all__ = ["compare", "markdown_table", "run_variants", "sweep"]


def _row(policy: str, summary: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    final = summary.get("final", {})
    totals = summary.get("totals", {})
    return {
        "policy": policy,
        "final_acc": final.get("eval_acc"),
        "max_test_loss": final.get("eval_max_loss"),
        "jain_train_loss": final.get("jain_train_loss"),
        "total_latency_s": totals.get("latency_s"),
        "total_energy_j": totals.get("energy_j"),
        "total_bits": totals.get("bits"),
        "epsilon_max": summary.get("privacy", {}).get("epsilon_max"),
        "run_dir": run_dir.name,
    }


def markdown_table(table: pd.DataFrame) -> str:
    """Return ``table`` as a GitHub markdown table (floats to 4 significant digits).

    Example:
        >>> print(markdown_table(pd.DataFrame({"a": ["x"], "b": [0.123456]})))
        | a | b |
        |---|---|
        | x | 0.1235 |
    """

    def cell(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += [
        "| " + " | ".join(cell(v) for v in row) + " |"
        for row in table.itertuples(index=False)
    ]
    return "\n".join(lines)


def run_variants(
    base: RunConfig,
    variants: Sequence[tuple[str, dict[str, Any]]],
    *,
    label: str = "variant",
) -> tuple[pd.DataFrame, Path]:
    """Run ``base`` once per variant (label, overrides) in one Ray session.

    Every variant is validated before any runs. Each run's directory is made
    inside ``<output.dir>/compare-<name>-<timestamp>/``.

    Returns:
        The table (one row per variant, first column named ``label``) and the
        comparison directory.
    """
    if not variants:
        raise ValueError("nothing to compare: no variants given")
    for _, extra in variants:
        load_config(base, extra)
    out = make_run_dir(base.output.dir, f"compare-{base.name}")
    session = RaySession(base.ray)
    rows, curves = [], {}
    try:
        for name, extra in variants:
            tag = name.replace("=", "_").replace(".", "-").replace(" ", "")
            result = run(
                base,
                {
                    **extra,
                    "sweep": {},
                    "name": f"{base.name}-{tag}",
                    "output.dir": str(out),
                },
            )
            row = _row(name, result.summary, result.run_dir)
            rows.append({label: row.pop("policy"), **row})
            curves[name] = result.rounds
    finally:
        session.close()
    table = pd.DataFrame(rows).dropna(axis=1, how="all")  # e.g. no ε without DP
    atomic_write(out / "table.csv", lambda p: table.to_csv(p, index=False))
    text = markdown_table(table.drop(columns=["run_dir"]))
    atomic_write(out / "table.md", lambda p: p.write_text(text + "\n"))
    plot_rounds(curves, out / "plots")
    return table, out


def compare(
    config: str | Path | Mapping[str, Any] | RunConfig,
    policies: Sequence[str],
    overrides: Sequence[str] | Mapping[str, Any] = (),
) -> tuple[pd.DataFrame, Path]:
    """Run ``config`` once per scheduling policy (same seed) and tabulate.

    Args:
        config: The base config (its ``scheduler.policy`` is overridden).
        policies: Policy names (built-in or registered in ``policies.POLICIES``).
        overrides: Config overrides applied to every run.

    Returns:
        The comparison table and the directory it was written to.

    Raises:
        ConfigError: If a variant's config is invalid (checked before anything runs).
        ValueError: If ``policies`` is empty.
    """
    extra = (
        dict(overrides)
        if isinstance(overrides, Mapping)
        else parse_overrides(overrides)
    )
    base = load_config(config, extra)
    variants = [(p, {"scheduler.policy": p}) for p in policies]
    return run_variants(base, variants, label="policy")


def sweep(config: RunConfig) -> tuple[pd.DataFrame, Path]:
    """Run the grid of ``config.sweep`` (dotted key → list of values).

    Example:
        ``sweep: {privacy.epsilon: [1, 4, null]}`` runs three variants labelled
        ``privacy.epsilon=1`` and so on.
    """
    keys = list(config.sweep)
    variants = []
    for values in itertools.product(*(config.sweep[k] for k in keys)):
        label = ", ".join(
            f"{k}={'inf' if v is None else v}"
            for k, v in zip(keys, values, strict=True)
        )
        variants.append((label, dict(zip(keys, values, strict=True))))
    return run_variants(config, variants)
