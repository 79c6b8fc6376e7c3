#!/usr/bin/env python3
"""WPFL's DP mechanisms side by side (the paper's Fig. 2 and Table III), on the current code.

The WPFL paper (Zhao et al., arXiv:2506.02422, Fig. 2 and Table III) compares its
quantization-assisted Gaussian DP with the NbAFL Gaussian, the moments-accountant
(MA) Gaussian, a perfect (unquantized, error-free) Gaussian, no DP, and a
subtractive-dithering Laplace mechanism (``algorithm.dp_mechanism``; Dithering is
``rayfl/compression/dithering.py``, a reconstruction). This script runs, for each
seed, one run of ``examples/wpfl_minmax.yaml`` per mechanism (CNN on
Fashion-MNIST, 20 clients × 100 samples, min-max scheduler, T0 = 5 uploads, 3
local and 3 PL steps per round):

| mechanism | what changes |
|---|---|
| ``proposed`` | the paper's quantization-assisted Gaussian DP (the YAML as it is) |
| ``gaussian`` | NbAFL's σ, same quantizer and channel |
| ``ma`` | the moments accountant's σ, same quantizer and channel |
| ``perfect_gaussian`` | NbAFL's σ, no quantizer, error-free links |
| ``none`` | σ = 0, same quantizer and channel |
| ``dithering`` | Laplace dithering at the configured ε (1), no R-bit quantizer |
| ``dithering_eps11100`` | the same at ε = 11,100, where its index needs ≈ 16 bits |

and writes one row per (mechanism, seed) to ``OUT/CSV`` (default
``dp_mechanisms.csv``): final PL and global accuracy, the fraction of scheduled
uploads delivered, uplink bits per parameter per scheduled upload, the paper's
effective-bit accounting (B_q, B_o, their capped sum; NaN without the R-bit
quantizer), the noise std σ, the ledger's largest per-client ε (for Dithering a
pure ε: uploads · 2C√d / b, the L1 sensitivity of a clipped update over the
Laplace scale b), the Laplace scale, rounds without any delivered update, and the
wall time. Rows already in the CSV are skipped on a re-run.

Usage (from the repository root, venv active)::

    python examples/wpfl_dithering.py --seeds 0 1 2 --out docs/wpfl
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import pandas as pd

from rayfl.cluster.session import RaySession
from rayfl.config import RayConfig

CONFIG = "examples/wpfl_minmax.yaml"
BASE = {
    "data.max_samples_per_client": 100,
    "algorithm.local_steps": 3,
    "algorithm.personal_steps": 3,
    "privacy.max_uploads": 5,
    "output.progress": False,
    "output.plots": False,
}
MECHANISMS: dict[str, dict[str, Any]] = {
    "proposed": {},
    "gaussian": {"algorithm.dp_mechanism": "gaussian"},
    "ma": {"algorithm.dp_mechanism": "ma"},
    "perfect_gaussian": {
        "algorithm.dp_mechanism": "perfect_gaussian",
        "compression.quantize_bits": None,
        "algorithm.downlink_bits": None,
        "wireless.effects": "none",
    },
    "none": {"algorithm.dp_mechanism": "none"},
    "dithering": {
        "algorithm.dp_mechanism": "dithering",
        "compression.quantize_bits": None,
    },
    "dithering_eps11100": {
        "algorithm.dp_mechanism": "dithering",
        "compression.quantize_bits": None,
        "privacy.epsilon": 11100,
    },
}


def _mean_of(metrics: Any, column: str) -> float:
    """The mean of a per-upload column over the uploads that have it (else NaN)."""
    if metrics is None or column not in metrics:
        return float("nan")
    values = pd.to_numeric(metrics[column], errors="coerce").dropna()
    return float(values.mean()) if len(values) else float("nan")


def row_of(result: Any, mechanism: str, seed: int, wall_s: float) -> dict[str, Any]:
    """Return the CSV row of one finished run."""
    rounds = result.rounds
    summary = result.summary
    scheduled = float(rounds["num_scheduled"].sum())
    metrics = getattr(result, "metrics", None)
    final = summary["final"]
    privacy = summary.get("privacy", {})
    return {
        "mechanism": mechanism,
        "seed": seed,
        "pl_acc": float(final["personal_acc"]),
        "global_acc": float(final["global_acc"]),
        "uploads_delivered": float(rounds["num_delivered"].sum()) / scheduled,
        "bits_per_param": float(rounds["bits"].sum())
        / (scheduled * float(summary["model_dim"])),
        "effective_bq": _mean_of(metrics, "effective_quantization_bits"),
        "effective_bo": _mean_of(metrics, "effective_overhead_bits"),
        "effective_bits": _mean_of(metrics, "effective_bits_per_parameter"),
        "noise_std": float(privacy.get("noise_std") or float("nan")),
        "epsilon_max": float(privacy.get("epsilon_max") or float("nan")),
        "laplace_scale": float(privacy.get("laplace_scale") or float("nan")),
        "rounds_without_update": int(summary["rounds_without_update"]),
        "wall_s": round(wall_s, 1),
    }


def main(argv: list[str] | None = None) -> pd.DataFrame:
    """Run every (mechanism, seed) not yet in the CSV; write the CSV after each."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--mechanisms", nargs="+", choices=list(MECHANISMS), default=list(MECHANISMS)
    )
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("docs/wpfl"))
    parser.add_argument(
        "--csv", default="dp_mechanisms.csv", help="CSV name under --out"
    )
    parser.add_argument("--runs-dir", type=Path, default=Path("runs/wpfl_dithering"))
    args = parser.parse_args(argv)
    import rayfl

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / args.csv
    rows = pd.read_csv(path).to_dict("records") if path.exists() else []
    done = {(str(r["mechanism"]), int(r["seed"])) for r in rows}
    todo = [(m, s) for s in args.seeds for m in args.mechanisms if (m, s) not in done]
    session = RaySession(RayConfig(num_cpus=args.num_cpus)) if todo else None
    try:
        for mechanism, seed in todo:
            overrides = {
                **BASE,
                **MECHANISMS[mechanism],
                "seed": seed,
                "output.dir": str(args.runs_dir),
                "name": f"{mechanism}-s{seed}",
            }
            started = time.perf_counter()
            result = rayfl.run(CONFIG, overrides)
            rows.append(row_of(result, mechanism, seed, time.perf_counter() - started))
            print(rows[-1], flush=True)
            pd.DataFrame(rows).to_csv(path, index=False)
    finally:
        if session is not None:
            session.close()
    return pd.DataFrame(rows)


if __name__ == "__main__":
    main()
