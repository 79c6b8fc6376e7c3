"""`rayfl run` with the learned policy (numpy inference: no RLlib needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

import rayfl
from policies.learned import DEFAULT_CHECKPOINT

EXAMPLE = Path(__file__).parents[2] / "examples" / "rl_scheduler.yaml"


def test_run_example_with_the_learned_policy(ray_session, tmp_path):
    if not Path("/usr/share/datasets/fashion-mnist").is_dir():
        pytest.skip("dataset-fashion-mnist not installed")
    result = rayfl.run(
        EXAMPLE,
        {
            "scheduler.policy": "learned",
            "scheduler.params.checkpoint": str(DEFAULT_CHECKPOINT),
            "rounds": 2,
            "data.num_clients": 6,
            "output.dir": str(tmp_path),
            "output.plots": False,
        },
    )
    assert result.summary["status"] == "completed"
    scheduled = result.metrics.groupby("round")["scheduled"].sum()
    assert scheduled.tolist() == [3, 3]  # K = 3 subchannels, all used
