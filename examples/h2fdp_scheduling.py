"""Per-edge scheduling in H2FDP: the uniform choice vs registered policies.

One set of actors (``examples/h2fdp_fmnist.yaml``: 50 devices, 10 edges of 5,
MLR, real Fashion-MNIST, ε = 1, half the edges trusted) runs each
``topology.scheduling`` variant in turn (``HierarchicalSystem.reset``): the
default uniform choice with every device (s_c = n_c = 5), the uniform choice
capped at K_e devices, and the registered ``random``, ``round_robin`` and
``best_channel`` policies on K_e subchannels per edge. Writes
``scheduling.csv``, ``scheduling.md`` and ``scheduling_accuracy.png``.

Run:  python examples/h2fdp_scheduling.py --rounds 20 --subchannels 2
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd

from rayfl.config import load_config
from rayfl.hierarchy.config import HierSchedulingConfig
from rayfl.hierarchy.system import HierarchicalSystem
from rayfl.metrics import jain_index, round_summary
from rayfl.session import RaySession


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="examples/h2fdp_fmnist.yaml")
    p.add_argument("--rounds", type=int, default=20, help="global rounds K_g")
    p.add_argument("--subchannels", type=int, default=2, help="K_e per edge")
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


def _variant(name: str, k_e: int) -> HierSchedulingConfig:
    if name == "uniform_all":
        return HierSchedulingConfig()
    return HierSchedulingConfig(policy=name, subchannels_per_edge=k_e)


def _run(system: HierarchicalSystem, label: str, rounds: int, every: int) -> dict:
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


def _backhaul(system: HierarchicalSystem, rounds: int) -> tuple[float, float]:
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


def main() -> None:
    """Run the variants and write the table and the plot."""
    args = _args()
    logging.getLogger("absl").setLevel(logging.ERROR)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    overrides = [f"rounds={args.rounds}", "topology.edge_eval=false", *args.override]
    cfg = load_config(args.config, overrides)
    session = RaySession(cfg.ray)
    rows = []
    try:
        t0 = time.perf_counter()
        system = HierarchicalSystem(cfg)
        print(f"setup {time.perf_counter() - t0:.0f} s", flush=True)
        try:
            for name in args.policies:
                system.reset(scheduling=_variant(name, args.subchannels))
                label = "uniform (all n_c)" if name == "uniform_all" else name
                if name != "uniform_all":
                    label += f" (K_e={args.subchannels})"
                rows.append(_run(system, label, args.rounds, args.eval_every))
        finally:
            system.close()
    finally:
        session.close()
    df = pd.DataFrame(rows)
    df.to_csv(out / "scheduling.csv", index=False)
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
    (out / "scheduling.md").write_text(_md(df[cols]) + "\n")
    print(_md(df[cols]))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    acc_cols = [c for c in df.columns if c.startswith("acc@")]
    xs = [int(c[4:]) for c in acc_cols]
    for _, r in df.iterrows():
        ax.plot(xs, [r[c] for c in acc_cols], marker="o", label=r["variant"])
    ax.set_xlabel("global round k")
    ax.set_ylabel("global test accuracy")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "scheduling_accuracy.png", dpi=120)


if __name__ == "__main__":
    main()
