"""Config sections several test modules share (one place to read them)."""

from __future__ import annotations

from typing import Any

#: A small WPFL privacy section (seed 000): Theorem-1 σ for ε = 1, δ = 1e-3 at
#: C = 3, T0 = 2 uploads per client, q = 0.01 used for σ only (never the ledger).
WPFL_PRIVACY: dict[str, Any] = {
    "mechanism": "quantized_gaussian",
    "calibration": "wpfl",
    "epsilon": 1.0,
    "delta": 1e-3,
    "clip_norm": 3.0,
    "max_uploads": 2,
    "calibration_sample_rate": 0.01,
}

#: A small WPFL algorithm section: Ditto PL with η_F = η_P = 0.1, two steps each.
WPFL_ALGORITHM: dict[str, Any] = {
    "kind": "wpfl",
    "lr": 0.1,
    "personal_lr": 0.1,
    "local_steps": 2,
    "personal_steps": 2,
    "batch_size": 16,
}

#: A small D2D run (seed 3, 6 digits clients, target 0): 2 rounds of FedAvg.
TINY_D2D: dict[str, Any] = {
    "seed": 3,
    "rounds": 2,
    "data": {
        "dataset": "digits",
        "num_clients": 6,
        "partition": "dirichlet",
        "alpha": 0.5,
        "min_partition_size": 30,
    },
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": {"kind": "fedavg", "lr": 0.1, "batch_size": 16},
    "topology": {"kind": "d2d", "target": 0, "epsilon": 0.2},
    "ray": {"num_cpus": 2},
    "output": {"progress": False, "plots": False},
}

#: Eight digits clients, Dirichlet(1.0) labels (the hierarchy tests' data).
DIGITS_8: dict[str, Any] = {
    "dataset": "digits",
    "num_clients": 8,
    "partition": "dirichlet",
    "alpha": 1.0,
    "min_partition_size": 20,
}
