"""Statistics of ``rayfl bench policies``: CIs, paired wins, the surrogate check.

Pure pandas/numpy/scipy on the per-episode table (one row per scenario, mode,
policy, seed). Every policy plays the same held-out seeds, so comparisons are
paired by seed.

| quantity | definition |
|----------|------------|
| 95% CI of a mean | mean ± t_{0.975, n−1}·s/√n (Student t, s with ddof = 1) |
| paired difference | policy − reference on the same seed; its mean and 95% t-CI; ``p_value`` of the paired t-test |
| wins / losses / ties | seeds where the policy's return is above / below / equal to the reference's |
| best heuristic | the policy with the best held-out mean return among all but the learned ones: the papers' policies, the heuristics, ``constant_tuned`` and the ``<policy>_tuned`` rows (``--self-tune``) |
| Bonferroni p | ``p_vs_best`` × m (at most 1) for each of the m trained policies (``learned``, ``learned_<name>``) of a scenario and mode: the attempts scored against the same best heuristic; NaN for the other rows |
| Spearman's ρ | rank correlation of the per-policy mean returns in the two modes |
| fit for training | ρ ≥ 0.9 and every difference to the best heuristic that is significant in emulate mode (CI excludes 0) has the same sign in surrogate mode |
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats

from rayfl.registry import LEARNED_POLICY

__all__ = [
    "KPIS",
    "LEARNED",
    "best_heuristic",
    "mean_ci",
    "paired",
    "summarise",
    "surrogate_check",
]

#: The fixed KPIs (columns of the episode table) besides ``return``.
KPIS = (
    "max_client_loss",
    "jain",
    "accuracy",
    "energy_j",
    "latency_s",
    "epsilon",
)

#: Policies that are not heuristics (never the "best heuristic").
LEARNED = (LEARNED_POLICY, f"{LEARNED_POLICY}_untrained")

SPEARMAN_MIN = 0.9


def mean_ci(values: npt.ArrayLike, level: float = 0.95) -> tuple[float, float, float]:
    """Return (mean, low, high) of the Student-t confidence interval of the mean.

    NaN values are dropped; one value gives a CI of NaN.

    Example:
        >>> [round(v, 4) for v in mean_ci([1.0, 2.0, 3.0])]
        [2.0, -0.4841, 4.4841]
    """
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if x.size < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1))
    half /= math.sqrt(x.size)
    return mean, mean - half, mean + half


def paired(values: npt.ArrayLike, reference: npt.ArrayLike) -> dict[str, float | int]:
    """Paired comparison of ``values`` with ``reference`` (same seeds, same order).

    Returns:
        ``diff_mean``, ``diff_ci_low``, ``diff_ci_high``, ``p_value`` (paired
        t-test; NaN for fewer than 2 seeds or constant differences),
        ``wins``, ``losses``, ``ties``.

    Example:
        >>> out = paired([3.0, 2.0, 5.0], [1.0, 2.0, 4.0])
        >>> out["wins"], out["losses"], out["ties"], out["diff_mean"]
        (2, 0, 1, 1.0)
    """
    a = np.asarray(values, dtype=np.float64)
    b = np.asarray(reference, dtype=np.float64)
    diff = a - b
    mean, low, high = mean_ci(diff)
    p = math.nan
    if diff.size >= 2 and np.ptp(diff) > 0:
        p = float(stats.ttest_rel(a, b).pvalue)
    return {
        "diff_mean": mean,
        "diff_ci_low": low,
        "diff_ci_high": high,
        "p_value": p,
        "wins": int((diff > 0).sum()),
        "losses": int((diff < 0).sum()),
        "ties": int((diff == 0).sum()),
    }


def best_heuristic(episodes: pd.DataFrame) -> str:
    """The heuristic (any policy but the learned ones) with the best mean return.

    Learned: :data:`LEARNED` and every ``learned_<name>`` label (``--learned``).
    The tuned rows (``constant_tuned``, ``<policy>_tuned``) are heuristics.
    """
    policy = episodes["policy"].astype(str)
    means = episodes[~_learned(policy)].groupby("policy")["return"]
    return str(means.mean().idxmax())


def _learned(policy: pd.Series) -> pd.Series:
    """True for the learned labels: :data:`LEARNED` and ``learned_<name>``."""
    return policy.isin(LEARNED) | policy.str.startswith(f"{LEARNED_POLICY}_")


def _trained(label: str) -> bool:
    """True for a trained policy's label: ``learned`` or ``learned_<name>``."""
    learned = label == LEARNED_POLICY or label.startswith(f"{LEARNED_POLICY}_")
    return learned and label != f"{LEARNED_POLICY}_untrained"


