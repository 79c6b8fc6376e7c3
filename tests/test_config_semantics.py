"""Issue 45: no config accepted and then wrong, no refusal after Ray starts.

Each case used to validate and then fail once Ray had started (or ran other
than asked: capped, ignored, NaN). Each must now be a one-line ``ConfigError``
naming the field, raised by ``load_config`` (validation only, no Ray), and its
nearest valid neighbour must still load.
"""

from __future__ import annotations

import math
import os

import pytest

from rayfl.config import ConfigError, load_config
from rayfl.data.datasets import DatasetError, load_dataset

HIER = "examples/h2fdp_fmnist.yaml"
D2D = "examples/pfedwn_d2d.yaml"
QUICK = "examples/quickstart.yaml"
DP = "examples/dp_fedavg_fmnist.yaml"
FMNIST = "examples/fedavg_fmnist.yaml"

CASES = {
    "hier-more-edges-than-clients": (
        HIER,
        {"data.num_clients": 5, "topology.num_edges": 6},
        "topology.num_edges (6) must be <= data.num_clients (5)",
    ),
    "hier-subnet-sizes-do-not-sum": (
        HIER,
        {"topology.clients_per_edge": 3},
        "topology.clients_per_edge sums to 30 over 10 edges but data.num_clients=50",
    ),
    "hier-nearest-leaves-an-edge-empty": (
        HIER,
        {
            "topology.assignment": "nearest",
            "topology.num_edges": 20,
            "data.num_clients": 25,
        },
        "topology.assignment=nearest left edges",
    ),
    "d2d-one-client": (D2D, {"data.num_clients": 1}, "data.num_clients >= 2"),
    "quantize-without-clip-norm": (
        QUICK,
        {"compression.quantize_bits": 8},
        "needs privacy.clip_norm: set privacy.clip_norm=C or "
        "compression.quantize_range=minmax",
    ),
    "distance-inf": (
        HIER,
        {"topology.cost.distance_max_m": float("inf")},
        "topology.cost.distance_max_m: Input should be a finite number",
    ),
    "gamma-inf": (
        HIER,
        {"topology.lr.gamma": float("inf")},
        "topology.lr.gamma: Input should be a finite number",
    ),
    "tx-power-nan": (
        HIER,
        {"topology.cost.tx_power_dbm": float("nan")},
        "topology.cost.tx_power_dbm: Input should be a finite number",
    ),
    "tx-power-overflows-watts": (
        HIER,
        {"topology.cost.tx_power_dbm": 1e308},
        "topology.cost.tx_power_dbm: Input should be less than or equal to 300",
    ),
    "bandwidth-underflows-the-noise": (
        HIER,
        {"topology.cost.bandwidth_hz": 1e-300},
        "give an uplink rate of inf bit/s",
    ),
    "d2d-side-overflows": (
        D2D,
        {"topology.side_m": 1e308},
        "topology.side_m: Input should be less than or equal to 1000000",
    ),
    "hier-dp-constant-inf": (
        HIER,
        {"topology.dp.edge_constant": float("inf")},
        "topology.dp.edge_constant: Input should be a finite number",
    ),
    "nul-in-name": ({}, {"name": "a\x00b"}, "name must not contain control"),
    "newline-in-output-dir": (
        {},
        {"output.dir": "runs\nx"},
        "output.dir must not contain control characters",
    ),
    "nul-in-data-root": (
        FMNIST,
        {"data.root": "/tmp/a\x00b"},
        "data.root must not contain control characters",
    ),
    "nul-in-ray-address": (
        {},
        {"ray.address": "a\x00b:1"},
        "ray.address must not contain control characters",
    ),
    "output-dir-component-too-long": (
        {},
        {"output.dir": "x" * 300},
        "output.dir has a component of 300 bytes; the file system allows",
    ),
    "output-dir-path-too-long": (
        {},
        {"output.dir": "/".join(["x" * 200] * 25)},
        "output.dir is ",
    ),
    "data-root-component-too-long": (
        FMNIST,
        {"data.root": "y" * 300},
        "data.root has a component of 300 bytes",
    ),
    "rl-init-from-component-too-long": (
        {},
        {"rl.init_from": "p" * 300},
        "rl.init_from has a component of 300 bytes",
    ),
    "output-dir-blank": ({}, {"output.dir": " "}, "output.dir must not be blank"),
    "output-dir-edge-spaces": (
        {},
        {"output.dir": "runs "},
        "output.dir must not be blank or start or end with whitespace",
    ),
    "data-root-missing": (
        FMNIST,
        {"data.root": "/no/such/rayfl/dir"},
        "data.root: no such directory: '/no/such/rayfl/dir'",
    ),
    "data-root-on-digits": (
        QUICK,
        {"data.root": "/tmp"},
        "data.root is read by fashion_mnist, mnist and cifar10 only",
    ),
    "synthetic-cap-below-its-sizes": (
        {},
        {
            "data.dataset": "synthetic",
            "model.kind": "mlr",
            "data.max_samples_per_client": 10,
        },
        "data.max_samples_per_client must be >= 50 for data.dataset=synthetic",
    ),
    "eval-clients-on-hierarchy": (
        HIER,
        {"eval_clients": 5},
        "eval_clients is read by the star only: topology.kind=hierarchical",
    ),
    "eval-clients-on-d2d": (
        D2D,
        {"eval_clients": 5},
        "eval_clients is read by the star only: topology.kind=d2d",
    ),
    "eval-clients-above-n": (
        QUICK,
        {"eval_clients": 500},
        "eval_clients must be <= data.num_clients (20), got 500",
    ),
    "clients-per-round-on-hierarchy": (
        HIER,
        {"scheduler.clients_per_round": 5},
        "scheduler.clients_per_round=5 is not read on topology.kind=hierarchical: "
        "each edge's scheduler.policy",
    ),
    "clients-per-round-on-d2d": (
        D2D,
        {"scheduler.clients_per_round": 5},
        "scheduler.clients_per_round=5 is not read on topology.kind=d2d",
    ),
    "noise-std-gives-infinite-epsilon": (
        DP,
        {"privacy.noise_std": 1e-300},
        "privacy.noise_std: the noise multiplier z = σ/(2C) is 5e-301, below 1e-09",
    ),
    "noise-multiplier-too-small": (
        DP,
        {"privacy.noise_multiplier": 1e-12},
        "privacy.noise_multiplier: the noise multiplier",
    ),
    "noise-std-overflows": (
        DP,
        {"privacy.noise_std": 1e300},
        "privacy.noise_std must be <= 1e+09",
    ),
    "clip-norm-overflows-the-quantizer": (
        DP,
        {"privacy.clip_norm": 1e300},
        "privacy.clip_norm must be <= 1e+09",
    ),
    "sparse-dp-noise-gives-infinite-epsilon": (
        {},
        {"algorithm.kind": "sparse_dp", "algorithm.noise_multiplier": 1e-300},
        "algorithm.noise_multiplier: Input should be greater than or equal to 0.000000001",
    ),
    "epsilon-beyond-the-formulas": (
        DP,
        {"privacy.epsilon": 1e300},
        "privacy.epsilon must be <= 1e+06",
    ),
    "privacy-at-an-edge-without-edges": (
        DP,
        {"privacy.placement": "edge"},
        "privacy.placement=edge needs edge servers adding the noise",
    ),
    "wpfl-calibration-without-quantizer": (
        QUICK,
        {
            "privacy.mechanism": "gaussian",
            "privacy.clip_norm": 1.0,
            "privacy.epsilon": 1.0,
            "privacy.calibration": "wpfl",
        },
        "privacy.calibration=wpfl (Theorem 1 of the WPFL paper) needs the "
        "quantizer's R: set compression.quantize_bits",
    ),
    "wpfl-perfect-gaussian-with-quantizer": (
        "examples/wpfl_minmax.yaml",
        {"algorithm.dp_mechanism": "perfect_gaussian"},
        "algorithm.dp_mechanism=perfect_gaussian means no quantization",
    ),
    "wpfl-dithering-with-quantizer": (
        "examples/wpfl_minmax.yaml",
        {"algorithm.dp_mechanism": "dithering"},
        "algorithm.dp_mechanism=dithering needs compression.quantize_bits=null",
    ),
    "object-store-10-27": (
        {},
        {"ray.object_store_memory_mb": 10**27},
        "ray.object_store_memory_mb: Input should be less than or equal to",
    ),
    "object-store-with-an-address": (
        {},
        {"ray.address": "auto", "ray.object_store_memory_mb": 150},
        "ray.object_store_memory_mb sizes a session rayfl starts itself",
    ),
    "ray-address-port-out-of-range": (
        {},
        {"ray.address": "host:70000"},
        "ray.address: the port must be in 1..65535",
    ),
    "ray-address-port-zero": (
        {},
        {"ray.address": "host:0"},
        "ray.address: the port must be in 1..65535",
    ),
    "ray-address-with-spaces": (
        {},
        {"ray.address": " host:1"},
        "ray.address must be auto, local, host:port or ray://host:port",
    ),
    "ray-address-without-port": (
        {},
        {"ray.address": "just a host"},
        "ray.address must be auto, local, host:port or ray://host:port",
    ),
}


