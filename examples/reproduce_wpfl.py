"""Reproduce seed 000's scheduling comparison (Figs. 3-4): metrics versus T0.

Runs WPFL (``examples/wpfl_minmax.yaml``) for every (model/data pair, policy, T0,
seed) and writes, under ``--out``:

- ``results.csv``: one row per run, the final round's PL test accuracy
  (test-size weighted), max PL test loss over all clients, Jain's index of the PL
  training losses under three readings (``jain``: plain cross-entropy F_n(ϖ_n);
  ``jain_reg``: F_n(ϖ_n) + (λ_n/2)·‖ω̂_{n,G} − ϖ_n‖₂, PFLlib Ditto's
  ``train_metrics_personalized``; ``jain_objective``: eq. 3a's
  (1 − λ_n/2)·F_n + (λ_n/2)·‖·‖²), rounds run, wall time; and the same
  metrics (``*_first_t0``) at ``first_t0_round``, the round in which the first
  client makes its T0-th upload (before the tail in which the last clients
  spend theirs);
- ``table.md``: means over seeds per (pair, policy, T0), and the relative gap of
  the proposed scheduler to the best baseline at each T0 (spec [AMBIG-15]);
- ``accuracy_vs_t0.png``, ``jain_vs_t0.png``, ``jain_reg_vs_t0.png``,
  ``max_loss_vs_t0.png``.

Policies: ``minmax`` (proposed, Algorithm 2), ``round_robin``, ``random``,
``non_adjustment`` (KM selection, fixed coefficients) and ``error_free``
(``minmax`` with ρ = 0 on both links). Pairs: ``cnn-fmnist`` (always available);
``dnn-mnist`` and ``mlr-mnist`` when MNIST IDX files are under ``--data-root``;
``mlr-digits`` (scikit-learn's digits) for quick checks.

Defaults are the paper-literal local computation of spec [AMBIG-4]: all data
(≈ 2,625 train samples per client), one mini-batch step of q·abs(D_n) = 26 per
model per round (eq. 20). ``--samples-per-client 400 --steps 10 --batch-size 32``
is the scaled-down "practical" setting of ``wpfl_minmax.yaml``.

Readings of the paper that its text leaves open (each a flag, recorded in
``settings.json``; defaults are the earlier runs' setting):

| flag | default | paper-literal reading |
|---|---|---|
| ``--rr-subchannels`` | ``best_gain`` (Hungarian on gains) | ``index``: cyclic clients, subchannels in index order (spec §5.1) |
| ``--c5`` | off | on: τ_max of Table I in the min-max matching (C5) and a deadline for every policy (late uploads lost) |
| ``--downlink-band`` | ``subchannel`` (noise N0·1 MHz) | ``full``: broadcast over the 10 MHz band, noise N0·10 MHz ([AMBIG-2]) |
| ``--partition`` | ``pathological`` (2 classes, equal sizes) | ``dirichlet`` with ``--alpha 0.1`` (unequal clients; not stated) |
| ``--report-at`` | ``end`` (Sec. V-C's T: no client may upload any more) | ``first_t0``: table and plots at the first client's T0-th upload |

The machine this was written on is shared and slow: every knob that sets the
cost has a flag (``--seeds``, ``--t0``, ``--samples-per-client``, ``--steps``,
``--batch-size``, ``--rounds``), and finished runs are kept in ``results.csv`` and skipped when the
script is run again (``--fresh`` starts over).

Example:
    python examples/reproduce_wpfl.py --t0 20 --seeds 0 1 2
        --policies minmax round_robin random --out runs/wpfl_repro
"""

from __future__ import annotations

import argparse
import math
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rayfl.compare.progress import progress_bar, script_main

HERE = Path(__file__).resolve().parent
BASE_CONFIG = HERE / "wpfl_minmax.yaml"
if str(HERE) not in sys.path:  # loaded by path (the tests), not run as a script
    sys.path.insert(0, str(HERE))

