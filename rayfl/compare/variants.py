"""Compare scheduling policies on one config: same seed, one table, overlaid plots.

``rayfl compare CONFIG --policies random,round_robin,...`` runs the config once per
policy; ``--algorithms fedavg,ditto,...`` runs it once per FL algorithm (see
:func:`compare_algorithms`) (``scheduler.policy`` overridden, everything else equal, same seed) in one
Ray session; a config with a ``sweep`` section (``rayfl run``) runs the grid of its
values the same way. Both write ``<output.dir>/compare-<name>-<timestamp>/``:

| file | content |
|------|---------|
| ``table.csv`` / ``table.md`` | per policy: final accuracy, max client test loss, Jain's index, total latency, energy, bits (per algorithm also: mean / worst-10 % / Jain's index of the clients' personalized test accuracy, downlink bits) |
| ``plots/*.png`` | every run's curves overlaid |
| ``<name>-<policy>-*/`` | each run's own directory |
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pandas as pd

from rayfl.cluster.session import RaySession
from rayfl.compare.progress import RowLog
from rayfl.config import ConfigError, RunConfig, load_config
from rayfl.config.loader import clip, load_yaml
from rayfl.rundir.plots import plot_rounds
from rayfl.rundir.results import atomic_write, make_run_dir
from rayfl.runner import run

__all__ = [
    "check_policy_builds",
    "compare",
    "compare_algorithms",
    "config_context",
    "load_base",
    "markdown_table",
    "run_variants",
    "sort_by_policy",
    "sweep",
]


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


def sort_by_policy(
    table: pd.DataFrame,
    policies: Sequence[str],
    *,
    first: Sequence[str] = (),
    then: Sequence[str] = (),
) -> pd.DataFrame:
    """Sort rows by ``first`` columns, then ``policy`` in the given order, then ``then``.

    Example:
        >>> t = pd.DataFrame({"policy": ["b", "a", "b"], "seed": [1, 0, 0]})
        >>> sort_by_policy(t, ["b", "a"], first=["seed"]).values.tolist()
        [['b', 0], ['a', 0], ['b', 1]]
    """
    order = {name: i for i, name in enumerate(policies)}
    return table.sort_values(
        [*first, "policy", *then],
        key=lambda c: c.map(order) if c.name == "policy" else c,
    ).reset_index(drop=True)


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
    extra_columns: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    log: RowLog | None = None,
) -> tuple[pd.DataFrame, Path]:
    """Run ``base`` once per variant (label, overrides) in one Ray session.

    Every variant is validated before any runs. Each run's directory is made
    inside ``<output.dir>/compare-<name>-<timestamp>/``. ``extra_columns`` maps a
    run's summary to more table columns (placed before ``run_dir``). A progress
    bar counts the runs, and ``table.csv`` holds every finished run's row as soon
    as it finishes (:class:`~rayfl.compare.progress.RowLog`); ``log``, when
    given (``compare --seeds``), takes the rows and the bar instead.

    Returns:
        The table (one row per variant, first column named ``label``) and the
        comparison directory.

    Raises:
        CompareFailed: A run failed or was interrupted (the rows done are kept).
    """
    if not variants:
        raise ValueError("nothing to compare: no variants given")
    for _, extra in variants:
        check_policy_builds(load_config(base, extra))
    out = make_run_dir(base.output.dir, f"compare-{base.name}")
    own = log is None
    if log is None:
        log = RowLog(
            [out / "table.csv"],
            total=len(variants),
            desc=f"compare {base.name}",
            progress=base.output.progress,
        )
    session = RaySession(base.ray)
    rows, curves = [], {}
    try:
        with log.guard() if own else nullcontext(log):
            for name, extra in variants:
                log.describe(name)
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
                more = extra_columns(result.summary) if extra_columns else {}
                run_dir = row.pop("run_dir")
                rows.append(
                    {label: row.pop("policy"), **row, **more, "run_dir": run_dir}
                )
                curves[name] = result.rounds
                log.add(rows[-1])
    finally:
        session.close()
    table = pd.DataFrame(rows).dropna(axis=1, how="all")  # e.g. no ε without DP
    atomic_write(out / "table.csv", lambda p: table.to_csv(p, index=False))
    text = markdown_table(table.drop(columns=["run_dir"]))
    atomic_write(out / "table.md", lambda p: p.write_text(text + "\n"))
    plot_rounds(curves, out / "plots")
    return table, out


def check_policy_builds(cfg: RunConfig) -> None:
    """Build ``cfg``'s policy on the run's spaces, without an FL system.

    So a policy that cannot act in this run (e.g. ``minmax`` with an algorithm
    whose controls it cannot set, or a ``learned`` checkpoint that is missing
    or untrained) fails in a second, before any run of a comparison starts.
    The policy gets a context as a run gives it (the algorithm's
    ``control_names``, the link constants; the model size is not known yet).
    The topology plug-in's ``check_policy_build`` hook does it (the star's
    builds on the scheduling env's spaces); others leave it to the config check.

    Raises:
        ConfigError: Naming the policy, the algorithm and the reason.
    """
    from rayfl.config import ConfigError
    from rayfl.registry import topology_of

    name = cfg.scheduler.policy
    try:
        topology_of(cfg).check_policy_build(cfg)
    except (ValueError, TypeError, FileNotFoundError) as e:
        raise ConfigError(
            f"scheduler.policy={name} cannot run with algorithm.kind="
            f"{cfg.algorithm.kind}: {e}"
        ) from e


def config_context(cfg: RunConfig) -> Any:
    """The context ``cfg``'s policy gets, from the config alone (no system built).

    The topology plug-in's ``context(cfg)`` hook: the star's gives the link
    constants of ``wireless`` and the algorithm's ``control_names``; the model
    size is 1 (not known before the model is built).
    """
    from rayfl.registry import topology_of

    return topology_of(cfg).context(cfg)


def load_base(
    config: str | Path | Mapping[str, Any] | RunConfig,
    overrides: Sequence[str] | Mapping[str, Any] = (),
) -> RunConfig:
    """The base config of a comparison; one with a ``sweep:`` is refused.

    A comparison runs the base once per policy, algorithm or seed: a sweep in
    it would be dropped without a word, so it is an error instead.

    Raises:
        ConfigError: For an invalid config or one with a sweep.
    """
    base = load_config(config, overrides)
    if base.sweep:
        axes = ", ".join(base.sweep)
        raise ConfigError(
            f"compare runs the config once per variant; its sweep over {axes} "
            "would be ignored: remove the sweep (or add the override sweep={}), or "
            "run the sweep with `rayfl run`"
        )
    return base


def compare(
    config: str | Path | Mapping[str, Any] | RunConfig,
    policies: Sequence[str],
    overrides: Sequence[str] | Mapping[str, Any] = (),
    *,
    log: RowLog | None = None,
) -> tuple[pd.DataFrame, Path]:
    """Run ``config`` once per scheduling policy (same seed) and tabulate.

    Args:
        config: The base config (its ``scheduler.policy`` is overridden).
        policies: Policy names (built-in or registered in ``policies.POLICIES``).
        overrides: Config overrides applied to every run.
        log: Where finished rows go at once (default: ``table.csv`` and a bar).

    Returns:
        The comparison table and the directory it was written to.

    Raises:
        ConfigError: If a variant's config is invalid (checked before anything runs).
        ValueError: If ``policies`` is empty.
    """
    base = load_base(config, overrides)
    variants = [policy_variant(base, p) for p in policies]
    names = [name for name, _ in variants]
    variants = [  # the same policy twice (two checkpoints): label by the full entry
        (spec if names.count(name) > 1 else name, extra)
        for spec, (name, extra) in zip(policies, variants, strict=True)
    ]
    return run_variants(base, variants, label="policy", log=log)


def policy_variant(base: RunConfig, spec: str) -> tuple[str, dict[str, Any]]:
    """Return the (label, overrides) of one ``--policies`` entry.

    An entry is a policy name, optionally followed by ``:key=value`` parameters
    that apply to that policy only (values parsed as YAML), merged over the
    config's ``scheduler.params``; e.g. ``learned:checkpoint=runs/train-x``.
    The label is the name (the full entry when a name appears twice).

    Raises:
        ValueError: A parameter without ``=`` or an empty name.
    """
    name, *pairs = spec.split(":")
    if not name:
        raise ValueError(f"policy entry {spec!r} has no name")
    extra: dict[str, Any] = {"scheduler.policy": name}
    if pairs:
        params = dict(base.scheduler.params)
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise ValueError(
                    f"policy entry {clip(spec)}: parameters are name:key=value, "
                    f"got {clip(pair)}"
                )
            params[key] = load_yaml(
                value, f"policy entry {clip(spec)}", lines=False, root=key
            )
        extra["scheduler.params"] = params
    return name, extra


def _algorithm_columns(summary: dict[str, Any]) -> dict[str, Any]:
    final = summary.get("final", {})
    return {
        "mean_personal_acc": final.get("eval_mean_acc"),
        "worst10_personal_acc": final.get("eval_worst10_acc"),
        "jain_personal_acc": final.get("eval_jain_acc"),
        "global_acc": final.get("global_acc"),
        "total_download_bits": summary.get("totals", {}).get("download_bits"),
    }


def compare_algorithms(
    config: str | Path | Mapping[str, Any] | RunConfig,
    algorithms: Sequence[str],
    overrides: Sequence[str] | Mapping[str, Any] = (),
    *,
    log: RowLog | None = None,
) -> tuple[pd.DataFrame, Path]:
    """Run ``config`` once per FL algorithm (same seed, data, model) and tabulate.

    Each run's ``algorithm`` section is ``{kind: <name>}`` plus the shared local
    training fields of the config's own ``algorithm`` section (``local_epochs``,
    ``local_steps``, ``batch_size``, ``lr``, ``trainer``); the algorithm named by
    the config's ``algorithm.kind`` keeps its whole section. Other fields take
    each algorithm's defaults. Besides :func:`compare`'s columns the table has
    the clients' personalized test accuracy (the personal model when the
    algorithm has one, else the global model on each client's test split): its
    unweighted mean, worst-10 % mean and Jain's index.

    Args:
        config: The base config.
        algorithms: ``algorithm.kind`` names (see ``rayfl.algorithms.ALGORITHMS``).
        overrides: Config overrides applied before the algorithm is swapped.
        log: Where finished rows go at once (default: ``table.csv`` and a bar).

    Returns:
        The comparison table and the directory it was written to.

    Raises:
        ConfigError: If a variant's config is invalid (checked before anything runs).
        ValueError: If ``algorithms`` is empty.
    """
    from rayfl.algorithms.config import LocalTrainingConfig

    base = load_base(config, overrides)
    own = base.algorithm.model_dump()
    shared = {
        k: own[k] for k in LocalTrainingConfig.model_fields if k in own and k != "kind"
    }
    variants = [
        (a, {"algorithm": own if a == base.algorithm.kind else {**shared, "kind": a}})
        for a in algorithms
    ]
    return run_variants(
        base, variants, label="algorithm", extra_columns=_algorithm_columns, log=log
    )


def sweep(config: RunConfig) -> tuple[pd.DataFrame, Path]:
    """Run the grid of ``config.sweep`` (dotted key → list of values).

    Example:
        ``sweep: {privacy.epsilon: [1, 4, null]}`` runs three variants labelled
        ``privacy.epsilon=1`` and so on.

    Axes an override replaced (``config.replaced_sweep``, see
    :mod:`rayfl.config.sweep`) are recorded in each run's ``summary.json``.
    """
    from rayfl.config.sweep import record_replaced_sweep

    keys = list(config.sweep)
    variants = []
    for values in itertools.product(*(config.sweep[k] for k in keys)):
        label = ", ".join(
            f"{k}={'inf' if v is None else v}"
            for k, v in zip(keys, values, strict=True)
        )
        variants.append((label, dict(zip(keys, values, strict=True))))
    table, out = run_variants(config, variants)
    for run_dir in table["run_dir"]:  # an override replaced an axis: say so
        record_replaced_sweep(out / run_dir, config.replaced_sweep)
    return table, out
