"""`rayfl compare --seeds ... --fast` gives the numbers of full runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rayfl.compare.seeds import compare_seeds, fast_table
from rayfl.config import load_config

BASE = {
    "name": "fast",
    "rounds": 3,
    "data": {
        "dataset": "digits",
        "num_clients": 6,
        "partition": "dirichlet",
        "alpha": 0.5,
        "min_partition_size": 20,
    },
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": {"kind": "fedavg", "local_epochs": 1, "batch_size": 16, "lr": 0.1},
    "wireless": {"num_subchannels": 2, "effects": "bit_flip"},
    "output": {"progress": False, "plots": False},
}
POLICIES = ["proportional_fair", "learned"]  # stateful and learned
COLUMNS = [
    "final_acc",
    "max_test_loss",
    "jain_train_loss",
    "total_latency_s",
    "total_energy_j",
    "total_bits",
]


@pytest.fixture(scope="module")
def tables(ray_session, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("cmp"))
    seeds = [5]  # not 0: the seed moves the data partition too
    full = {}
    for fast in (False, True):
        _, d = compare_seeds(BASE, POLICIES, seeds, [f"output.dir={out}"], fast=fast)
        full[fast] = pd.read_csv(d / "table_all.csv")
    return full


@pytest.mark.slow  # four compare runs; a speed feature
def test_fast_equals_full_runs(tables):
    slow, fast = tables[False], tables[True]
    key = ["seed", "policy"]
    slow = slow.sort_values(key).reset_index(drop=True)
    fast = fast.sort_values(key).reset_index(drop=True)
    assert slow[key].equals(fast[key])
    for column in COLUMNS:
        np.testing.assert_allclose(
            fast[column], slow[column], rtol=1e-6, err_msg=column
        )
    # the policies differ, so equality is not an artefact of one schedule
    assert fast.groupby("seed")["total_latency_s"].nunique().min() > 1


def test_fast_needs_a_wireless_section(ray_session):
    cfg = load_config({k: v for k, v in BASE.items() if k != "wireless"})
    with pytest.raises(ValueError, match="wireless"):
        fast_table(cfg, ["round_robin"], [0])


def test_cli_seed_range_and_fast_needs_seeds(capsys):
    from rayfl.cli import _parse_seeds, main

    assert _parse_seeds("1000:1003") == [1000, 1001, 1002]
    assert _parse_seeds("0, 1,2") == [0, 1, 2]
    assert main(["compare", "x.yaml", "--policies", "random", "--fast"]) == 2
    assert "--fast needs --seeds" in capsys.readouterr().err