@pytest.mark.parametrize(("source", "overrides", "expected"), CASES.values(), ids=CASES)
def test_each_case_is_one_line_naming_the_field(source, overrides, expected):
    with pytest.raises(ConfigError) as info:
        load_config(source or None, overrides)
    lines = str(info.value).splitlines()
    assert lines[0] == "invalid config:" and len(lines) == 2, lines
    assert expected in lines[1], lines[1]
    assert len(lines[1]) < 400


NEIGHBOURS = {
    "hier-edges-equal-clients": (HIER, {"data.num_clients": 10}),
    "hier-subnets-sum": (HIER, {"topology.clients_per_edge": 5}),
    "d2d-two-clients": (D2D, {"data.num_clients": 2, "topology.target": 0}),
    "quantize-with-clip-norm": (
        QUICK,
        {"compression.quantize_bits": 8, "privacy.clip_norm": 1.0},
    ),
    "quantize-minmax": (
        QUICK,
        {"compression.quantize_bits": 8, "compression.quantize_range": "minmax"},
    ),
    "tx-power-at-the-bound": (HIER, {"topology.cost.tx_power_dbm": 300}),
    "eval-clients-equal-n": (QUICK, {"eval_clients": 20}),
    "noise-std-at-the-floor": (DP, {"privacy.noise_std": 2e-9}),
    "epsilon-at-the-bound": (DP, {"privacy.epsilon": 1e6}),
    "object-store-at-the-bound": ({}, {"ray.object_store_memory_mb": 2**40}),
    "ray-address-forms": ({}, {"ray.address": "ray://10.0.0.1:10001"}),
    "ray-address-local": ({}, {"ray.address": "local"}),
    "ray-address-ipv6": ({}, {"ray.address": "[::1]:6379"}),
    "output-dir-with-inner-space": ({}, {"output.dir": "runs/my runs"}),
}


