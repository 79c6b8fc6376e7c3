"""examples/wpfl_dithering.py: the CSV row of a run, without Ray."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location(
        "wpfl_dithering", ROOT / "examples/wpfl_dithering.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["wpfl_dithering"] = module
    spec.loader.exec_module(module)
    return module


def test_row_counts_bits_per_scheduled_upload_and_delivered_share():
    mod = _script()
    rounds = pd.DataFrame(
        {"num_scheduled": [4, 4], "num_delivered": [4, 2], "bits": [800.0, 400.0]}
    )
    summary = {
        "final": {"personal_acc": 0.8, "global_acc": 0.3},
        "model_dim": 10,
        "rounds_without_update": 1,
        "privacy": {"epsilon_max": 12.5, "laplace_scale": None},
    }
    row = mod.row_of(
        SimpleNamespace(rounds=rounds, summary=summary), "proposed", 2, 3.14
    )
    assert row["bits_per_param"] == 1200.0 / (8 * 10)
    assert row["uploads_delivered"] == 6 / 8
    assert row["epsilon_max"] == 12.5 and math.isnan(row["laplace_scale"])
    assert row["seed"] == 2 and row["wall_s"] == 3.1


def test_every_mechanism_is_a_valid_config():
    from rayfl.config import load_config

    mod = _script()
    for mechanism, overrides in mod.MECHANISMS.items():
        cfg = load_config(str(ROOT / mod.CONFIG), {**mod.BASE, **overrides})
        dithering = mechanism.startswith("dithering")
        unquantized = dithering or mechanism == "perfect_gaussian"
        assert (cfg.algorithm.dp_mechanism == "dithering") == dithering
        assert (cfg.compression.quantize_bits is None) == unquantized
        assert cfg.algorithm.dp_mechanism == ("dithering" if dithering else mechanism)


def test_row_means_effective_bits_over_the_uploads_that_have_them():
    mod = _script()
    rounds = pd.DataFrame({"num_scheduled": [2], "num_delivered": [2], "bits": [320.0]})
    metrics = pd.DataFrame(
        {
            "effective_quantization_bits": [5.0, 7.0, float("nan")],
            "effective_overhead_bits": [4.0, 4.0, float("nan")],
            "effective_bits_per_parameter": [9.0, 11.0, float("nan")],
        }
    )
    summary = {
        "final": {"personal_acc": 0.8, "global_acc": 0.3},
        "model_dim": 10,
        "rounds_without_update": 0,
        "privacy": {"epsilon_max": 1.0, "noise_std": 0.25},
    }
    row = mod.row_of(
        SimpleNamespace(rounds=rounds, summary=summary, metrics=metrics), "ma", 0, 1.0
    )
    assert row["effective_bq"] == 6.0 and row["effective_bo"] == 4.0
    assert row["effective_bits"] == 10.0 and row["noise_std"] == 0.25
    no_columns = mod.row_of(
        SimpleNamespace(rounds=rounds, summary=summary, metrics=pd.DataFrame()),
        "none",
        0,
        1.0,
    )
    assert math.isnan(no_columns["effective_bq"])
    no_dp = {**summary, "privacy": {"epsilon_max": None, "noise_std": None}}
    row = mod.row_of(
        SimpleNamespace(rounds=rounds, summary=no_dp, metrics=metrics), "none", 0, 1.0
    )
    assert math.isnan(row["epsilon_max"]) and math.isnan(row["noise_std"])
