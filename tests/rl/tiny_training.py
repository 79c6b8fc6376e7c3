"""A two-iteration ``rayfl train-policy`` run and the checks every topology's
slow training test makes of it (tests/d2d, tests/hierarchy)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: PPO settings small enough for a test: 2 iterations of a few env steps (put
#: them in the config's ``rl`` section: the section is validated wherever the
#: config is loaded, not only in training).
TINY_RL = {
    "minibatch_size": 8,
    "num_epochs": 1,
    "hidden": [8],
    "iterations": 2,
    "eval_episodes": 1,
}


def train_tiny(config: dict[str, Any], out: Path) -> Path:
    """Train on ``config`` (``rl`` section over :data:`TINY_RL`) into ``out``."""
    from rayfl.train_policy import train_policy

    config = {
        **config,
        "rl": {**TINY_RL, **config["rl"]},
        "output": {**config.get("output", {}), "dir": str(out)},
    }
    return train_policy(config, verbose=False)


def assert_trained(
    run_dir: Path,
    config: dict[str, Any],
    *,
    num_clients: int,
    num_subchannels: int,
    mode: str = "surrogate",
) -> None:
    """Two iterations logged, the policy's metadata, an evaluation of every policy."""
    progress = pd.read_csv(run_dir / "progress.csv")
    assert progress["iteration"].tolist() == [1, 2]
    assert (progress["env_steps"] >= config["rl"]["train_batch_size"]).all()
    meta = json.loads((run_dir / "policy" / "policy.json").read_text())
    assert (meta["mode"], meta["num_clients"], meta["num_subchannels"]) == (
        mode,
        num_clients,
        num_subchannels,
    )
    evaluation = pd.read_csv(run_dir / "evaluation.csv")
    # with rl.controls the learned schedule is also scored with the configured controls
    extra = {"learned_schedule_only"} if config["rl"].get("controls") else set()
    assert set(evaluation["policy"]) == {"learned", *extra, *config["rl"]["baselines"]}
    assert np.isfinite(evaluation["return"]).all()