@pytest.mark.parametrize(("source", "overrides"), NEIGHBOURS.values(), ids=NEIGHBOURS)
def test_the_nearest_valid_values_still_load(source, overrides):
    assert load_config(source or None, overrides) is not None


def test_data_root_is_checked_on_the_driver_and_never_replaced(tmp_path):
    # an existing root is accepted at validation...
    cfg = load_config(FMNIST, {"data.root": str(tmp_path)})
    assert cfg.data.root == str(tmp_path)
    # ...and the loader then reads it only: no silent fallback to the system copy
    with pytest.raises(DatasetError, match=f"Fashion-MNIST not found in {tmp_path}:"):
        load_dataset("fashion_mnist", root=str(tmp_path), cached=False)


def test_a_path_over_the_file_systems_own_limit_is_refused(tmp_path):
    name_max = os.pathconf(tmp_path, "PC_NAME_MAX")
    ok = load_config(None, {"output.dir": str(tmp_path / ("z" * name_max))})
    assert ok.output.dir.endswith("z" * name_max)
    with pytest.raises(ConfigError, match=f"the file system allows {name_max}"):
        load_config(None, {"output.dir": str(tmp_path / ("z" * (name_max + 1)))})


def test_a_long_value_is_echoed_as_a_short_prefix():
    with pytest.raises(ConfigError) as info:
        load_config(None, {"output.dir": "q" * 100_000})
    assert len(str(info.value)) < 300
    assert "(100000 chars)" in str(info.value)


@pytest.mark.parametrize(
    "override",
    [
        "compression.quantize_bits=8",
        "eval_clients=500",
        "ray.address=host:70000",
    ],
    ids=["quantize-without-clip", "eval-clients-above-n", "ray-address-port"],
)
def test_the_cli_refuses_in_one_line_before_ray_starts(
    override, tmp_path, capsys, monkeypatch
):
    import ray

    from rayfl.cli import main

    def refuse(*args, **kwargs):
        raise AssertionError("ray.init was called: the config was not refused first")

    monkeypatch.setattr(ray, "init", refuse)
    out = tmp_path / "runs"
    assert main(["run", QUICK, override, f"output.dir={out}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "rayfl: invalid config:" and len(err) == 2, err
    assert "ActorDiedError" not in err[1] and "Traceback" not in err[1]
    assert not out.exists()


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_policy_parameter_refuses_nan_and_infinity(value):
    # data_weighted's `power` is a float: NaN/∞ would give every client NaN credit
    with pytest.raises(ConfigError, match=r"scheduler\.params\.power: .*finite"):
        load_config(
            "examples/quickstart.yaml",
            {
                "wireless": {},
                "scheduler.policy": "data_weighted",
                "scheduler.params": {"power": value},
            },
        )