# The results.csv half of the script; every public name is re-exported here.
from _support.wpfl_report import (  # noqa: E402, F401
    FIELDS,
    FIRST_T0,
    JAIN_READINGS,
    METRICS,
    PAPER_CNN,
    POLICIES,
    SETTING_DEFAULTS,
    aggregate,
    append_row,
    check_settings,
    final_metrics,
    first_t0_round,
    load_rows,
    relative_gain,
    write_plots,
    write_table,
)

#: Per pair: dataset, model, C, δ_Q, τ_max (Table I / spec §6.1), the paper's μ
#: and L (spec §4.6) and abs(ω), which the min-max scheduler's bound needs.
PAIRS: dict[str, dict[str, Any]] = {
    "cnn-fmnist": {
        "dataset": "fashion_mnist",
        "model": "cnn",
        "clip": 20.0,
        "delta": 5e-3,
        "mu": 0.05,
        "L": 0.29,
        "params": 582_026,
        "tau_max": 0.6,
    },
    "dnn-mnist": {
        "dataset": "mnist",
        "model": "mlp",
        "clip": 7.0,
        "delta": 1e-3,
        "mu": 0.27,
        "L": 1.32,
        "params": 79_510,
        "tau_max": 0.1,
    },
    "mlr-mnist": {
        "dataset": "mnist",
        "model": "mlr",
        "clip": 3.0,
        "delta": 1e-3,
        "mu": 0.13,
        "L": 0.43,
        "params": 7_850,
        "tau_max": 0.01,
    },
    # Fashion-MNIST with the DNN (784-100-10); μ, L of DNN/MNIST (not given for it)
    "dnn-fmnist": {
        "dataset": "fashion_mnist",
        "model": "mlp",
        "clip": 7.0,
        "delta": 1e-3,
        "mu": 0.27,
        "L": 1.32,
        "params": 79_510,
        "tau_max": 0.1,
    },
    # scikit-learn's shipped 8x8 digits: for smoke tests only (MLR constants)
    "mlr-digits": {
        "dataset": "digits",
        "model": "mlr",
        "clip": 3.0,
        "delta": 1e-3,
        "mu": 0.13,
        "L": 0.43,
        "params": 650,
        "tau_max": 0.01,
    },
}


