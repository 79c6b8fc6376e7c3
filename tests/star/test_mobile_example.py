"""examples/mobile_star.yaml runs with every star policy (issue 48).

Each registered policy that runs on the star plays a few rounds of the moving
world; the uploads that arrive come only from clients reachable in their
round (:func:`rayfl.star.world_plot.client_world` draws the same world). Two
policies run by default, every one with ``-m slow``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import rayfl
from rayfl.config import load_config
from rayfl.registry import check_policy, registered_names
from rayfl.star.world_plot import client_world

pytestmark = pytest.mark.usefixtures("ray_session")

EXAMPLE = "examples/mobile_star.yaml"
ROUNDS = 4


def _star_policies() -> list[str]:
    names = []
    for name in registered_names():
        try:
            check_policy(name, topology="star")
        except ValueError:
            continue
        names.append(name)
    return names


DEFAULT = ("round_robin", "proportional_fair")
CASES = [
    pytest.param(name, marks=() if name in DEFAULT else pytest.mark.slow)
    for name in _star_policies()
]


def test_every_star_policy_is_covered():
    assert set(DEFAULT) <= set(_star_policies())
    assert len(_star_policies()) >= 10


@pytest.mark.parametrize("policy", CASES)
def test_the_example_runs_and_only_reachable_clients_deliver(policy, tmp_path):
    overrides = {
        "rounds": ROUNDS,
        "scheduler.policy": policy,
        "output.dir": str(tmp_path),
        "output.plots": False,
        "output.progress": False,
    }
    # Act
    result = rayfl.run(EXAMPLE, overrides)
    # Assert: the run completed every round
    rounds = result.rounds
    assert len(rounds) == ROUNDS
    metrics = pd.read_parquet(result.run_dir / "metrics.parquet")
    delivered = metrics[metrics["delivered"].fillna(False).astype(bool)]
    cfg = load_config(EXAMPLE, [f"rounds={ROUNDS}"])
    reach = np.stack([client_world(cfg, c)[1] for c in range(cfg.data.num_clients)])
    for t, c in zip(delivered["round"], delivered["client"], strict=True):
        assert reach[int(c), int(t)], f"{policy}: client {c} delivered in round {t}"
    assert len(delivered) > 0
