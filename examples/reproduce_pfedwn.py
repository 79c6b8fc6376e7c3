"""Reproduce pFedWN's Table II comparison and its selected-neighbor counts.

Ni, Ghazikor & Hashemi, "Personalized Federated Learning over Wireless D2D
Networks" (pFedWN): an 11-node D2D network in 50 × 50 m², Dirichlet(0.1) data,
one target client. Two parts:

1. **Selected neighbors vs γ_th** (Figs. 5–6, Table II cases): over ``--layouts``
   random 11-node drops, the mean number of neighbors with P^err < ε for
   γ_th = 5, 10, 15 and several ε (pure numpy, seconds).
2. **Table II**: for each case (γ_th = 5 / 10 / 15), seed and method, the target's
   maximum test accuracy over the rounds. Methods: ``local``, ``pfedwn`` (α from
   ``--alpha``) or ``pfedwn@0.7`` (α = 0.7), and any algorithm registered in
   ``rayfl.algorithms.registry`` run as a federated baseline with the target as
   aggregator (``fedavg``, ``fedprox``, ``perfedavg``, ``fedamp``, ...). Baselines
   federate the target and its selected neighbors, except those that keep every
   client's upload for per-client downloads (FedAMP, APPLE): they federate all
   11 nodes (``topology.participants=all``). Datasets: Fashion-MNIST (always
   here), MNIST / CIFAR-10 when their files are found (``--datasets``).

Outputs in ``--out`` (default ``docs/pfedwn``): ``table2.csv`` (one row per
dataset, case, method and seed: target, selected neighbors, maximum / final
accuracy, ``wall_s``), ``curves.csv`` (the target's accuracy per round),
``counts.csv``, ``counts.png``, ``layout.png``, ``curves_<dataset>.png`` and
``em_weights.png``; every run's directory goes under ``--runs-dir``. Runs already
in ``table2.csv`` are skipped, so an interrupted comparison resumes where it
stopped (delete the CSV to start over).

Shrink it (the machine is shared): ``--seeds 0 --rounds 10 --cases 5
--max-samples 1000 --out /tmp/pfedwn``. What docs/reproductions/pfedwn.md reports:

    python examples/reproduce_pfedwn.py --seeds 0 1 2 --rounds 30 --cases 5 10 15
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from rayfl.algorithms.config import algorithm_names
from rayfl.algorithms.registry import ALGORITHMS
from rayfl.compare.progress import progress_bar, script_main
from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.selection import make_layout, select_neighbors
from rayfl.data.datasets import available_datasets
from rayfl.runner import run

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # loaded by path (the tests), not run as a script
    sys.path.insert(0, str(HERE))

# The figures; re-exported here.
from _support.pfedwn_plots import layout_plot, plots  # noqa: E402

BASE = Path(__file__).with_name("pfedwn_d2d.yaml")
BUILTIN = ("local", "pfedwn")
METHODS = (
    "local",
    "fedavg",
    "fedprox",
    "perfedavg",
    "fedamp",
    "pfedwn@0.5",
    "pfedwn@0.7",
    "pfedwn@0.9",
)
#: The columns of ``table2.csv`` (one row per dataset, case, method and seed).
COLUMNS = (
    "dataset",
    "sinr_threshold",
    "method",
    "seed",
    "participants",
    "target",
    "num_selected",
    "neighbors",
    "max_acc",
    "final_acc",
    "max_post_train_acc",
    "wall_s",
)
PAPER_TABLE2 = {  # Table II, max target accuracy (%), MNIST columns (closest to FMNIST)
    "local": {5: 98.3, 10: 98.4, 15: 98.0},
    "fedavg": {5: 88.0, 10: 96.2, 15: 88.5},
    "fedprox": {5: 83.4, 10: 94.3, 15: 88.1},
    "perfedavg": {5: 92.0, 10: 98.1, 15: 90.8},
    "fedamp": {5: 98.4, 10: 98.3, 15: 98.1},
    "pfedwn": {5: 98.4, 10: 98.4, 15: 98.1},
}


def count_selected(
    layouts: int, gammas: list[float], epsilons: list[float]
) -> pd.DataFrame:
    """Number of selected neighbors of one random target, per drop (long form).

    One row per (γ_th, ε, layout): drop ``layout`` places 11 nodes and a random
    target with that seed, and ``selected`` counts its neighbors with P^err < ε.
    """
    rows = []
    for gamma in gammas:
        for eps in epsilons:
            topology = D2DTopologyConfig(sinr_threshold=gamma, epsilon=eps)
            for seed in range(layouts):
                layout = make_layout(topology, 11, seed=seed)
                (selection,) = select_neighbors(layout, topology, seed=seed)
                rows.append(
                    {
                        "sinr_threshold": f"{gamma:g}",
                        "epsilon": f"{eps:g}",
                        "layout": seed,
                        "selected": len(selection.neighbors),
                    }
                )
    return pd.DataFrame(rows)


def method_overrides(method: str) -> dict[str, Any]:
    """Config overrides of one method (baselines: the algorithm section).

    ``pfedwn@0.8`` is pFedWN with α = 0.8 (eq. 1), for α sweeps (the paper does
    not give α). A baseline may set fields of its algorithm section after ``@``:
    ``perfedavg@beta=0.01`` is Per-FedAvg with β = 0.01. Baselines whose server
    keeps every upload for per-client downloads (FedAMP, APPLE) federate all
    nodes (``topology.participants=all``): the D2D runner refuses them over the
    selected neighbors only.
    """
    kind, _, params = method.partition("@")
    if kind == "pfedwn" and params:
        return {"topology.method": "pfedwn", "topology.alpha": float(params)}
    if kind in BUILTIN:
        return {"topology.method": kind}
    overrides: dict[str, Any] = {"topology.method": "federated", "algorithm.kind": kind}
    for item in filter(None, params.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(
                f"--methods {method!r}: after '@' give key=value fields of the "
                f"algorithm section, e.g. perfedavg@beta=0.01"
            )
        overrides[f"algorithm.{key}"] = float(value)
    module, name = ALGORITHMS[kind].split(":")
    if getattr(importlib.import_module(module), name).personalized_downloads:
        overrides["topology.participants"] = "all"
    return overrides


def run_one(
    dataset: str, gamma: float, seed: int, method: str, args: argparse.Namespace
) -> dict[str, Any]:
    """Run one (dataset, case, seed, method) and return its row of the table."""
    started = time.perf_counter()
    overrides = {
        "seed": seed,
        "rounds": args.rounds,
        "data.dataset": dataset,
        "data.max_samples_per_client": args.max_samples,
        "model.kind": args.model,
        "topology.sinr_threshold": gamma,
        "topology.alpha": args.alpha,
        "output.dir": str(args.runs_dir),
        "name": f"{dataset}-g{gamma:g}-s{seed}-{method.replace('@', '-a')}",
        "output.progress": False,
        "output.plots": False,
        "ray.num_cpus": args.num_cpus,
        **method_overrides(method),
    }
    result = run(BASE, overrides)
    (target,) = result.summary["d2d"]["targets"].items()
    rounds = result.rounds
    post = rounds["target_post_train_acc"].max()
    return {
        "dataset": dataset,
        "sinr_threshold": f"{gamma:g}",
        "method": method,
        "seed": seed,
        "participants": overrides.get("topology.participants", "selected"),
        "target": int(target[0]),
        "num_selected": len(target[1]["neighbors"]),
        "neighbors": " ".join(str(m) for m in target[1]["neighbors"]),
        "max_acc": 100 * float(rounds["target_acc"].max()),
        "final_acc": 100 * float(rounds["target_acc"].iloc[-1]),
        "max_post_train_acc": 100 * float(post) if post == post else float("nan"),
        "wall_s": round(time.perf_counter() - started, 1),
        "curve": (100 * rounds["target_acc"]).round(2).tolist(),
        "em_history": target[1]["em_weights"],
    }


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Mean ± std over seeds of the max target accuracy, one row per method."""
    grouped = results.groupby(["dataset", "sinr_threshold", "method"], sort=False)
    table = grouped.agg(
        max_acc_mean=("max_acc", "mean"),
        max_acc_std=("max_acc", "std"),
        num_selected_mean=("num_selected", "mean"),
        seeds=("seed", "count"),
    ).reset_index()
    table["paper_mnist"] = [
        PAPER_TABLE2.get(m.split("@")[0], {}).get(int(float(g)), float("nan"))
        for m, g in zip(table["method"], table["sinr_threshold"], strict=True)
    ]
    return table