def overrides_for(
    pair: str, policy: str, t0: int, seed: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Return the dotted config overrides of one run."""
    spec = PAIRS[pair]
    out: dict[str, Any] = {
        "name": f"wpfl-{pair}-{policy}-t{t0}-s{seed}",
        "seed": seed,
        "rounds": args.rounds,
        "data.dataset": spec["dataset"],
        "model.kind": spec["model"],
        "privacy.clip_norm": spec["clip"],
        "privacy.delta": spec["delta"],
        "privacy.max_uploads": t0,
        "scheduler.policy": "minmax" if policy == "error_free" else policy,
        "algorithm.local_steps": args.steps,
        "algorithm.personal_steps": args.steps,
        "algorithm.batch_size": args.batch_size,
        "algorithm.personal_all_clients": not args.pl_scheduled_only,
        "output.dir": str(Path(args.out) / "runs"),
        "output.plots": False,
        "output.progress": False,
    }
    if args.data_root and spec["dataset"] != "digits":  # digits reads no files
        out["data.root"] = args.data_root
    if args.samples_per_client:
        out["data.max_samples_per_client"] = args.samples_per_client
    if spec["model"] == "mlp":
        out["model.hidden"] = [100]
    if args.partition == "dirichlet":
        out["data.partition"] = "dirichlet"
        out["data.alpha"] = args.alpha
    if args.downlink_band != "subchannel":
        out["wireless.downlink_band"] = args.downlink_band
    if args.c5:  # every policy: late uploads are lost (wireless.max_latency_s)
        out["wireless.max_latency_s"] = spec["tau_max"]
    if policy == "round_robin" and args.rr_subchannels != "best_gain":
        out["scheduler.params"] = {"subchannels": args.rr_subchannels}
    if policy in ("minmax", "error_free", "non_adjustment"):
        from rayfl.privacy.quantized_gaussian import wpfl_noise_std

        sigma = wpfl_noise_std(
            epsilon=1.0,
            delta=spec["delta"],
            max_uploads=t0,
            clip_norm=spec["clip"],
            bits=16,
            sample_rate=0.01,
        )
        out["scheduler.params"] = {
            "mu": spec["mu"],
            "smoothness": spec["L"],
            "num_params": spec["params"],
            "clip_norm": spec["clip"],
            "noise_std": sigma,
        }
        if args.c5:  # constraint C5 of the matching: r ≥ abs(ω)·R/τ_max
            out["scheduler.params"]["max_latency_s"] = spec["tau_max"]
    if policy == "error_free":
        out["wireless.effects"] = "none"
        out["algorithm.downlink_errors"] = False
        out["scheduler.params"]["assume_error_free"] = True
    return out


def available_pairs(requested: list[str], data_root: str | None) -> list[str]:
    """Drop MNIST pairs when no MNIST files are found (with a note)."""
    from rayfl.data.datasets import available_datasets

    found = available_datasets(data_root)
    keep = []
    for pair in requested:
        if PAIRS[pair]["dataset"] in found:
            keep.append(pair)
        else:
            print(f"skipping {pair}: {PAIRS[pair]['dataset']} files not found")
    return keep


def _add_sweep_flags(parser: argparse.ArgumentParser) -> None:
    """What runs (pairs, policies, T0, seeds) and the cost of each run."""
    parser.add_argument(
        "--pairs",
        nargs="+",
        default=["cnn-fmnist", "dnn-mnist", "mlr-mnist"],
        choices=sorted(PAIRS),
    )
    parser.add_argument(
        "--policies", nargs="+", default=list(POLICIES), choices=POLICIES
    )
    parser.add_argument("--t0", nargs="+", type=int, default=[5, 10, 15, 20, 25, 30])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--samples-per-client",
        type=int,
        default=0,
        help="cap per client before the 75/25 split (0 = all, the paper's size)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=1,
        help="mini-batch steps per model per round (1 = eq. 20, paper-literal)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=26,
        help="mini-batch size (q·abs(D_n) = 0.01 x 2,625 with all data)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=200,
        help="round guard (the T0 rule normally ends a run first)",
    )


def _add_resource_flags(parser: argparse.ArgumentParser) -> None:
    """Where the data and the results are, and the CPUs the runs share."""
    parser.add_argument("--data-root", default=None, help="MNIST IDX files root")
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument(
        "--parallel", type=int, default=1, help="runs at once in one Ray session"
    )
    parser.add_argument(
        "--clients-per-actor",
        type=int,
        default=0,
        help="ray.clients_per_actor of each run (0 = the config's; results do "
        "not depend on it)",
    )
    parser.add_argument("--out", default="runs/wpfl_repro")


def _add_reading_flags(parser: argparse.ArgumentParser) -> None:
    """The readings of the paper its text leaves open (see the module docstring)."""
    parser.add_argument(
        "--pl-scheduled-only",
        action="store_true",
        help="[AMBIG-5] only scheduled clients take the PL step (Alg. 1); "
        "default: every client every round (Sec. III-A, Alg. 2)",
    )
    parser.add_argument(
        "--rr-subchannels",
        choices=("best_gain", "index"),
        default=SETTING_DEFAULTS["rr_subchannels"],
        help="round_robin's subchannels: Hungarian matching on the gains "
        "(default) or index order, the paper's baseline (spec §5.1)",
    )
    parser.add_argument(
        "--c5",
        action="store_true",
        help="constraint C5 on with the pair's τ_max (CNN 0.6 s, DNN 0.1 s, MLR "
        "0.01 s): minmax/non_adjustment/error_free match only pairs with "
        "r ≥ abs(ω)·16/τ_max, and every policy loses uploads later than τ_max",
    )
    parser.add_argument(
        "--downlink-band",
        choices=("subchannel", "full"),
        default=SETTING_DEFAULTS["downlink_band"],
        help="noise bandwidth of the broadcast (spec [AMBIG-2]): one 1 MHz "
        "subchannel (default) or the full 10 MHz band",
    )
    parser.add_argument(
        "--partition",
        choices=("pathological", "dirichlet"),
        default=SETTING_DEFAULTS["partition"],
        help="pathological: 2 classes per client, equal sizes (default); "
        "dirichlet: Dir(--alpha) class mix, unequal sizes",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=SETTING_DEFAULTS["alpha"],
        help="Dirichlet concentration with --partition dirichlet",
    )
    parser.add_argument(
        "--report-at",
        choices=("end", "first_t0"),
        default="end",
        help="which reading table.md and the plots use: the last round (after "
        "the T0 tail; the paper's T of Sec. V-C) or the round in which the first "
        "client makes its T0-th upload (both are always in results.csv)",
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Return the script's flags."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _add_sweep_flags(parser)
    _add_resource_flags(parser)
    _add_reading_flags(parser)
    parser.add_argument("--fresh", action="store_true", help="ignore results.csv")
    return parser.parse_args(argv)


def _init_ray(num_cpus: int) -> None:
    """Start one Ray session for every run (start-up can time out: retried)."""
    import ray

    for attempt in range(8):
        if ray.is_initialized():
            break
        try:
            ray.init(
                address="local",  # never join a cluster left by `ray start`
                num_cpus=num_cpus,
                include_dashboard=False,
                logging_level="ERROR",
            )
        except Exception as error:  # noqa: BLE001  (Ray raises a bare Exception)
            print(f"ray.init failed ({error}); retry {attempt + 1}/8", flush=True)
            ray.shutdown()
            time.sleep(30)


def _run_one(
    key: tuple[str, str, int, int],
    args: argparse.Namespace,
    results: Path,
    lock: threading.Lock,
) -> None:
    """Run one (pair, policy, T0, seed) and append its row to ``results``."""
    import rayfl

    pair, policy, t0, seed = key
    started = time.perf_counter()
    overrides = overrides_for(pair, policy, t0, seed, args)
    if args.clients_per_actor:
        overrides["ray.clients_per_actor"] = args.clients_per_actor
    elif args.parallel > 1:
        # "auto" packing gives one run one actor per CPU, all CPUs; runs at
        # once would then each hold part of the CPUs and wait for the rest
        # forever. Give each run its share of the CPUs instead.
        import yaml

        clients = yaml.safe_load(BASE_CONFIG.read_text())["data"]["num_clients"]
        share = max(1, args.num_cpus // args.parallel)
        overrides["ray.clients_per_actor"] = math.ceil(clients / share)
    result = rayfl.run(BASE_CONFIG, overrides)
    row = {
        "pair": pair,
        "policy": policy,
        "t0": t0,
        "seed": seed,
        **final_metrics(result, t0),
        "wall_s": round(time.perf_counter() - started, 1),
    }
    with lock:
        append_row(results, row)
        print(row, flush=True)


def main(argv: list[str] | None = None) -> None:
    """Parse the flags, run what is missing, write the table and plots."""
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.csv"
    if args.fresh and results.exists():
        results.unlink()
    check_settings(out / "settings.json", args, fresh=args.fresh)
    done = {
        (r["pair"], r["policy"], int(r["t0"]), int(r["seed"]))
        for r in load_rows(results)
    }
    pairs = available_pairs(args.pairs, args.data_root)
    _init_ray(args.num_cpus)
    todo = [
        (pair, policy, t0, seed)
        for pair in pairs
        for t0 in args.t0
        for seed in args.seeds
        for policy in args.policies
        if (pair, policy, t0, seed) not in done
    ]
    lock = threading.Lock()

    # Runs share one Ray session; with --parallel > 1 several run at once (their
    # actors then need --num-cpus large enough to be scheduled together).
    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        futures = [pool.submit(_run_one, key, args, results, lock) for key in todo]
        for future in progress_bar(futures, desc="reproduce_wpfl"):
            future.result()
    rows = load_rows(results)
    if rows:
        suffix = FIRST_T0 if args.report_at == "first_t0" else ""
        print(write_table(rows, out, suffix))
        write_plots(rows, out, suffix)


if __name__ == "__main__":
    sys.exit(script_main(main))
