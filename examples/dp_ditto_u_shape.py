"""DP-Ditto's U-shaped PL training loss versus the number of aggregations T.

Fig. 5 of Zhao et al., "Convergence-Privacy-Fairness Trade-Off in Personalized
Federated Learning" (spec seed_001 §7.3): at a small privacy budget ε the final PL
training loss first falls with T (more training, the FL model helps the PL
models generalise) and then rises (the per-round DP noise σ_u of eq. 8 grows as
√T and accumulates in the global model the PL models are pulled towards), so a
finite T* exists. With ε = ∞ (no noise) the loss only falls.

Each point is one DP-Ditto run of exactly T rounds on real Fashion-MNIST, since σ_u
is calibrated to the planned T. The value plotted is the mean over clients of the
train-split loss of each client's PL model ϖ_n after round T (``eval_train_loss``).
With ``--bound`` the bound h(T, λ) of Theorem 1 (``rayfl tune-ditto``) is overlaid
on a second (log) axis; its constants μ, L, G0, M, Ψ1, Ψ2 are the illustrative
defaults of ``rayfl.algorithms.ditto_analysis`` (the paper gives none), so only
its shape and its T* can be compared.

Run (45 runs of about 40 s each with one Ray CPU; most of it is the actors'
start-up):
    python examples/dp_ditto_u_shape.py
    python examples/dp_ditto_u_shape.py --rounds 4,16,64 --epsilons 0.1 \
        --clients 10 --samples 200 --seeds 0,1 --out runs/u_shape

Writes ``OUT/u_shape.png`` (mean ± std over seeds) and ``OUT/u_shape.csv`` (one
row per ε, T, seed: the PL metrics, σ_u, the paper's nominal ε and the
accountant's ε, and the run's wall time ``wall_s``) and prints the table of
means. Runs already in ``OUT/u_shape.csv`` are skipped, so an interrupted sweep
resumes where it stopped.

The two ε columns: ``epsilon_nominal`` is the budget eq. 8 calibrates σ_u to
(the paper's ε); ``epsilon_accountant`` is what the privacy ledger reports for
the same noise at the sensitivity the code enforces (Δ = 2C for a model clipped
to C, no subsampling, z_n = σ_n/(2C)), which is much larger.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import pandas as pd

from rayfl.cluster.session import RaySession
from rayfl.config import RayConfig


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", default="1,4,16,64,128", help="T values")
    p.add_argument("--epsilons", default="0.1,1,inf", help="ε values (inf = no DP)")
    p.add_argument("--seeds", default="0,1,2", help="seeds, averaged")
    p.add_argument("--clients", type=int, default=10, help="N")
    p.add_argument("--samples", type=int, default=200, help="samples per client")
    p.add_argument("--model", default="mlr", choices=["mlr", "mlp"])
    p.add_argument("--lam", type=float, default=0.1, help="λ (Fig. 5: 0.1)")
    p.add_argument("--lr", type=float, default=0.05, help="η_G = η_L")
    p.add_argument("--clip", type=float, default=10.0, help="clip norm C")
    p.add_argument("--delta", type=float, default=0.01, help="δ (Fig. 5: 0.01)")
    p.add_argument("--batch", type=int, default=32, help="mini-batch size B")
    p.add_argument("--out", default="docs/dp_ditto", help="output directory")
    p.add_argument("--num-cpus", type=int, default=1, help="Ray CPUs")
    p.add_argument("--from-csv", help="re-plot a table written before; no runs")
    p.add_argument(
        "--runs-dir",
        default="runs/dp_ditto_u_shape",
        help="where the individual run directories go",
    )
    p.add_argument(
        "--bound",
        action="store_true",
        help="overlay Theorem 1's h(T, λ) (rayfl tune-ditto; illustrative constants)",
    )
    return p.parse_args(argv)


def run_config(
    args: argparse.Namespace, rounds: int, epsilon: float, seed: int
) -> dict[str, Any]:
    """Return the run config of one point (T, ε, seed)."""
    return {
        "name": f"u-T{rounds}-eps{epsilon}-s{seed}",
        "seed": seed,
        "rounds": rounds,
        "eval_every": rounds,
        "data": {
            "dataset": "fashion_mnist",
            "num_clients": args.clients,
            "partition": "pathological",
            "classes_per_client": 2,
            "pool": "all",
            "test_fraction": 0.25,
            "max_samples_per_client": args.samples,
        },
        "model": {
            "kind": args.model,
            **({"hidden": [32]} if args.model == "mlp" else {}),
        },
        "algorithm": {
            "kind": "ditto",
            "lam": args.lam,
            "lr": args.lr,
            "personal_lr": args.lr,
            "local_epochs": 1,
            "personal_epochs": 1,
            "batch_size": args.batch,
            "local_mode": "epochs",
            "clip_target": "model",
            "aggregation": "uniform",
        },
        "scheduler": {"policy": "all"},
        "privacy": (
            {"mechanism": "none"}
            if math.isinf(epsilon)
            else {
                "mechanism": "gaussian",
                "calibration": "dp_ditto",
                "epsilon": epsilon,
                "delta": args.delta,
                "clip_norm": args.clip,
                "placement": "client",
            }
        ),
        "ray": {"num_cpus": args.num_cpus},
        "output": {
            "progress": False,
            "plots": False,
            "dir": str(Path(args.runs_dir)),
        },
    }


def bound_overlay(
    args: argparse.Namespace, epsilon: float, t_max: int, train_size: int
) -> dict[str, Any]:
    """Return ``rayfl tune-ditto``'s h(T, λ) curve and T* for this setting."""
    from rayfl.algorithms.ditto_analysis import tune

    dim = 7850 if args.model == "mlr" else 784 * 32 + 32 + 32 * 10 + 10
    return tune(
        {
            "num_clients": args.clients,
            "epsilon": epsilon,
            "delta": args.delta,
            "clip_norm": args.clip,
            "lr_global": args.lr,
            "lr_personal": args.lr,
            "lam": args.lam,
            "dim": dim,
            "dataset_size": train_size,
            "t_max": t_max,
        }
    )


