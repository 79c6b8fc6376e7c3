"""Per-edge scheduling in H2FDP: the uniform choice vs registered policies.

One set of actors (``examples/h2fdp_fmnist.yaml``: 50 devices, 10 edges of 5,
MLR, real Fashion-MNIST, ε = 1, half the edges trusted) runs each
``topology.scheduling`` and ``scheduler`` variant in turn (``HierarchicalRound.reset``): the
default uniform choice with every device (s_c = n_c = 5), the uniform choice
capped at K_e devices, and the registered ``random``, ``round_robin`` and
``best_channel`` policies on K_e subchannels per edge. Writes
``scheduling.csv`` (one row per variant × seed, with ``wall_s``),
``scheduling.md`` (mean ± std over seeds, then per seed) and
``scheduling_accuracy.png`` (mean over seeds). Re-running with the same
``--out`` skips the (seed, variant) rows already in ``scheduling.csv`` at the
same ``--rounds``.

Run:  python examples/h2fdp_scheduling.py --rounds 20 --subchannels 2 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rayfl.cluster.session import RaySession
from rayfl.config import SchedulerConfig, load_config
from rayfl.engine import Engine, build_system
from rayfl.hierarchy.config import HierSchedulingConfig
from rayfl.metrics import jain_index, round_summary


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="examples/h2fdp_fmnist.yaml")
    p.add_argument("--rounds", type=int, default=20, help="global rounds K_g")
    p.add_argument("--subchannels", type=int, default=2, help="K_e per edge")
    p.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=None,
        help="run seeds (default: the config's seed); finished runs are skipped",
    )
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument(
        "--policies",
        nargs="+",
        default=["uniform_all", "uniform", "random", "round_robin", "best_channel"],
        help="uniform_all = the default (every device); uniform = capped at K_e",
    )
    p.add_argument("--out", default="runs/h2fdp_scheduling")
    p.add_argument("--override", nargs="*", default=[], help="key=value overrides")
    return p.parse_args()


def _variant(name: str, k_e: int) -> dict[str, Any]:
    """The ``reset`` arguments of one variant: the edges' band and their policy."""
    if name == "uniform_all":
        return {
            "scheduling": HierSchedulingConfig(),
            "scheduler": SchedulerConfig(policy="uniform"),
        }
    return {
        "scheduling": HierSchedulingConfig(subchannels_per_edge=k_e),
        "scheduler": SchedulerConfig(policy=name),
    }


def _label(name: str, k_e: int) -> str:
    if name == "uniform_all":
        return "uniform (all n_c)"
    return f"{name} (K_e={k_e})"


def _run(system: Engine, label: str, rounds: int, every: int) -> dict:
    energy = delay = 0.0
    uploads = 0
    accs: dict[int, float] = {}
    scheduled = np.zeros(system.num_clients)
    started = time.perf_counter()
    for k in range(rounds):
        result, extras = system.run_global_round(k)
        energy += extras["energy_j"]
        delay += extras["latency_s"]
        for r in result.rows:
            scheduled[r["client"]] += 1
        if (k + 1) % every == 0 or k == rounds - 1:
            accs[k + 1] = round_summary(system.evaluate(), system.num_test)[
                "global_acc"
            ]
    uploads = int(sum(system.local_updates()))
    wall = time.perf_counter() - started
    row = {
        "variant": label,
        "rounds": rounds,
        "final_acc": accs[rounds],
        "energy_j": energy,
        "delay_s": delay,
        "uploads": uploads,
        "energy_per_upload_mj": 1e3 * (energy - _backhaul(system, rounds)[0]) / uploads,
        "devices_never_scheduled": int((scheduled == 0).sum()),
        "jain_participation": float(jain_index(scheduled)),
        "epsilon_max": float(np.max(system.uplink.epsilons()[0])),
        "wall_s": wall,
        **{f"acc@{k}": v for k, v in accs.items()},
    }
    print(
        f"{label:24s} acc {row['final_acc']:.4f}  E {energy:7.2f} J  D {delay:7.2f} s "
        f" never {row['devices_never_scheduled']}  {wall:.0f} s",
        flush=True,
    )
    return row


def _backhaul(system: Engine, rounds: int) -> tuple[float, float]:
    e, d = system.cost.global_hop()
    return e * len(system.edges) * rounds, d * len(system.edges) * rounds


def _md(df: pd.DataFrame) -> str:
    cells = [
        [f"{v:.4g}" if isinstance(v, float) else str(v) for v in row]
        for row in df.itertuples(index=False)
    ]
    head = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "---|" * len(df.columns)
    return "\n".join([head, rule, *("| " + " | ".join(c) + " |" for c in cells)])


