"""Smoke run of examples/rl_surrogate_study.py on a tiny budget (slow, needs RLlib)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from rayfl.train_policy import rllib_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not rllib_available(),
        reason="RLlib not installed: pip install -e '.[rl]' (ray[rllib]==2.60.0)",
    ),
]

SCRIPT = Path(__file__).parents[2] / "examples" / "rl_surrogate_study.py"
TINY = {
    "name": "tiny-study",
    "rounds": 4,
    "data": {"dataset": "digits", "num_clients": 5, "partition": "iid"},
    "model": {"kind": "mlr"},
    "wireless": {"num_subchannels": 2},
    "output": {"progress": False, "plots": False},
    "rl": {
        "train_batch_size": 40,
        "minibatch_size": 20,
        "num_epochs": 1,
        "hidden": [8],
    },
}


def _study():
    spec = importlib.util.spec_from_file_location("rl_surrogate_study", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_study_trains_evaluates_and_skips_trained_seeds(tmp_path, monkeypatch):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    out, runs = tmp_path / "out", tmp_path / "runs"
    argv = [
        str(SCRIPT),
        f"--config={config}",
        "--train-seeds",
        "0",
        "--iterations=1",
        "--eval-seeds=50:53",
        "--baselines",
        "round_robin",
        "random",
        f"--out={out}",
        f"--runs={runs}",
    ]
    monkeypatch.setattr(sys, "argv", argv)
    _study().main()
    table = pd.read_csv(out / "eval.csv")
    assert sorted(table["policy"].unique()) == ["learned", "random", "round_robin"]
    for policy, seeds in table.groupby("policy")["seed"]:
        assert sorted(seeds) == [50, 51, 52], policy
    paired = pd.read_csv(out / "paired.csv")
    learned = table[table["policy"] == "learned"].set_index("seed")["episode_reward"]
    rr = table[table["policy"] == "round_robin"].set_index("seed")["episode_reward"]
    got = paired.query("baseline == 'round_robin' and train_seed == '0'")
    assert got.set_index("seed")["diff"].to_dict() == pytest.approx(
        (learned - rr).to_dict()
    )
    assert (out / "learning_curve.png").is_file()
    assert (out / "policies" / "train_seed0" / "policy.npz").is_file()
    # a second run reuses the exported policy: no new training run directory
    trained = sorted(runs.iterdir())
    _study().main()
    assert sorted(runs.iterdir()) == trained
    # held-out seeds that overlap the training seeds are refused
    monkeypatch.setattr(sys, "argv", [*argv[:-3], "--eval-seeds=0:2", *argv[-2:]])
    with pytest.raises(SystemExit, match="overlap"):
        _study().main()
