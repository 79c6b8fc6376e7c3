"""Configs a D2D run refuses up front (no Ray needed)."""

import pytest

from rayfl.config import load_config
from rayfl.d2d.runner import _check


def test_federated_baseline_refuses_algorithms_that_need_a_server_store():
    cfg = load_config(
        "examples/pfedwn_d2d.yaml",
        ["topology.method=federated", "algorithm.kind=fedamp"],
    )
    with pytest.raises(ValueError, match="per-client downloads"):
        _check(cfg)
    ok = load_config(
        "examples/pfedwn_d2d.yaml",
        ["topology.method=federated", "algorithm.kind=perfedavg"],
    )
    _check(ok)  # Per-FedAvg runs over the target group
