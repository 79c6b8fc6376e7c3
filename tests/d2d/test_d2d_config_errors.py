"""Configs a D2D run refuses up front (no Ray needed)."""

import pytest

from rayfl.config import ConfigError, load_config
from rayfl.d2d.config import check_d2d_run as _check


def test_federated_baseline_refuses_algorithms_that_need_a_server_store():
    with pytest.raises(ConfigError, match="per-client downloads"):
        load_config(
            "examples/pfedwn_d2d.yaml",
            ["topology.method=federated", "algorithm.kind=fedamp"],
        )
    ok = load_config(
        "examples/pfedwn_d2d.yaml",
        ["topology.method=federated", "algorithm.kind=perfedavg"],
    )
    _check(ok)  # Per-FedAvg runs over the target group


@pytest.mark.parametrize(
    "override",
    ["topology.target=6", "wireless.tx_power_dbm=20"],
)
def test_d2d_combinations_are_config_errors(override):
    field = override.split("=")[0]
    with pytest.raises(ConfigError, match=field.split(".")[0]):
        load_config("examples/pfedwn_d2d.yaml", [override, "data.num_clients=6"])


def test_d2d_runs_may_checkpoint():
    cfg = load_config(
        "examples/pfedwn_d2d.yaml", ["output.checkpoint_every=2", "data.num_clients=6"]
    )
    _check(cfg)
    assert cfg.output.checkpoint_every == 2
