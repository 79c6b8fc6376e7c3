"""Reproduce H2FDP's trends on real Fashion-MNIST (spec seed_004 §7, Figs. 4–6).

One set of actors (50 devices, 10 edge actors, 1 cloud actor) runs every variant
in turn (``HierarchicalSystem.reset``): accuracy vs global round for trusted
fraction p_c ∈ {0, 0.5, 1} and ε ∈ {0.5, 1, 2}; HFL without DP; and energy /
delay with and without adaptive control (Algorithm 1 vs 2) next to HFL-DP and
PEDPFL (its own one-aggregator system). Writes results.csv, table.md and plots.

Run (full):  python examples/reproduce_h2fdp.py --rounds 100
Smaller:     python examples/reproduce_h2fdp.py --rounds 30 --eps 1 --fractions 0 1
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd

from rayfl.config import load_config
from rayfl.hierarchy.system import HierarchicalSystem
from rayfl.hierarchy.topology import build_topology
from rayfl.metrics import round_summary
from rayfl.session import RaySession

PAPER_FIG5 = {  # F-MNIST reductions of H2FDP(ctrl) vs each baseline (spec §7)
    "energy": {"h2fdp": 25.1, "hfl_dp": 46.2, "pedpfl": 71.5},
    "delay": {"h2fdp": 24.9, "hfl_dp": 43.2, "pedpfl": 51.3},
}


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="examples/h2fdp_fmnist.yaml")
    p.add_argument("--rounds", type=int, default=100, help="global rounds K_g")
    p.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    p.add_argument("--fractions", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--target-acc", type=float, default=0.75, help="Fig. 5 target")
    p.add_argument("--control-eps", type=float, default=1.0)
    p.add_argument("--control-fraction", type=float, default=0.5)
    p.add_argument("--no-control", action="store_true", help="skip Fig. 5 runs")
    p.add_argument("--no-pedpfl", action="store_true")
    p.add_argument("--skip-sweep", action="store_true", help="only the Fig. 5 runs")
    p.add_argument("--out", default="runs/reproduce_h2fdp")
    p.add_argument("--override", nargs="*", default=[], help="key=value overrides")
    return p.parse_args()


def _run(system: HierarchicalSystem, label: str, rounds: int, every: int) -> list[dict]:
    rows = []
    energy = delay = 0.0
    started = time.perf_counter()
    for k in range(rounds):
        _, extras = system.run_global_round(k)
        energy += extras["energy_j"]
        delay += extras["latency_s"]
        row = {
            "variant": label,
            "round": k,
            "energy_j_cum": energy,
            "delay_s_cum": delay,
            "tau": extras["tau"],
            "s_trusted": extras["s_trusted_mean"],
            "s_untrusted": extras["s_untrusted_mean"],
            "eta": extras["eta"],
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
        f"{label:32s} acc {rows[-1]['global_acc']:.4f}  E {energy:8.2f} J  "
        f"D {delay:8.2f} s  eps_max {np.max(eps):.3g}  {wall:.0f} s",
        flush=True,
    )
    for r in rows:
        r["wall_s"] = wall
        r["epsilon_max"] = float(np.max(eps))
    return rows


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


def _to_target(df: pd.DataFrame, target: float) -> tuple[float, float, float]:
    """(energy, delay, round) accumulated until the first eval ≥ target (NaN if never)."""
    hit = df[df["global_acc"] >= target]
    if hit.empty:
        return np.nan, np.nan, np.nan
    r = hit.iloc[0]
    return float(r["energy_j_cum"]), float(r["delay_s_cum"]), float(r["round"])


def main() -> None:
    """Run the sweep and write results.csv, table.md and the plots."""
    args = _args()
    logging.getLogger("absl").setLevel(logging.ERROR)  # dp-accounting's RDP chatter
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    overrides = [f"rounds={args.rounds}", "topology.edge_eval=false", *args.override]
    cfg = load_config(args.config, overrides)
    session = _session(cfg)
    try:
        _sweep(args, cfg, overrides, out)
    finally:
        session.close()


def _session(cfg) -> RaySession:
    """One Ray session for every variant (retries: start-up can time out under load)."""
    for attempt in range(10):
        try:
            return RaySession(cfg.ray)
        except Exception:  # noqa: BLE001 - Ray raises a bare Exception on timeout
            import ray

            ray.shutdown()  # reap the half-started processes of this attempt
            if attempt == 9:
                raise
            time.sleep(30)
    raise AssertionError("unreachable")


def _sweep(args: argparse.Namespace, cfg, overrides: list[str], out: Path) -> None:
    rows: list[dict] = []
    t0 = time.perf_counter()
    system = HierarchicalSystem(cfg)
    setup_s = time.perf_counter() - t0
    print(f"setup {setup_s:.0f} s; model dim {system.dim}", flush=True)
    n_edges = len(system.edges)
    try:
        for eps in [] if args.skip_sweep else args.eps:
            for frac in args.fractions:
                topo = cfg.topology.model_copy(update={"trusted_fraction": frac})
                trusted = build_topology(topo, system.num_clients, cfg.seed).trusted
                system.reset(
                    trusted=trusted, dp_enabled=True, epsilon=eps, control=False
                )
                label = f"h2fdp p={frac:g} eps={eps:g}"
                for r in _run(system, label, args.rounds, args.eval_every):
                    rows.append({**r, "eps": eps, "fraction": frac, "method": "h2fdp"})
        if not args.skip_sweep:
            system.reset(
                trusted=np.zeros(n_edges, bool), dp_enabled=False, control=False
            )
            for r in _run(system, "hfl (no DP)", args.rounds, args.eval_every):
                rows.append({**r, "eps": np.inf, "fraction": np.nan, "method": "hfl"})
        if not args.no_control:
            topo = cfg.topology.model_copy(
                update={"trusted_fraction": args.control_fraction}
            )
            trusted = build_topology(topo, system.num_clients, cfg.seed).trusted
            for control in (False, True):
                system.reset(
                    trusted=trusted,
                    dp_enabled=True,
                    epsilon=args.control_eps,
                    control=control,
                )
                name = "h2fdp_ctrl" if control else "h2fdp_noctrl"
                for r in _run(system, name, args.rounds, args.eval_every):
                    rows.append(
                        {
                            **r,
                            "eps": args.control_eps,
                            "fraction": args.control_fraction,
                            "method": name,
                        }
                    )
            system.reset(
                trusted=np.zeros(n_edges, bool),
                dp_enabled=True,
                epsilon=args.control_eps,
                control=False,
            )
            for r in _run(system, "hfl_dp", args.rounds, args.eval_every):
                rows.append(
                    {**r, "eps": args.control_eps, "fraction": 0.0, "method": "hfl_dp"}
                )
    finally:
        system.close()
    if not args.no_control and not args.no_pedpfl:
        ped = load_config(
            args.config,
            [
                *overrides,
                "topology.baseline=pedpfl",
                f"topology.dp.epsilon={args.control_eps}",
            ],
        )
        system = HierarchicalSystem(ped)
        try:
            for r in _run(system, "pedpfl", args.rounds, args.eval_every):
                rows.append(
                    {**r, "eps": args.control_eps, "fraction": 0.0, "method": "pedpfl"}
                )
        finally:
            system.close()
    df = pd.DataFrame(rows)
    df.to_csv(out / "results.csv", index=False)
    _report(df, args, out, setup_s)


def _report(
    df: pd.DataFrame, args: argparse.Namespace, out: Path, setup_s: float
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = [f"# H2FDP on Fashion-MNIST: {args.rounds} global rounds\n"]
    evals = df.dropna(subset=["global_acc"])
    final = evals.sort_values("round").groupby("variant").tail(1).set_index("variant")
    if not args.skip_sweep:
        _report_sweep(evals, final, args, out, lines, plt)
    if "h2fdp_ctrl" in final.index:
        lines.append(
            f"## Energy and delay (ε={args.control_eps:g}, "
            f"p_c={args.control_fraction:g}; Fig. 5)\n"
        )
        recs = []
        for m in ("h2fdp_ctrl", "h2fdp_noctrl", "hfl_dp", "pedpfl"):
            d = df[df["variant"] == m]
            if d.empty:
                continue
            e_t, d_t, r_t = _to_target(d.dropna(subset=["global_acc"]), args.target_acc)
            recs.append(
                {
                    "method": m,
                    "final_acc": final.loc[m, "global_acc"],
                    "energy_total_j": d["energy_j_cum"].iloc[-1],
                    "delay_total_s": d["delay_s_cum"].iloc[-1],
                    f"energy_to_{args.target_acc:g}_j": e_t,
                    f"delay_to_{args.target_acc:g}_s": d_t,
                    "round_reached": r_t,
                    "mean_tau": d["tau"].mean(),
                    "mean_s": np.nanmean(d[["s_trusted", "s_untrusted"]].to_numpy()),
                }
            )
        cost = pd.DataFrame(recs).set_index("method")
        lines.append(_md(cost) + "\n")
        red = []
        ctrl = cost.loc["h2fdp_ctrl"]
        for base, key in (
            ("h2fdp_noctrl", "h2fdp"),
            ("hfl_dp", "hfl_dp"),
            ("pedpfl", "pedpfl"),
        ):
            if base not in cost.index:
                continue
            for metric, col_total, col_target in (
                ("energy", "energy_total_j", f"energy_to_{args.target_acc:g}_j"),
                ("delay", "delay_total_s", f"delay_to_{args.target_acc:g}_s"),
            ):
                red.append(
                    {
                        "vs": base,
                        "metric": metric,
                        "ours_total_%": 100
                        * (1 - ctrl[col_total] / cost.loc[base, col_total]),
                        "ours_to_target_%": 100
                        * (1 - ctrl[col_target] / cost.loc[base, col_target]),
                        "paper_F-MNIST_%": PAPER_FIG5[metric][key],
                    }
                )
        lines.append("### Reductions by adaptive control\n")
        lines.append(_md(pd.DataFrame(red), index=False, fmt="{:.1f}") + "\n")
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
        for ax, col, unit in (
            (axes[0], "energy_total_j", "J"),
            (axes[1], "delay_total_s", "s"),
        ):
            ax.bar(cost.index, cost[col])
            ax.set(ylabel=f"total {col.split('_')[0]} ({unit})")
            ax.tick_params(axis="x", rotation=20)
        fig.tight_layout()
        fig.savefig(out / "energy_delay.png", dpi=120)
    lines.append(
        f"\nSetup {setup_s:.0f} s; wall time per variant (s): "
        + json.dumps(
            {
                k: round(float(v), 1)
                for k, v in df.groupby("variant")["wall_s"].first().items()
            }
        )
        + "\n"
    )
    (out / "table.md").write_text("\n".join(lines))
    print("\n".join(lines))


def _report_sweep(evals, final, args, out, lines, plt) -> None:
    """Accuracy vs rounds per ε (Figs. 4/9) and the final-accuracy table (Fig. 6)."""
    # accuracy vs rounds per ε (Fig. 4/9) and final accuracy vs ε (Fig. 6)
    h = evals[evals["method"] == "h2fdp"]
    hfl = evals[evals["method"] == "hfl"]
    fig, axes = plt.subplots(
        1, len(args.eps), figsize=(5 * len(args.eps), 3.6), squeeze=False
    )
    for ax, eps in zip(axes[0], args.eps, strict=True):
        for frac in args.fractions:
            d = h[(h["eps"] == eps) & (h["fraction"] == frac)]
            ax.plot(d["round"] + 1, d["global_acc"], label=f"p_c={frac:g}")
        ax.plot(hfl["round"] + 1, hfl["global_acc"], "k--", label="HFL (no DP)")
        ax.set(title=f"ε = {eps:g}", xlabel="global round k", ylabel="test accuracy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "accuracy_vs_rounds.png", dpi=120)
    lines.append("## Final test accuracy (trusted fraction × ε)\n")
    table = {
        f"p_c={frac:g}": {
            f"ε={eps:g}": final.loc[f"h2fdp p={frac:g} eps={eps:g}", "global_acc"]
            for eps in args.eps
        }
        for frac in args.fractions
    }
    tab = pd.DataFrame(table).T
    lines.append(_md(tab, fmt="{:.4f}") + "\n")
    lines.append(f"HFL without DP: {final.loc['hfl (no DP)', 'global_acc']:.4f}\n")


if __name__ == "__main__":
    main()
