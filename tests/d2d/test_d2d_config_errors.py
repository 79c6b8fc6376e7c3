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


RWP = [
    "topology.mobility=random_waypoint",
    "topology.round_duration_s=5",
    "topology.mobility_speed_min_mps=1",
    "topology.mobility_speed_max_mps=3",
]


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        (RWP[:1], "topology.mobility=random_waypoint needs topology.mobility_speed"),
        (RWP[:1] + RWP[2:], "needs topology.round_duration_s"),
        (["topology.round_duration_s=5"], "round_duration_s is read only with a"),
        (["topology.mobility_memory=0.5"], "mobility_memory is read only with"),
        ([*RWP, "topology.mobility_memory=0.5"], "topology.mobility=gauss_markov"),
        (
            [*RWP[:2], "topology.mobility_speed_min_mps=4", RWP[3]],
            "mobility_speed_min_mps must be <= mobility_speed_max_mps",
        ),
        ([*RWP[:2], "topology.mobility_speed_min_mps=0", RWP[3]], "greater than 0"),
        ([*RWP, "topology.mobility_pause_s=-1"], "greater than or equal to 0"),
        (["topology.mobility=brownian"], "mobility"),
        (
            [
                "topology.mobility=gauss_markov",
                "topology.round_duration_s=5",
                "topology.mobility_memory=1.5",
            ],
            "mobility_memory",
        ),
    ],
)
def test_bad_d2d_mobility_is_a_config_error_naming_the_field(overrides, words):
    with pytest.raises(ConfigError, match=words):
        load_config("examples/pfedwn_d2d.yaml", [*overrides, "data.num_clients=6"])


def test_a_valid_d2d_mobility_loads_with_its_defaults():
    cfg = load_config("examples/pfedwn_d2d.yaml", [*RWP, "data.num_clients=6"])
    assert cfg.topology.mobility == "random_waypoint"
    assert cfg.topology.mobility_pause_s is None  # the model's default, 0
    assert load_config("examples/pfedwn_d2d.yaml").topology.mobility == "static"