def summarise(result: Any, epsilon: float, rounds: int, seed: int) -> dict[str, Any]:
    """Return the CSV row of one finished run (PL metrics after round T, both ε)."""
    metrics = result.metrics
    last = metrics[metrics["round"] == metrics["round"].max()]
    privacy = result.summary.get("privacy", {})
    accountant = privacy.get("epsilon_max", math.inf)
    # the paper formula's ε per client (summary.json only; none without DP)
    nominal = max(privacy.get("paper_epsilon_per_client") or [math.inf])
    return {
        "epsilon": epsilon,
        "T": rounds,
        "seed": seed,
        "pl_train_loss": float(last["eval_train_loss"].mean()),
        "pl_test_acc": float(last["personal_acc"].mean()),
        "pl_max_test_loss": float(last["personal_loss"].max()),
        "sigma_u": float(privacy.get("noise_std", 0.0)),
        "epsilon_nominal": nominal,
        "epsilon_accountant": float(accountant),
    }


def sweep(args: argparse.Namespace, out: Path) -> pd.DataFrame:
    """Run one DP-Ditto run per (ε, T, seed); write the CSV after each run.

    Rows already in ``OUT/u_shape.csv`` are kept and their runs skipped.
    """
    import rayfl

    path = out / "u_shape.csv"
    rows = pd.read_csv(path).to_dict("records") if path.exists() else []
    done = {(float(r["epsilon"]), int(r["T"]), int(r["seed"])) for r in rows}
    session = None  # one Ray session for every run, started at the first
    try:
        for epsilon in [float(v) for v in args.epsilons.split(",")]:
            for t in [int(v) for v in args.rounds.split(",")]:
                for seed in [int(v) for v in args.seeds.split(",")]:
                    if (epsilon, t, seed) in done:
                        continue
                    if session is None:
                        session = RaySession(RayConfig(num_cpus=args.num_cpus))
                    started = time.perf_counter()
                    result = rayfl.run(run_config(args, t, epsilon, seed))
                    row = summarise(result, epsilon, t, seed)
                    row["wall_s"] = time.perf_counter() - started
                    rows.append(row)
                    print(
                        f"eps={epsilon:g} T={t} seed={seed}: PL train loss "
                        f"{row['pl_train_loss']:.4f}, PL test acc "
                        f"{row['pl_test_acc']:.4f}, accountant eps "
                        f"{row['epsilon_accountant']:.4g} ({row['wall_s']:.0f} s)",
                        flush=True,
                    )
                    pd.DataFrame(rows).to_csv(path, index=False)
    finally:
        if session is not None:
            session.close()
    return pd.DataFrame(rows)


