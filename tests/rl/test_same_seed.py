"""Same config and seed, same PPO run: twice in one process as in two processes.

``rayfl bench train`` trains its reference once per repeat in one process; its
two repeats gave other returns because the first FL system of a process built
its template model with torch's global generator, the one RLlib samples the
driver's actions from (``rayfl.system.initial_vector``).
"""

from __future__ import annotations

import pandas as pd
import pytest

from rayfl.train_policy import rllib_available

pytestmark = pytest.mark.skipif(
    not rllib_available(),
    reason="RLlib not installed: pip install -e '.[rl]' (ray[rllib]==2.60.0)",
)

#: Emulate mode, 5 clients, 2-round FL runs of 1 local step, 1 PPO iteration.
TINY = {
    "name": "same-seed",
    "seed": 3,
    "rounds": 2,
    "data": {"dataset": "digits", "num_clients": 5, "partition": "iid"},
    "model": {"kind": "mlr"},
    "algorithm": {"local_steps": 1},
    "wireless": {"num_subchannels": 2},
    "output": {"progress": False, "plots": False},
    "rl": {
        "mode": "emulate",
        "train_batch_size": 8,
        "minibatch_size": 8,
        "num_epochs": 1,
        "hidden": [8],
        "iterations": 1,
        "eval_episodes": 0,
        "checkpoint_every": 2,
    },
}


# E = 4 (lanes) is slow-marked: the bug was in the FL system's first build,
# which E = 1 (the bench's reference) exercises the same way
@pytest.mark.parametrize("lanes", [1, pytest.param(4, marks=pytest.mark.slow)])
def test_a_second_run_in_the_process_repeats_the_first(
    ray_session, tmp_path, monkeypatch, lanes
):
    import rayfl.system
    from rayfl.train_policy import train_policy

    # Arrange: no model built yet in this process, as in a fresh train-policy
    monkeypatch.setattr(rayfl.system, "_INIT_MODELS", {})
    overrides = [f"rl.num_envs_per_env_runner={lanes}", f"output.dir={tmp_path}"]
    # Act: the same config and seed twice
    runs = [
        pd.read_csv(train_policy(TINY, overrides, verbose=False) / "progress.csv")
        for _ in range(2)
    ]
    # Assert: the same episodes and the same updates
    columns = ["env_steps", "episode_return_mean", "entropy"]
    pd.testing.assert_frame_equal(runs[0][columns], runs[1][columns])