def _pm(values: pd.Series) -> str:
    """``mean ± std`` over seeds (sample std; the value alone for one seed)."""
    if len(values) == 1:
        return f"{values.iloc[0]:.4g}"
    return f"{values.mean():.4g} ± {values.std(ddof=1):.2g}"


def _todo(
    args: argparse.Namespace, rows: list[dict], seeds: list[int]
) -> dict[int, list[str]]:
    """Per seed, the ``--policies`` not yet in ``rows`` at ``--rounds``."""

    def done(seed: int) -> set[str]:
        return {
            r["variant"]
            for r in rows
            if r["seed"] == seed and r["rounds"] == args.rounds
        }

    todo = {
        s: [n for n in args.policies if _label(n, args.subchannels) not in done(s)]
        for s in seeds
    }
    return todo


def _run_seeds(
    args: argparse.Namespace,
    cfg: Any,
    overrides: list[str],
    seeds: list[int],
    todo: dict[int, list[str]],
    rows: list[dict],
    path: Path,
) -> None:
    """Run ``todo`` (one system per seed), saving ``path`` after every run."""
    session = RaySession(cfg.ray)
    try:
        for seed in seeds:
            if not todo[seed]:
                continue
            t0 = time.perf_counter()
            system = build_system(
                load_config(args.config, [*overrides, f"seed={seed}"])
            )
            print(f"seed {seed}: setup {time.perf_counter() - t0:.0f} s", flush=True)
            try:
                for name in todo[seed]:
                    system.reset(**_variant(name, args.subchannels))
                    label = _label(name, args.subchannels)
                    row = _run(system, label, args.rounds, args.eval_every)
                    rows.append({**row, "seed": seed})
                    pd.DataFrame(rows).to_csv(path, index=False)
            finally:
                system.close()
    finally:
        session.close()


def _write_report(
    df: pd.DataFrame, seeds: list[int], args: argparse.Namespace, out: Path
) -> None:
    """Write and print scheduling.md; draw scheduling_accuracy.png."""
    cols = [
        "variant",
        "final_acc",
        "energy_j",
        "delay_s",
        "energy_per_upload_mj",
        "devices_never_scheduled",
        "jain_participation",
        "epsilon_max",
    ]
    by = df.groupby("variant", sort=False)
    summary = pd.DataFrame(
        {"variant": list(by.groups), **{c: by[c].apply(_pm).values for c in cols[1:]}}
    )
    text = (
        f"# H2FDP per-edge scheduling: seeds {', '.join(map(str, seeds))}, "
        f"{args.rounds} global rounds, K_e = {args.subchannels}\n\n"
        "Mean ± std over the seeds:\n\n"
        + _md(summary)
        + "\n\nPer seed:\n\n"
        + _md(df[["seed", *cols]].sort_values(["seed"], kind="stable"))
        + "\n"
    )
    (out / "scheduling.md").write_text(text)
    print(text)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    acc_cols = [c for c in df.columns if c.startswith("acc@")]
    xs = [int(c[4:]) for c in acc_cols]
    for label, d in by:
        ax.plot(xs, d[acc_cols].mean().to_numpy(), marker="o", label=label)
    ax.set_xlabel("global round k")
    ax.set_ylabel("global test accuracy (mean over seeds)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "scheduling_accuracy.png", dpi=120)


def main() -> None:
    """Run the missing (seed, variant) pairs and write the table and the plot."""
    args = _args()
    logging.getLogger("absl").setLevel(logging.ERROR)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    overrides = [f"rounds={args.rounds}", "topology.edge_eval=false", *args.override]
    cfg = load_config(args.config, overrides)
    seeds = args.seeds if args.seeds is not None else [cfg.seed]
    path = out / "scheduling.csv"
    old = pd.read_csv(path) if path.exists() else pd.DataFrame()
    if not old.empty and "rounds" not in old.columns:
        old = pd.DataFrame()  # written before the ``rounds`` column: redo
    rows = old.to_dict("records")
    todo = _todo(args, rows, seeds)
    if any(todo.values()):
        _run_seeds(args, cfg, overrides, seeds, todo, rows, path)
    labels = [_label(n, args.subchannels) for n in args.policies]
    df = pd.DataFrame(rows)
    df = df[df["seed"].isin(seeds) & (df["rounds"] == args.rounds)]
    df = df[df["variant"].isin(labels)]
    _write_report(df, seeds, args, out)


if __name__ == "__main__":
    main()