def plot(table: pd.DataFrame, args: argparse.Namespace, out: Path) -> None:
    """Draw the final PL training loss vs T per ε (and the bound with ``--bound``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grouped = table.groupby(["epsilon", "T"])["pl_train_loss"]
    means, stds = grouped.mean(), grouped.std(ddof=1).fillna(0.0)
    seeds = table.groupby(["epsilon", "T"])["seed"].nunique()
    train_size = int(round(args.samples * (1 - 0.25)))
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    twin = ax.twinx()
    for i, epsilon in enumerate(sorted(table["epsilon"].unique())):
        colour = f"C{i}"
        m, sd = means.loc[epsilon], stds.loc[epsilon]
        label = "no DP (ε = ∞)" if math.isinf(epsilon) else f"ε = {epsilon:g} (nominal)"
        ax.errorbar(
            m.index,
            m.values,
            yerr=sd.values,
            fmt="o-",
            color=colour,
            capsize=3,
            label=f"DP-Ditto, {label}",
        )
        ax.plot([int(m.idxmin())], [m.min()], "*", color=colour, markersize=14)
        if args.bound and not math.isinf(epsilon):
            theory = bound_overlay(args, epsilon, int(m.index.max()), train_size)
            twin.plot(
                theory["rounds_axis"][1:],
                theory["bound"][1:],
                "--",
                color=colour,
                alpha=0.6,
                label=f"bound h(T), {label} (T* = {theory['t_star']})",
            )
    if args.bound:
        twin.set_yscale("log")
        twin.set_ylabel("Theorem 1 bound h(T, λ) (illustrative constants)")
    else:
        twin.set_axis_off()
    ax.set_xscale("log", base=2)
    ax.set_xlabel("number of aggregations T (one run per T; ★ = measured T*)")
    ax.set_ylabel("final PL training loss (mean over clients)")
    ax.set_yscale("log")
    ax.set_title(
        f"DP-Ditto, Fashion-MNIST, {args.model.upper()}, N = {args.clients}, "
        f"{args.samples} samples/client, C = {args.clip:g}, λ = {args.lam:g}, "
        f"δ = {args.delta:g}; ± std, {int(seeds.min())} seeds",
        fontsize=8,
    )
    lines = ax.get_legend_handles_labels()
    extra = twin.get_legend_handles_labels()
    ax.legend(lines[0] + extra[0], lines[1] + extra[1], fontsize=7, loc="upper center")
    fig.tight_layout()
    fig.savefig(out / "u_shape.png", dpi=130)
    plt.close(fig)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    """Run the sweep (or read ``--from-csv``), write the table and the plot."""
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = pd.read_csv(args.from_csv) if args.from_csv else sweep(args, out)
    if not args.from_csv:
        table.to_csv(out / "u_shape.csv", index=False)
    means = table.groupby(["epsilon", "T"])[["pl_train_loss", "pl_test_acc"]].mean()
    print(means.unstack("epsilon").round(4).to_string())
    plot(table, args, out)
    print(f"wrote {out / 'u_shape.png'} and {out / 'u_shape.csv'}")
    return table


if __name__ == "__main__":
    main()