def summarise(episodes: pd.DataFrame, reference: str | None = None) -> pd.DataFrame:
    """One row per (scenario, mode, policy): KPI means and CIs, paired to the best.

    Args:
        episodes: One row per (scenario, mode, policy, seed) with ``return`` and
            the :data:`KPIS`.
        reference: The policy to pair with (default: each scenario and mode's
            :func:`best_heuristic`).

    Returns:
        Columns ``scenario, topology, mode, policy, seeds``, then for
        ``return`` and each KPI ``<kpi>_mean, <kpi>_ci_low, <kpi>_ci_high``,
        then ``best_heuristic`` and the :func:`paired` columns of the return
        against it (``wins_vs_best`` …), and ``p_vs_best_bonferroni`` (the
        trained policies' p × their number, at most 1; NaN for the others).
    """
    rows = []
    for (scenario, mode), group in episodes.groupby(["scenario", "mode"], sort=False):
        ref = reference or best_heuristic(group)
        attempts = sum(_trained(str(p)) for p in group["policy"].unique())
        ref_returns = group[group["policy"] == ref].set_index("seed")["return"]
        for policy, sub in group.groupby("policy", sort=False):
            row: dict[str, object] = {
                "scenario": scenario,
                "topology": sub["topology"].iloc[0],
                "mode": mode,
                "policy": policy,
                "seeds": int(sub["seed"].nunique()),
            }
            for kpi in ("return", *KPIS):
                mean, low, high = mean_ci(sub[kpi])
                row |= {
                    f"{kpi}_mean": mean,
                    f"{kpi}_ci_low": low,
                    f"{kpi}_ci_high": high,
                }
            mine = sub.set_index("seed")["return"]
            common = mine.index.intersection(ref_returns.index)
            pair = paired(mine[common].to_numpy(), ref_returns[common].to_numpy())
            row["best_heuristic"] = ref
            row |= {
                "diff_vs_best_mean": pair["diff_mean"],
                "diff_vs_best_ci_low": pair["diff_ci_low"],
                "diff_vs_best_ci_high": pair["diff_ci_high"],
                "p_vs_best": pair["p_value"],
                "wins_vs_best": pair["wins"],
                "losses_vs_best": pair["losses"],
                "ties_vs_best": pair["ties"],
            }
            row["p_vs_best_bonferroni"] = (
                min(1.0, float(pair["p_value"]) * attempts)
                if _trained(str(policy))
                else math.nan
            )
            rows.append(row)
    return pd.DataFrame(rows)


def surrogate_check(episodes: pd.DataFrame) -> pd.DataFrame:
    """Compare the surrogate with the emulation, per scenario run in both modes.

    The reference of the paired differences is the emulation's best heuristic,
    used in both modes, so the signs are comparable.

    Returns:
        One row per (scenario, policy): ``return_surrogate``,
        ``return_emulate``, ``return_error`` (surrogate − emulate),
        ``reference``, ``diff_surrogate`` / ``diff_emulate`` with their CIs,
        ``significant_emulate`` (the emulate CI excludes 0), ``same_sign``,
        and per scenario ``spearman`` (ρ of the per-policy means),
        ``fit_for_training`` and ``reason``.
    """
    out = []
    for scenario, group in episodes.groupby("scenario", sort=False):
        modes = set(group["mode"])
        if modes != {"surrogate", "emulate"}:
            continue
        emulate = group[group["mode"] == "emulate"]
        ref = best_heuristic(emulate)
        rows = [
            _check_row(group, scenario, policy, ref)
            for policy in group["policy"].unique()
        ]
        table = pd.DataFrame(rows)
        rho = float(
            stats.spearmanr(table["return_surrogate"], table["return_emulate"])[0]
        )
        flips = table[table["significant_emulate"] & ~table["same_sign"]]
        fit = rho >= SPEARMAN_MIN and flips.empty
        reason = _reason(rho, list(flips["policy"]))
        out.append(table.assign(spearman=rho, fit_for_training=fit, reason=reason))
    if not out:
        return pd.DataFrame()
    return pd.concat(out, ignore_index=True)


def _check_row(
    group: pd.DataFrame, scenario: object, policy: object, ref: str
) -> dict[str, object]:
    """One policy's row of :func:`surrogate_check`."""
    row: dict[str, object] = {"scenario": scenario, "policy": policy, "reference": ref}
    means, diffs, emulate_ci = {}, {}, (math.nan, math.nan)
    for mode in ("surrogate", "emulate"):
        sub = group[group["mode"] == mode]
        mine = sub[sub["policy"] == policy].set_index("seed")["return"]
        base = sub[sub["policy"] == ref].set_index("seed")["return"]
        common = mine.index.intersection(base.index)
        pair = paired(mine[common].to_numpy(), base[common].to_numpy())
        means[mode], diffs[mode] = float(mine.mean()), float(pair["diff_mean"])
        low, high = float(pair["diff_ci_low"]), float(pair["diff_ci_high"])
        if mode == "emulate":
            emulate_ci = (low, high)
        row |= {
            f"return_{mode}": means[mode],
            f"diff_{mode}": diffs[mode],
            f"diff_{mode}_ci_low": low,
            f"diff_{mode}_ci_high": high,
        }
    row["return_error"] = means["surrogate"] - means["emulate"]
    row["significant_emulate"] = bool(emulate_ci[0] > 0 or emulate_ci[1] < 0)
    row["same_sign"] = bool(np.sign(diffs["surrogate"]) == np.sign(diffs["emulate"]))
    return row


def _reason(rho: float, flipped: Sequence[str]) -> str:
    parts = []
    if not rho >= SPEARMAN_MIN:
        parts.append(f"spearman {rho:.2f} < {SPEARMAN_MIN}")
    if flipped:
        parts.append("sign flipped vs emulate for " + ", ".join(flipped))
    return "; ".join(parts) or "ok"