def _append(path: Path, rows: list[dict[str, Any]]) -> None:
    """Append rows to a CSV (header on the first write)."""
    frame = pd.DataFrame(rows)
    frame.to_csv(path, mode="a", header=not path.exists(), index=False)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Return the flags; an unknown ``--methods`` entry is a usage error."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["fashion_mnist"])
    parser.add_argument(
        "--cases", nargs="+", type=float, default=[5.0, 10.0, 15.0], help="γ_th"
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--methods",
        nargs="+",
        default=list(METHODS),
        help="local, pfedwn, pfedwn@<α>, or a registered algorithm, optionally "
        "with fields of its section: perfedavg@beta=0.01",
    )
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--alpha", type=float, default=0.9, help="α of eq. 1")
    parser.add_argument("--max-samples", type=int, default=2000)
    parser.add_argument("--model", default="mlp", choices=["mlp", "cnn", "mlr"])
    parser.add_argument("--layouts", type=int, default=100)
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.01, 0.05, 0.1])
    parser.add_argument("--num-cpus", type=int, default=1, help="Ray CPUs")
    parser.add_argument("--skip-training", action="store_true")
    parser.add_argument(
        "--out", type=Path, default=Path("docs/pfedwn"), help="CSVs and plots"
    )
    parser.add_argument(
        "--runs-dir",
        type=Path,
        default=Path("runs/pfedwn_repro"),
        help="directory of every run's output",
    )
    args = parser.parse_args(argv)
    known = set(algorithm_names()) | set(BUILTIN)
    unknown = [m for m in args.methods if m.split("@")[0] not in known]
    if unknown:
        parser.error(
            f"--methods: unknown {', '.join(unknown)}; allowed: "
            f"{', '.join(sorted(known))}, pfedwn@<α>, <algorithm>@<field>=<value>"
        )
    return args


