r"""DP-Ditto against DP-perturbed pFedMe, APPLE, FedAMP and FedALA under one ε.

The headline of Zhao et al., "Convergence-Privacy-Fairness Trade-Off in
Personalized Federated Learning" (Figs. 3 and 4): with every client's upload
clipped to C and perturbed by the same Gaussian noise σ_u of eq. 8, DP-Ditto's
personalized models are more accurate and fairer (lower variance of the clients'
PL training losses) than those of the four DP-perturbed personalized baselines.

Every algorithm runs on the same federated data, model, seed and privacy section;
the uplink of every algorithm goes through the same client-side pipeline (clip
the uploaded model to C, add N(0, σ_n²) with σ_n from eq. 8 and Δs_n = 2C/|D_n|),
so all five spend the same nominal ε. Each method keeps its own personalization
hyper-parameters (the values the paper's benchmarks use, see ``ALGORITHMS``).

Per (algorithm, seed) the CSV row holds, after the last round, for the clients'
personalized models on their own test split: ``acc`` (sample-weighted, the
paper's accuracy), ``mean_acc`` (unweighted over clients), ``worst10_acc`` (mean
of the worst 10 % of clients), ``max_test_loss``, ``var_train_loss`` and
``std_train_loss`` (population variance / std of the clients' PL training losses:
the paper's fairness, Definition 1; lower is fairer), ``jain_acc`` and
``jain_train_loss`` (Jain's index, an extra diagnostic; higher is fairer), the
global model's accuracy ``global_acc``, ``sigma_u`` (largest per-client noise
std), ``epsilon_nominal`` (the paper's ε that eq. 8 calibrates σ_u to, from
``summary.json``'s ``privacy.paper_epsilon_per_client``),
``epsilon_accountant`` (the privacy ledger's ε for the same noise at the
sensitivity the code enforces: Δ = 2C, no subsampling, so much larger) and
``wall_s``.

Run (from the repository root):
    python examples/reproduce_dp_ditto.py
    python examples/reproduce_dp_ditto.py --algorithms ditto,pfedme --seeds 0 \
        --dataset digits --clients 6 --samples 100 --rounds 1 --out /tmp/dp_ditto

Runs already in ``OUT/baselines.csv`` are skipped, so an interrupted comparison
resumes where it stopped.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from rayfl.cluster.session import RaySession
from rayfl.compare.progress import progress_bar, script_main
from rayfl.config import RayConfig

#: The compared methods and their own hyper-parameters (the DP-Ditto paper's
#: benchmarks; values from the original papers / PFLlib where it gives none).
ALGORITHMS: dict[str, dict[str, Any]] = {
    # λ is set from --lam (the paper's λ* = 0.005 at ε = 10).
    "ditto": {"local_mode": "epochs", "clip_target": "model", "aggregation": "uniform"},
    # Moreau envelope weight 15 (pFedMe paper), K = 5 inner steps at 0.01, β = 1.
    "pfedme": {"lam": 15.0, "personal_lr": 0.01, "inner_steps": 5, "beta": 1.0},
    # Relationship-vector step 0.01, μ = 0.01, cosine decay over all rounds (L = 1).
    "apple": {"dr_lr": 0.01, "mu": 0.01, "decay_fraction": 1.0},
    # α_K = 1, σ = 1, λ = 1 (the DP-Ditto paper's benchmark setting, PFLlib's λ).
    "fedamp": {"alpha_k": 1.0, "lam": 1.0, "sigma": 1.0},
    # s = 80 %, η = 1, the top 2 parameter tensors aggregated adaptively.
    "fedala": {"rand_percent": 80, "eta": 1.0, "layer_idx": 2},
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--algorithms",
        default="ditto,pfedme,apple,fedamp,fedala",
        help=f"comma-separated, from {', '.join(ALGORITHMS)}",
    )
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    p.add_argument(
        "--dataset",
        default="fashion_mnist",
        choices=["fashion_mnist", "mnist", "digits"],
        help="data set (the paper: Fashion-MNIST, MNIST, CIFAR-10)",
    )
    p.add_argument("--clients", type=int, default=10, help="N (paper: 20)")
    p.add_argument(
        "--samples",
        type=int,
        default=200,
        help="samples per client before the 75/25 split (paper: 3,500)",
    )
    p.add_argument("--rounds", type=int, default=10, help="T, the planned aggregations")
    p.add_argument("--model", default="mlp", choices=["mlp", "mlr", "cnn"])
    p.add_argument("--epsilon", type=float, default=10.0, help="nominal ε (Fig. 3: 10)")
    p.add_argument("--delta", type=float, default=0.01, help="δ (paper: 0.01)")
    p.add_argument("--clip", type=float, default=20.0, help="clip norm C (paper: 20)")
    p.add_argument(
        "--lam", type=float, default=0.005, help="DP-Ditto λ (Fig. 3: 0.005)"
    )
    p.add_argument("--lr", type=float, default=0.005, help="η_G = η_L (paper: 0.005)")
    p.add_argument("--batch", type=int, default=10, help="mini-batch size (paper: 10)")
    p.add_argument("--out", default="docs/dp_ditto", help="directory of baselines.csv")
    p.add_argument(
        "--runs-dir", default="runs/dp_ditto_baselines", help="run directories"
    )
    p.add_argument("--num-cpus", type=int, default=1, help="Ray CPUs")
    args = p.parse_args(argv)
    unknown = [a for a in args.algorithms.split(",") if a not in ALGORITHMS]
    if unknown:
        p.error(
            f"--algorithms: unknown {', '.join(unknown)}; allowed: "
            f"{', '.join(ALGORITHMS)}"
        )
    return args


def algorithm_section(args: argparse.Namespace, kind: str) -> dict[str, Any]:
    """Return the ``algorithm`` section of ``kind``: shared training + its own knobs."""
    section: dict[str, Any] = {
        "kind": kind,
        "lr": args.lr,
        "local_epochs": 1,
        "batch_size": args.batch,
        **ALGORITHMS[kind],
    }
    if kind == "ditto":
        section.update(lam=args.lam, personal_lr=args.lr, personal_epochs=1)
    return section


def run_config(args: argparse.Namespace, kind: str, seed: int) -> dict[str, Any]:
    """Return the run config of one (algorithm, seed)."""
    model: dict[str, Any] = {"kind": args.model}
    if args.model == "mlp":
        model["hidden"] = [100]  # the paper's DNN: 784-100-10
    return {
        "name": f"dp-ditto-cmp-{kind}-s{seed}",
        "seed": seed,
        "rounds": args.rounds,
        "eval_every": args.rounds,
        "data": {
            "dataset": args.dataset,
            "num_clients": args.clients,
            "partition": "pathological",
            "classes_per_client": 2,
            "pool": "all",
            "test_fraction": 0.25,
            "max_samples_per_client": args.samples,
        },
        "model": model,
        "algorithm": algorithm_section(args, kind),
        "scheduler": {"policy": "all"},
        "privacy": (
            {"mechanism": "none", "clip_norm": args.clip}
            if math.isinf(args.epsilon)
            else {
                "mechanism": "gaussian",
                "calibration": "dp_ditto",
                "epsilon": args.epsilon,
                "delta": args.delta,
                "clip_norm": args.clip,
                "placement": "client",
            }
        ),
        "ray": {"num_cpus": args.num_cpus},
        "output": {"progress": False, "plots": False, "dir": args.runs_dir},
    }


#: The command-line values that define the setting; written into every row.
SETTING = (
    "dataset",
    "model",
    "clients",
    "samples",
    "rounds",
    "epsilon",
    "delta",
    "clip",
    "lam",
    "lr",
    "batch",
)


def setting_of(args: argparse.Namespace) -> dict[str, Any]:
    """Return the setting columns of this invocation."""
    return {name: getattr(args, name) for name in SETTING}


def check_same_setting(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Refuse to add runs of another setting to rows already in the CSV."""
    want = setting_of(args)
    for row in rows:
        differ = [k for k, v in want.items() if str(row.get(k)) != str(v)]
        if differ:
            raise SystemExit(
                f"{Path(args.out) / 'baselines.csv'} holds runs of another setting "
                f"({', '.join(f'{k}={row.get(k)} here, {want[k]} asked' for k in differ)}"
                "); use another --out"
            )


