"""The WPFL paper's untried readings as flags of examples/reproduce_wpfl.py."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest
import yaml

from rayfl.config import load_config
from rayfl.data.federated import build_federated
from tests.test_reproduce_wpfl import load_script, tiny_args

FLAGS = (
    "--rr-subchannels",
    "index",
    "--c5",
    "--downlink-band",
    "full",
    "--partition",
    "dirichlet",
    "--alpha",
    "0.1",
)


def _overrides(module, policy, *extra):
    args = module.parse_args(tiny_args("out", *extra))
    return module.overrides_for("mlr-digits", policy, 1, 0, args)


def test_each_flag_sets_only_its_own_overrides():
    module = load_script("reproduce_wpfl_flags")
    for policy in ("round_robin", "random", "minmax", "error_free"):
        default = _overrides(module, policy)
        flagged = _overrides(module, policy, *FLAGS)
        changed = {k for k in flagged if flagged.get(k) != default.get(k)}
        expected = {
            "data.partition",
            "data.alpha",
            "wireless.downlink_band",
            "wireless.max_latency_s",
        }
        if policy in ("round_robin", "minmax", "error_free"):
            expected.add("scheduler.params")
        assert changed == expected, policy
        assert flagged["wireless.max_latency_s"] == 0.01  # MLR's τ_max, Table I
        assert flagged["wireless.downlink_band"] == "full"
        assert (flagged["data.partition"], flagged["data.alpha"]) == ("dirichlet", 0.1)
        for key in expected - {"scheduler.params"}:
            assert key not in default  # the defaults are the earlier runs' setting
    rr = _overrides(module, "round_robin", "--rr-subchannels", "index")
    assert rr["scheduler.params"] == {"subchannels": "index"}
    assert "scheduler.params" not in _overrides(module, "round_robin")
    mm = _overrides(module, "minmax", "--c5")
    assert mm["scheduler.params"]["max_latency_s"] == 0.01
    assert "max_latency_s" not in _overrides(module, "minmax")["scheduler.params"]


def test_dirichlet_flag_gives_unequal_clients():
    module = load_script("reproduce_wpfl_dir")
    sizes = {}
    for name, extra in (("default", ()), ("dirichlet", ("--partition", "dirichlet"))):
        overrides = _overrides(module, "minmax", *extra)
        overrides.pop("output.dir")
        cfg = load_config(module.BASE_CONFIG, overrides)
        data = build_federated(cfg.data, seed=cfg.seed)
        sizes[name] = np.asarray(data.num_train)
    assert np.ptp(sizes["default"]) <= 1  # 60 samples each, 75/25
    assert np.ptp(sizes["dirichlet"]) > 10


def test_first_t0_round_reads_the_first_client_to_reach_t0():
    module = load_script("reproduce_wpfl_t0")
    metrics = pd.DataFrame(
        {
            "round": [0, 0, 0, 1, 1, 1, 2, 2, 2],
            "client": [0, 1, 2] * 3,
            "scheduled": [1, 1, 0, 0, 1, 1, 1, 0, 1],
        }
    ).astype({"scheduled": bool})
    assert module.first_t0_round(metrics, 2) == 1  # client 1: rounds 0 and 1
    assert module.first_t0_round(metrics, 3) is None


def test_settings_json_records_every_reading(tmp_path):
    module = load_script("reproduce_wpfl_settings")
    path = tmp_path / "settings.json"
    module.check_settings(path, module.parse_args(tiny_args(tmp_path)), fresh=False)
    saved = json.loads(path.read_text())
    assert {k: saved[k] for k in module.SETTING_DEFAULTS} == module.SETTING_DEFAULTS
    # an older settings.json without the new keys had the defaults: still accepted
    path.write_text(
        json.dumps(
            {
                k: saved[k]
                for k in saved
                if k in ("steps", "samples_per_client", "batch_size", "rounds")
            }
        )
    )
    module.check_settings(path, module.parse_args(tiny_args(tmp_path)), fresh=False)
    with pytest.raises(SystemExit, match="another --out"):
        module.check_settings(
            path, module.parse_args(tiny_args(tmp_path, "--c5")), fresh=False
        )


@pytest.mark.slow
def test_flags_change_the_runs(ray_session, tmp_path):
    """Tiny real runs (digits, T0 = 1: two rounds): each flag reaches its run."""
    module = load_script("reproduce_wpfl_smoke")
    plain, flagged = tmp_path / "plain", tmp_path / "flagged"
    module.main(tiny_args(plain, "--seeds", "0", "--policies", "round_robin"))
    module.main(
        tiny_args(
            flagged,
            "--seeds",
            "0",
            "--policies",
            "round_robin",
            "minmax",
            "--report-at",
            "first_t0",
            *FLAGS,
        )
    )

    def run_dir(out, policy):
        (path,) = (out / "runs").glob(f"wpfl-mlr-digits-{policy}-*")
        return path

    # index order: the i-th client of the cycle on subchannel i (default: gains)
    for out, identity in ((plain, False), (flagged, True)):
        m = pd.read_parquet(run_dir(out, "round_robin") / "metrics.parquet")
        first = m[(m["round"] == 0) & m["scheduled"]].sort_values("client")
        assert first["client"].tolist() == list(range(10))
        assert (first["subchannel"].tolist() == list(range(10))) is identity
    # the run configs carry the readings
    for policy in ("round_robin", "minmax"):
        cfg = yaml.safe_load((run_dir(flagged, policy) / "config.yaml").read_text())
        assert cfg["wireless"]["max_latency_s"] == 0.01
        assert cfg["wireless"]["downlink_band"] == "full"
        assert cfg["data"]["partition"] == "dirichlet"
    cfg = yaml.safe_load((run_dir(flagged, "minmax") / "config.yaml").read_text())
    assert cfg["scheduler"]["params"]["max_latency_s"] == 0.01
    # both readings of the final evaluation are in results.csv
    rows = list(csv.DictReader((flagged / "results.csv").open()))
    for row in rows:
        rounds = pd.read_parquet(
            run_dir(flagged, row["policy"]) / "rounds.parquet"
        ).set_index("round")
        assert int(row["first_t0_round"]) == 0  # T0 = 1: the first round
        assert float(row["accuracy_first_t0"]) == pytest.approx(
            rounds.loc[0, "personal_acc"]
        )
        assert float(row["accuracy"]) == pytest.approx(
            rounds["personal_acc"].dropna().iloc[-1]
        )
    assert "at the first client's T0-th upload" in (flagged / "table.md").read_text()