def _todo(
    args: argparse.Namespace, table_path: Path
) -> list[tuple[str, float, int, str]]:
    """The (dataset, γ_th, seed, method) runs not in ``table2.csv`` yet (printed)."""
    done: set[tuple[str, str, str, int]] = set()
    if table_path.exists():
        old = pd.read_csv(table_path, dtype={"sinr_threshold": str})
        done = {
            (str(r.dataset), str(r.sinr_threshold), str(r.method), int(r.seed))
            for r in old.itertuples()
        }
    found = available_datasets()
    todo = [
        (dataset, gamma, seed, method)
        for dataset in args.datasets
        for gamma in args.cases
        for seed in args.seeds
        for method in args.methods
        if (dataset, f"{gamma:g}", method, seed) not in done
    ]
    missing = {d for d, *_ in todo if not found.get(d, "").startswith("found")}
    for dataset in sorted(missing):
        print(f"skip {dataset}: {found.get(dataset)}")
    todo = [t for t in todo if t[0] not in missing]
    print(f"{len(todo)} runs to do ({len(done)} already in {table_path})")
    return todo


def _init_ray(num_cpus: int) -> None:
    """Start a new local Ray session (a loaded machine can time out: retried)."""
    import ray

    for attempt in range(5):
        try:
            ray.init(  # a new local session, even where `ray start` left one
                address="local",
                num_cpus=num_cpus,
                include_dashboard=False,
                logging_level="ERROR",
            )
            break
        except Exception:  # noqa: BLE001 (Ray raises a bare Exception)
            if attempt == 4:
                raise


def _record(job: tuple[str, float, int, str], row: dict[str, Any], out: Path) -> None:
    """Print a run's row; append it to table2.csv, curves.csv and em_weights.csv."""
    dataset, gamma, seed, method = job
    table_path = out / "table2.csv"
    curves_path = out / "curves.csv"
    em_path = out / "em_weights.csv"
    print(
        f"{dataset} γ_th={gamma:g} seed={seed} {method:16s} "
        f"target={row['target']} SNs={row['neighbors']} "
        f"max_acc={row['max_acc']:.2f} ({row['wall_s']:.0f} s)",
        flush=True,
    )
    key = {k: row[k] for k in ("dataset", "sinr_threshold", "method")}
    key["seed"] = seed
    _append(
        curves_path,
        [{**key, "round": t, "target_acc": acc} for t, acc in enumerate(row["curve"])],
    )
    history = row["em_history"] or []
    neighbors = row["neighbors"].split()
    if method.startswith("pfedwn") and history and neighbors:
        _append(
            em_path,
            [
                {**key, "step": step, "neighbor": int(m), "pi": float(pi)}
                for step, weights in enumerate(history)
                for m, pi in zip(neighbors, weights, strict=True)
            ],
        )
    _append(table_path, [{k: row[k] for k in COLUMNS}])


def _write_outputs(counts: pd.DataFrame, out: Path) -> None:
    """Print the summary of ``table2.csv`` and write the plots."""
    table_path = out / "table2.csv"
    curves_path = out / "curves.csv"
    em_path = out / "em_weights.csv"
    if table_path.exists():
        frame = pd.read_csv(table_path, dtype={"sinr_threshold": str})
        print(summarise(frame).to_string(index=False, float_format="{:.1f}".format))
        curves = pd.read_csv(curves_path, dtype={"sinr_threshold": str})
        em = (
            pd.read_csv(em_path, dtype={"sinr_threshold": str})
            if em_path.exists()
            else pd.DataFrame()
        )
        plots(counts, curves, em, out)
    else:
        plots(counts, pd.DataFrame(columns=["dataset"]), pd.DataFrame(), out)


def main(argv: list[str] | None = None) -> None:
    """Parse the flags, count selected neighbors, run the table, write outputs."""
    args = _parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    counts = count_selected(args.layouts, [5.0, 10.0, 15.0], args.epsilons)
    counts.to_csv(args.out / "counts.csv", index=False)
    layout_plot(args.out)
    print(
        counts.groupby(["sinr_threshold", "epsilon"])["selected"]
        .agg(["mean", "std"])
        .to_string(float_format=lambda v: f"{v:.2f}")
    )

    table_path = args.out / "table2.csv"
    todo = _todo(args, table_path)
    if todo and not args.skip_training:
        import ray

        _init_ray(args.num_cpus)
        try:
            for dataset, gamma, seed, method in progress_bar(
                todo, desc="reproduce_pfedwn"
            ):
                row = run_one(dataset, gamma, seed, method, args)
                _record((dataset, gamma, seed, method), row, args.out)
        finally:
            ray.shutdown()
    _write_outputs(counts, args.out)


if __name__ == "__main__":
    sys.exit(script_main(main))