def summarise(result: Any, kind: str, seed: int) -> dict[str, Any]:
    """Return the CSV row of one finished run (personalized models, last round)."""
    rounds = result.rounds.dropna(subset=["global_acc"])
    last = rounds.iloc[-1]
    privacy = result.summary.get("privacy", {})
    # the paper formula's ε per client (summary.json only; none without DP)
    nominal = max(privacy.get("paper_epsilon_per_client") or [math.inf])
    per_client = privacy.get("noise_std_per_client") or [privacy.get("noise_std", 0)]
    return {
        "algorithm": kind,
        "seed": seed,
        "acc": float(last["eval_acc"]),
        "mean_acc": float(last["eval_mean_acc"]),
        "worst10_acc": float(last["eval_worst10_acc"]),
        "max_test_loss": float(last["eval_max_loss"]),
        "var_train_loss": float(last["var_train_loss"]),
        "std_train_loss": math.sqrt(float(last["var_train_loss"])),
        "jain_acc": float(last["eval_jain_acc"]),
        "jain_train_loss": float(last["jain_train_loss"]),
        "global_acc": float(last["global_acc"]),
        "sigma_u": float(max(per_client)),
        "epsilon_nominal": nominal,
        "epsilon_accountant": float(privacy.get("epsilon_max", math.inf)),
    }


