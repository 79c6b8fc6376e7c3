"""Reproduce H2FDP's trends on real Fashion-MNIST (spec seed_004 §7, Figs. 4–6).

For each seed, one set of actors (50 devices, 10 edge actors, 1 cloud actor)
runs every variant in turn (``HierarchicalRound.reset``): accuracy vs global
round for trusted fraction p_c ∈ {0, 0.5, 1} and each ε; HFL without DP; and
energy / delay with and without adaptive control (Algorithm 1 vs 2) next to
HFL-DP and PEDPFL (its own one-aggregator system).

Outputs (in ``--out``):

- ``results.csv``: one row per (variant, seed): final accuracy, total energy
  and delay, energy / delay / round to ``--target-acc`` (75 %, the paper's)
  and to ``--low-target-acc`` (70 %), mean τ_k and s_c^k,
  the noise std per coordinate of the first round, the ledger's worst-observer
  ε, rounds, the run's wall time ``wall_s`` and, for H2FDP rows,
  ``acc_gain_vs_p0`` (final accuracy minus that of p_c = 0 at the same ε and
  seed).
- ``reductions.csv``: energy / delay saved by adaptive control against each
  baseline, per seed (whole run and until each target accuracy).
- ``curves.csv``: one row per (variant, seed, global round): cumulative
  energy / delay, τ_k, s_c^k, η_k, noise stds, accuracy at evaluated rounds.
- ``table.md`` (mean ± std over seeds), ``accuracy_vs_rounds.png`` and
  ``energy_delay.png``.
- with ``--equal-privacy`` (after the sweep, same ``--out``) only
  ``equal_privacy.csv``: PEDPFL and HFL-DP with their noise set for the ledger
  ε of the same seed's H2FDP with control, next to that run and to HFL-DP and
  PEDPFL at nominal ε (see ``equal_privacy``).

Re-running with the same ``--out`` skips every (seed, variant) already in
``curves.csv`` at the same ``--rounds``, so a sweep can be extended by seeds or
ε values; use a fresh ``--out`` after changing the config or ``--override``.
``h2fdp_noctrl`` (Algorithm 2) and ``hfl_dp`` are the sweep's runs at
(``--control-fraction``, ``--control-eps``) and (p_c = 0, ``--control-eps``)
when the sweep has them (same seed ⇒ the same run), so they are not run twice.

Run (as in docs/reproductions/h2fdp.md):
    python examples/reproduce_h2fdp.py --rounds 50 --seeds 0 1 2 \
        --eps 0.5 1 2 8 32 128 --control-eps 32 --out docs/h2fdp
PEDPFL and HFL-DP at equal ledger ε (writes equal_privacy.csv):
    python examples/reproduce_h2fdp.py --rounds 50 --seeds 0 1 2 \
        --equal-privacy --out docs/h2fdp --override ray.num_cpus=1
Smaller:
    python examples/reproduce_h2fdp.py --rounds 30 --eps 1 --fractions 0 1
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rayfl.config import load_config
from rayfl.engine import Engine, build_system
from rayfl.hierarchy.topology import build_topology
from rayfl.metrics import round_summary
from rayfl.privacy.gaussian import accountant_noise_multiplier
from rayfl.session import RaySession

PAPER_FIG5 = {  # F-MNIST reductions of H2FDP(ctrl) vs each baseline (spec §7)
    "energy": {"h2fdp": 25.1, "hfl_dp": 46.2, "pedpfl": 71.5},
    "delay": {"h2fdp": 24.9, "hfl_dp": 43.2, "pedpfl": 51.3},
}
CONTROL_METHODS = ("h2fdp_ctrl", "h2fdp_noctrl", "hfl_dp", "pedpfl")
EQUAL_BASELINES = ("h2fdp_ctrl", "hfl_dp", "pedpfl")  # rows of equal_privacy.csv
PEDPFL_EQUAL = "pedpfl (equal ledger ε)"
HFL_DP_EQUAL = "hfl_dp (equal ledger ε)"


@dataclass(frozen=True)
class Variant:
    """One run of the plan.

    Attributes:
        label: Row name in the CSVs (``variant`` column).
        method: ``h2fdp``, ``hfl``, ``h2fdp_ctrl``, ``h2fdp_noctrl``,
            ``hfl_dp`` or ``pedpfl``.
        eps: Nominal ε per stream (inf without DP).
        fraction: Trusted fraction p_c (NaN for HFL without DP).
        same_as: Label of an earlier variant that is the identical run
            (its rows are copied), or None.
    """

    label: str
    method: str
    eps: float
    fraction: float
    same_as: str | None = None


def _args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="examples/h2fdp_fmnist.yaml")
    p.add_argument("--rounds", type=int, default=100, help="global rounds K_g")
    p.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=None,
        help="run seeds (default: the config's seed); finished runs are skipped",
    )
    p.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    p.add_argument("--fractions", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--target-acc", type=float, default=0.75, help="Fig. 5 target")
    p.add_argument(
        "--low-target-acc",
        type=float,
        default=0.70,
        help="a second, lower target (``*_to_low_target`` columns)",
    )
    p.add_argument("--control-eps", type=float, default=1.0)
    p.add_argument("--control-fraction", type=float, default=0.5)
    p.add_argument("--no-control", action="store_true", help="skip Fig. 5 runs")
    p.add_argument("--no-pedpfl", action="store_true")
    p.add_argument("--skip-sweep", action="store_true", help="only the Fig. 5 runs")
    p.add_argument(
        "--equal-privacy",
        action="store_true",
        help="only run PEDPFL and HFL-DP with their noise set for the ledger ε of "
        "the same seed's H2FDP with control (read from the curves.csv in --out); "
        "writes equal_privacy.csv there",
    )
    p.add_argument("--out", default="runs/reproduce_h2fdp")
    p.add_argument("--override", nargs="*", default=[], help="key=value overrides")
    return p.parse_args(argv)


def plan(args: argparse.Namespace) -> list[Variant]:
    """The variants of one seed, in run order (PEDPFL last: its own system)."""
    out: list[Variant] = []
    if not args.skip_sweep:
        for eps in args.eps:
            for frac in args.fractions:
                out.append(Variant(f"h2fdp p={frac:g} eps={eps:g}", "h2fdp", eps, frac))
        out.append(Variant("hfl (no DP)", "hfl", np.inf, np.nan))
    if not args.no_control:
        labels = {v.label for v in out}
        eps, frac = args.control_eps, args.control_fraction
        same = f"h2fdp p={frac:g} eps={eps:g}"
        out.append(
            Variant("h2fdp_noctrl", "h2fdp_noctrl", eps, frac, _if(same, labels))
        )
        out.append(Variant("h2fdp_ctrl", "h2fdp_ctrl", eps, frac))
        same = f"h2fdp p=0 eps={eps:g}"
        out.append(Variant("hfl_dp", "hfl_dp", eps, 0.0, _if(same, labels)))
        if not args.no_pedpfl:
            out.append(Variant("pedpfl", "pedpfl", eps, 0.0))
    return out


def _if(label: str, labels: set[str]) -> str | None:
    return label if label in labels else None


def done_labels(curves: pd.DataFrame, seed: int, rounds: int) -> set[str]:
    """Variants of ``seed`` already complete at ``rounds`` global rounds."""
    if curves.empty:
        return set()
    d = curves[(curves["seed"] == seed) & (curves["rounds"] == rounds)]
    counts = d.groupby("variant")["round"].nunique()
    return set(counts[counts == rounds].index)


def _run(system: Engine, v: Variant, seed: int, rounds: int, every: int) -> list[dict]:
    rows = []
    energy = delay = 0.0
    started = time.perf_counter()
    for k in range(rounds):
        _, extras = system.run_global_round(k)
        energy += extras["energy_j"]
        delay += extras["latency_s"]
        row = {
            "seed": seed,
            "variant": v.label,
            "method": v.method,
            "eps": v.eps,
            "fraction": v.fraction,
            "rounds": rounds,
            "round": k,
            "energy_j_cum": energy,
            "delay_s_cum": delay,
            "tau": extras["tau"],
            "s_trusted": extras["s_trusted_mean"],
            "s_untrusted": extras["s_untrusted_mean"],
            "eta": extras["eta"],
            "sigma_device_local": extras["sigma_device_local"],
            "sigma_device_global": extras["sigma_device_global"],
            "sigma_edge_local": extras["sigma_edge_local"],
            "sigma_edge_global": extras["sigma_edge_global"],
            "global_acc": np.nan,
        }
        if (k + 1) % every == 0 or k == rounds - 1:
            row["global_acc"] = round_summary(system.evaluate(), system.num_test)[
                "global_acc"
            ]
        rows.append(row)
    eps = system.uplink.epsilons()[0]
    wall = time.perf_counter() - started
    print(
        f"seed {seed} {v.label:26s} acc {rows[-1]['global_acc']:.4f}  "
        f"E {energy:8.2f} J  D {delay:8.2f} s  eps_max {np.max(eps):.3g}  "
        f"{wall:.0f} s",
        flush=True,
    )
    for r in rows:
        r["wall_s"] = wall
        r["epsilon_max"] = float(np.max(eps))
    return rows


def _reset(system: Engine, cfg, v: Variant) -> None:
    """Put ``system`` in the state of variant ``v`` (not PEDPFL)."""
    n_edges = len(system.edges)
    if v.method == "hfl":
        system.reset(trusted=np.zeros(n_edges, bool), dp_enabled=False, control=False)
        return
    topo = cfg.topology.model_copy(update={"trusted_fraction": v.fraction})
    trusted = build_topology(topo, system.num_clients, cfg.seed).trusted
    system.reset(
        trusted=trusted,
        dp_enabled=True,
        epsilon=v.eps,
        control=v.method == "h2fdp_ctrl",
    )


def summarise(
    curves: pd.DataFrame, target: float, low_target: float = 0.70
) -> pd.DataFrame:
    """One row per (variant, seed) of ``curves`` (see the module docstring).

    Args:
        curves: Per-round rows as written to ``curves.csv``.
        target: Accuracy for the ``*_to_target`` columns (NaN if never reached).
        low_target: Accuracy for the ``*_to_low_target`` columns.

    Returns:
        The ``results.csv`` table, in the order the runs appear in ``curves``.
    """
    recs = []
    for (_, _), d in curves.groupby(["seed", "variant"], sort=False):
        d = d.sort_values("round")
        last = d.iloc[-1]
        evals = d.dropna(subset=["global_acc"])
        hit = evals[evals["global_acc"] >= target]
        low = evals[evals["global_acc"] >= low_target]
        first = d.iloc[0]
        s = d[["s_trusted", "s_untrusted"]].to_numpy(dtype=float)
        recs.append(
            {
                "seed": int(last["seed"]),
                "variant": last["variant"],
                "method": last["method"],
                "eps": last["eps"],
                "fraction": last["fraction"],
                "rounds": int(last["rounds"]),
                "final_acc": float(evals["global_acc"].iloc[-1]),
                "energy_j": float(last["energy_j_cum"]),
                "delay_s": float(last["delay_s_cum"]),
                "energy_to_target_j": float(hit["energy_j_cum"].iloc[0])
                if len(hit)
                else np.nan,
                "delay_to_target_s": float(hit["delay_s_cum"].iloc[0])
                if len(hit)
                else np.nan,
                "round_reached": float(hit["round"].iloc[0] + 1)
                if len(hit)
                else np.nan,
                "mean_tau": float(d["tau"].mean()),
                "mean_s": float(np.nanmean(s)) if np.isfinite(s).any() else np.nan,
                "sigma_device_local_r0": float(first["sigma_device_local"]),
                "sigma_edge_local_r0": float(first["sigma_edge_local"]),
                "epsilon_max": float(last["epsilon_max"]),
                "target_acc": target,
                "energy_to_low_target_j": float(low["energy_j_cum"].iloc[0])
                if len(low)
                else np.nan,
                "delay_to_low_target_s": float(low["delay_s_cum"].iloc[0])
                if len(low)
                else np.nan,
                "round_reached_low": float(low["round"].iloc[0] + 1)
                if len(low)
                else np.nan,
                "low_target_acc": low_target,
                "wall_s": float(last["wall_s"]),
            }
        )
    res = pd.DataFrame(recs)
    res["acc_gain_vs_p0"] = np.nan
    h = res["method"] == "h2fdp"
    base = res[h & (res["fraction"] == 0)].set_index(["seed", "eps"])["final_acc"]
    keys = pd.MultiIndex.from_frame(res.loc[h, ["seed", "eps"]])
    res.loc[h, "acc_gain_vs_p0"] = (
        res.loc[h, "final_acc"].to_numpy() - base.reindex(keys).to_numpy()
    )
    return res


def reductions(results: pd.DataFrame) -> pd.DataFrame:
    """Energy / delay saved by adaptive control, per seed (the paper's Fig. 5).

    Args:
        results: The ``results.csv`` table.

    Returns:
        One row per (seed, baseline, metric, basis): ``reduction_pct`` =
        100·(1 − H2FDP(ctrl) / baseline) of the same seed, with basis ``total``
        (the whole run), ``to_target`` or ``to_low_target`` (until the target
        or the low target accuracy; NaN if either run never reaches it), next
        to the paper's F-MNIST value (which is to 75 %).
    """
    recs = []
    for seed, d in results.groupby("seed", sort=False):
        d = d.set_index("variant")
        if "h2fdp_ctrl" not in d.index:
            continue
        ctrl = d.loc["h2fdp_ctrl"]
        for base, key in (
            ("h2fdp_noctrl", "h2fdp"),
            ("hfl_dp", "hfl_dp"),
            ("pedpfl", "pedpfl"),
        ):
            if base not in d.index:
                continue
            for metric, unit in (("energy", "j"), ("delay", "s")):
                for basis, col in (
                    ("total", f"{metric}_{unit}"),
                    ("to_target", f"{metric}_to_target_{unit}"),
                    ("to_low_target", f"{metric}_to_low_target_{unit}"),
                ):
                    recs.append(
                        {
                            "seed": seed,
                            "vs": base,
                            "metric": metric,
                            "basis": basis,
                            "reduction_pct": 100 * (1 - ctrl[col] / d.loc[base, col]),
                            "paper_fmnist_pct": PAPER_FIG5[metric][key],
                        }
                    )
    return pd.DataFrame(recs)


def main(argv: list[str] | None = None) -> None:
    """Run the missing (seed, variant) pairs and write the CSVs, table and plots."""
    args = _args(argv)
    logging.getLogger("absl").setLevel(logging.ERROR)  # dp-accounting's RDP chatter
    if args.equal_privacy:
        equal_privacy(args)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    overrides = [f"rounds={args.rounds}", "topology.edge_eval=false", *args.override]
    cfg = load_config(args.config, overrides)  # validate before Ray starts
    seeds = args.seeds if args.seeds is not None else [cfg.seed]
    path = out / "curves.csv"
    curves = pd.read_csv(path) if path.exists() else pd.DataFrame()
    variants = plan(args)
    todo = {
        s: [v for v in variants if v.label not in done_labels(curves, s, args.rounds)]
        for s in seeds
    }
    if any(todo.values()):
        session = _session(cfg)
        try:
            for seed in seeds:
                if todo[seed]:
                    curves = _seed(args, overrides, seed, todo[seed], curves, out)
        finally:
            session.close()
    else:
        print("every run is already in", path, flush=True)
    keep = curves[
        curves["seed"].isin(seeds)
        & (curves["rounds"] == args.rounds)
        & curves["variant"].isin([v.label for v in variants])
    ]
    results = summarise(keep, args.target_acc, args.low_target_acc)
    results.to_csv(out / "results.csv", index=False, na_rep="nan")
    red = reductions(results)
    if not red.empty:
        red.to_csv(out / "reductions.csv", index=False, na_rep="nan")
    _report(keep, results, args, out)


def _session(cfg) -> RaySession:
    """One Ray session for every run (RaySession retries a start-up timeout)."""
    return RaySession(cfg.ray)


def _save(curves: pd.DataFrame, rows: list[dict], out: Path) -> pd.DataFrame:
    curves = pd.concat([curves, pd.DataFrame(rows)], ignore_index=True)
    curves.to_csv(out / "curves.csv", index=False)
    return curves


def _seed(
    args: argparse.Namespace,
    overrides: list[str],
    seed: int,
    todo: list[Variant],
    curves: pd.DataFrame,
    out: Path,
) -> pd.DataFrame:
    """Run ``todo`` for one seed, saving ``curves.csv`` after every run."""
    cfg = load_config(args.config, [*overrides, f"seed={seed}"])
    hier = [v for v in todo if v.method != "pedpfl"]
    if hier:
        t0 = time.perf_counter()
        system = build_system(cfg)
        print(
            f"seed {seed}: setup {time.perf_counter() - t0:.0f} s; "
            f"model dim {system.dim}",
            flush=True,
        )
        try:
            for v in hier:
                if v.same_as is not None:
                    done = done_labels(curves, seed, args.rounds)
                    if v.same_as in done:
                        src = curves[
                            (curves["seed"] == seed)
                            & (curves["rounds"] == args.rounds)
                            & (curves["variant"] == v.same_as)
                        ]
                        rows = src.assign(variant=v.label, method=v.method)
                        curves = _save(curves, rows.to_dict("records"), out)
                        continue
                _reset(system, cfg, v)
                rows = _run(system, v, seed, args.rounds, args.eval_every)
                curves = _save(curves, rows, out)
        finally:
            system.close()
    if any(v.method == "pedpfl" for v in todo):
        v = next(v for v in todo if v.method == "pedpfl")
        curves = _save(curves, _pedpfl(args, overrides, seed, v), out)
    return curves


def _pedpfl(
    args: argparse.Namespace,
    overrides: list[str],
    seed: int,
    v: Variant,
    extra: tuple[str, ...] = (),
) -> list[dict]:
    """Run PEDPFL (its own one-aggregator system) at ε = ``v.eps``."""
    cfg = load_config(
        args.config,
        [
            *overrides,
            f"seed={seed}",
            "topology.baseline=pedpfl",
            f"topology.dp.epsilon={v.eps!r}",
            *extra,
        ],
    )
    system = build_system(cfg)
    try:
        return _run(system, v, seed, args.rounds, args.eval_every)
    finally:
        system.close()


def equal_privacy(args: argparse.Namespace) -> pd.DataFrame:
    """Run PEDPFL and HFL-DP at the ledger ε of H2FDP with control, per seed.

    The target is the worst-observer ledger ε of the seed's ``h2fdp_ctrl`` run
    in ``--out``/curves.csv. PEDPFL: ``dp.calibration: accountant`` sets its
    noise so that its ledger reaches the target over its ``--rounds``
    releases. HFL-DP keeps eq. 15 at a scaled nominal ε (``_scaled_epsilon``).
    Writes ``equal_privacy.csv``: the new runs next to the ``h2fdp_ctrl``,
    ``hfl_dp`` and ``pedpfl`` rows of the same seed (re-summarised from
    curves.csv, with ``sigma_device_global_r0``), ``target_epsilon`` (the
    seed's H2FDP(ctrl) ledger ε) and ``calibration``. Runs already in the file
    are skipped.

    Returns:
        The ``equal_privacy.csv`` table.
    """
    out = Path(args.out)
    overrides = [f"rounds={args.rounds}", "topology.edge_eval=false", *args.override]
    cfg = load_config(args.config, overrides)
    seeds = args.seeds if args.seeds is not None else [cfg.seed]
    curves = pd.read_csv(out / "curves.csv")
    curves = curves[
        (curves["rounds"] == args.rounds) & curves["variant"].isin(EQUAL_BASELINES)
    ]
    path = out / "equal_privacy.csv"
    table = pd.read_csv(path) if path.exists() else pd.DataFrame()
    session = None
    try:
        for seed in seeds:
            have = (
                set()
                if table.empty
                else set(table.loc[table["seed"] == seed, "variant"])
            )
            if {PEDPFL_EQUAL, HFL_DP_EQUAL} <= have:
                continue
            base = curves[curves["seed"] == seed]
            known = summarise(base, args.target_acc).set_index("variant")
            target = float(known.loc["h2fdp_ctrl", "epsilon_max"])
            session = session or _session(cfg)
            runs = [] if have else [base]
            if PEDPFL_EQUAL not in have:
                v = Variant(PEDPFL_EQUAL, "pedpfl", target, 0.0)
                extra = ("topology.dp.calibration=accountant",)
                runs.append(pd.DataFrame(_pedpfl(args, overrides, seed, v, extra)))
            if HFL_DP_EQUAL not in have:
                eps = _scaled_epsilon(
                    known.loc["hfl_dp"], target, cfg.topology.dp.delta
                )
                v = Variant(HFL_DP_EQUAL, "hfl_dp", eps, 0.0)
                runs.append(pd.DataFrame(_hierarchical(args, overrides, seed, v)))
            both = pd.concat(runs, ignore_index=True)
            rows = summarise(both, args.target_acc, args.low_target_acc)
            first = both.groupby("variant", sort=False)["sigma_device_global"].first()
            rows["sigma_device_global_r0"] = rows["variant"].map(first)
            rows["target_epsilon"] = target
            rows["calibration"] = np.where(
                rows["variant"] == PEDPFL_EQUAL, "accountant", "closed_form"
            )
            table = pd.concat([table, rows], ignore_index=True)
            table.sort_values("seed", kind="stable").to_csv(
                path, index=False, na_rep="nan"
            )
    finally:
        if session is not None:
            session.close()
    return table


def _scaled_epsilon(run: pd.Series, target: float, delta: float) -> float:
    """Nominal ε at which eq. 15 gives ``run``'s variant the ledger ε ``target``.

    Every release is recorded at q = 1, so a client's composed releases are one
    Gaussian mechanism whose z satisfies 1/z² = Σ 1/z_i² (their RDP curves add),
    and its ledger ε depends on that z alone. eq. 15 makes every z_i ∝ 1/ε, so
    the nominal ε scales by z(ledger ε of ``run``) / z(``target``).

    Args:
        run: A ``results.csv`` row of a run without control (``eps``,
            ``epsilon_max``).
        target: Ledger ε wanted.
        delta: δ of the ledger.
    """

    def z(epsilon: float) -> float:
        return accountant_noise_multiplier(
            epsilon=epsilon, delta=delta, sample_rate=1.0, steps=1
        )

    return float(run["eps"]) * z(float(run["epsilon_max"])) / z(target)


def _hierarchical(
    args: argparse.Namespace, overrides: list[str], seed: int, v: Variant
) -> list[dict]:
    """Run one hierarchical variant on a fresh system."""
    cfg = load_config(args.config, [*overrides, f"seed={seed}"])
    system = build_system(cfg)
    try:
        _reset(system, cfg, v)
        return _run(system, v, seed, args.rounds, args.eval_every)
    finally:
        system.close()


def _md(df: pd.DataFrame, index: bool = True, fmt: str = "{:.4g}") -> str:
    """Markdown table without the optional ``tabulate`` dependency."""
    d = df.reset_index() if index else df
    cells = [
        [fmt.format(v) if isinstance(v, float) else str(v) for v in row]
        for row in d.itertuples(index=False)
    ]
    head = "| " + " | ".join(map(str, d.columns)) + " |"
    rule = "|" + "---|" * len(d.columns)
    return "\n".join([head, rule, *("| " + " | ".join(c) + " |" for c in cells)])


def _pm(values: pd.Series) -> str:
    """``mean ± std`` (sample std over seeds; the mean alone for one seed)."""
    v = values.dropna()
    if v.empty:
        return "n/a"
    if len(v) == 1:
        return f"{v.iloc[0]:.4g}"
    return f"{v.mean():.4g} ± {v.std(ddof=1):.2g}"


def _report(
    curves: pd.DataFrame, results: pd.DataFrame, args: argparse.Namespace, out: Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seeds = sorted(results["seed"].unique())
    lines = [
        f"# H2FDP on Fashion-MNIST: {args.rounds} global rounds, "
        f"seeds {', '.join(map(str, seeds))} (mean ± std)\n"
    ]
    if not args.skip_sweep:
        _report_sweep(curves, results, args, out, lines, plt)
    ctrl = results[results["variant"].isin(CONTROL_METHODS)]
    if "h2fdp_ctrl" in set(ctrl["variant"]):
        lines.append(
            f"## Energy and delay (ε={args.control_eps:g}, "
            f"p_c={args.control_fraction:g}; Fig. 5)\n"
        )
        cols = [
            "final_acc",
            "energy_j",
            "delay_s",
            "energy_to_target_j",
            "delay_to_target_s",
            "round_reached",
            "mean_tau",
            "mean_s",
        ]
        by = ctrl.groupby("variant", sort=False)
        cost = pd.DataFrame({c: by[c].apply(_pm) for c in cols})
        lines.append(_md(cost) + "\n")
        mean = by[cols].mean()
        red = reductions(results)
        by_red = red.groupby(["vs", "metric", "basis"], sort=False)
        table = by_red["reduction_pct"].apply(_pm).unstack("basis")
        table["paper_F-MNIST_%"] = (
            by_red["paper_fmnist_pct"].first().unstack("basis")["total"]
        )
        lines.append("### Reductions by adaptive control (%, per seed, mean ± std)\n")
        lines.append(_md(table) + "\n")
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
        for ax, col, unit in (
            (axes[0], "energy_j", "J"),
            (axes[1], "delay_s", "s"),
        ):
            ax.bar(
                mean.index,
                mean[col],
                yerr=by[col].std(ddof=1).reindex(mean.index).fillna(0),
            )
            ax.set(ylabel=f"total {col.split('_')[0]} ({unit})")
            ax.tick_params(axis="x", rotation=20)
        fig.tight_layout()
        fig.savefig(out / "energy_delay.png", dpi=120)
    lines.append(
        "\nWall time per run (s, mean over seeds): "
        + json.dumps(
            {
                k: round(float(v), 1)
                for k, v in results.groupby("variant", sort=False)["wall_s"]
                .mean()
                .items()
            },
            ensure_ascii=False,
        )
        + "\n"
    )
    (out / "table.md").write_text("\n".join(lines))
    print("\n".join(lines))


def _report_sweep(curves, results, args, out, lines, plt) -> None:
    """Accuracy vs rounds per ε (Figs. 4/9) and the final-accuracy table (Fig. 6)."""
    evals = curves.dropna(subset=["global_acc"])
    mean = evals.groupby(["variant", "round"], sort=False)["global_acc"].mean()
    ncols = min(3, len(args.eps))
    nrows = -(-len(args.eps) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(4.2 * ncols, 3.4 * nrows), squeeze=False
    )
    for ax in axes.flat[len(args.eps) :]:
        ax.set_visible(False)
    hfl = mean.get("hfl (no DP)")
    for ax, eps in zip(axes.flat, args.eps, strict=False):
        for frac in args.fractions:
            label = f"h2fdp p={frac:g} eps={eps:g}"
            if label in mean.index.get_level_values(0):
                d = mean.loc[label]
                ax.plot(d.index + 1, d.to_numpy(), label=f"p_c={frac:g}")
        if hfl is not None:
            ax.plot(hfl.index + 1, hfl.to_numpy(), "k--", label="HFL (no DP)")
        ax.set(
            title=f"ε = {eps:g}",
            xlabel="global round k",
            ylabel="test accuracy",
            ylim=(0, 0.9),
        )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "accuracy_vs_rounds.png", dpi=120)
    lines.append("## Final test accuracy (trusted fraction × ε)\n")
    acc = results.groupby("variant", sort=False)["final_acc"]
    table = {
        f"p_c={frac:g}": {
            f"ε={eps:g}": _pm(acc.get_group(label)) if label in acc.groups else "n/a"
            for eps in args.eps
            for label in [f"h2fdp p={frac:g} eps={eps:g}"]
        }
        for frac in args.fractions
    }
    lines.append(_md(pd.DataFrame(table).T) + "\n")
    if "hfl (no DP)" in acc.groups:
        lines.append(f"HFL without DP: {_pm(acc.get_group('hfl (no DP)'))}\n")


if __name__ == "__main__":
    main()
