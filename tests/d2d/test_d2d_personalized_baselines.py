"""FedAMP / APPLE / Per-FedAvg as D2D federated baselines at the target (Ray).

Oracle: with ``participants: all`` the target's group is every client, so the D2D
federated baseline must equal the star topology running the same algorithm with
every client scheduled every round (no wireless section: ideal links), and the
target's reported accuracy must equal the star system's personal accuracy of
that client (for Per-FedAvg: ω adapted by one step on the client's train data).
"""

from __future__ import annotations

import numpy as np
import pytest

from rayfl.config import ConfigError, load_config
from rayfl.d2d.config import check_d2d_run as _check
from rayfl.engine import Engine, build_system
from rayfl.schedule import Schedule

# All tests here use the shared Ray session (tests/conftest.py): the module then runs
# with the other Ray modules instead of starting Ray again at its first Ray test.
pytestmark = pytest.mark.usefixtures("ray_session")

BASE = {
    "seed": 2,
    "rounds": 2,
    "data": {
        "dataset": "digits",
        "num_clients": 4,
        "partition": "dirichlet",
        "alpha": 0.5,
        "min_partition_size": 30,
    },
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": {"kind": "fedamp", "lr": 0.1, "batch_size": 16},
    "topology": {
        "kind": "d2d",
        "target": 0,
        "method": "federated",
        "participants": "all",
    },
    "ray": {"num_cpus": 2},
    "output": {"progress": False, "plots": False},
}


def test_selected_participants_are_refused_with_the_reason():
    with pytest.raises(ConfigError, match="participants=all"):
        load_config(BASE, ["topology.participants=selected"])
    _check(load_config(BASE))


@pytest.mark.parametrize(
    "kind", ["fedamp", "perfedavg", pytest.param("apple", marks=pytest.mark.slow)]
)
def test_d2d_group_server_equals_the_star_server(ray_session, kind):
    # Arrange
    cfg = load_config(BASE, [f"algorithm.kind={kind}"])
    star_cfg = load_config(
        {**BASE, "topology": {"kind": "flat"}}, [f"algorithm.kind={kind}"]
    )
    # Act
    with build_system(cfg) as d2d:
        got = [
            next(r for r in d2d.run_round(t, d2d.decision()).rows if r["client"] == 0)[
                "post_agg_acc"
            ]
            for t in range(2)
        ]
    expected = []
    with Engine(star_cfg) as star:
        everyone = Schedule(np.arange(4, dtype=np.int64))
        for t in range(2):
            star.run_round(t, everyone)
            row = star.evaluate()[0]
            expected.append(row.get("personal_acc", row["test_acc"]))
    # Assert
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