def compare(args: argparse.Namespace) -> pd.DataFrame:
    """Run every (algorithm, seed) not yet in the CSV; write the CSV after each."""
    import rayfl

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "baselines.csv"
    rows = pd.read_csv(path).to_dict("records") if path.exists() else []
    check_same_setting(rows, args)
    done = {(str(r["algorithm"]), int(r["seed"])) for r in rows}
    todo = [
        (kind, int(seed))
        for seed in args.seeds.split(",")
        for kind in args.algorithms.split(",")
        if (kind, int(seed)) not in done
    ]
    # One Ray session for every run (a Ray started by the caller is left running)
    session = RaySession(RayConfig(num_cpus=args.num_cpus)) if todo else None
    try:
        for kind, seed in progress_bar(todo, desc="reproduce_dp_ditto"):
            started = time.perf_counter()
            result = rayfl.run(run_config(args, kind, seed))
            row = {**setting_of(args), **summarise(result, kind, seed)}
            row["wall_s"] = time.perf_counter() - started
            rows.append(row)
            print(
                f"{kind} seed={seed}: acc {row['acc']:.4f}, worst-10% "
                f"{row['worst10_acc']:.4f}, var(PL train loss) "
                f"{row['var_train_loss']:.4g}, accountant eps "
                f"{row['epsilon_accountant']:.4g} ({row['wall_s']:.0f} s)",
                flush=True,
            )
            pd.DataFrame(rows).to_csv(path, index=False)
    finally:
        if session is not None:
            session.close()
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    """Run the comparison and print the mean of every metric per algorithm."""
    args = parse_args(argv)
    table = compare(args)
    cols = ["acc", "worst10_acc", "max_test_loss", "var_train_loss", "jain_acc"]
    print(table.groupby("algorithm")[cols].agg(["mean", "std"]).round(4).to_string())
    print(f"wrote {Path(args.out) / 'baselines.csv'}")
    return table


if __name__ == "__main__":
    sys.exit(script_main(main))
