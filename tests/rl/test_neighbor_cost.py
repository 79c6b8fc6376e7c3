"""``rl.neighbor_cost``: train-policy's D2D env and its evaluation pay per neighbor."""

from __future__ import annotations

import numpy as np
import pytest

from envs.rl import make_rl_env
from rayfl.config import load_config
from rayfl.train_policy import evaluate_policies
from rayfl.train_policy.algorithm import _env_creator
from tests.configs import TINY_D2D
from tests.rl.test_evaluate import SMALL as STAR

D2D = {
    **TINY_D2D,
    "rounds": 3,
    "topology": {**TINY_D2D["topology"], "num_subchannels": 2},
}


def test_only_a_d2d_config_takes_a_neighbor_cost():
    assert load_config({**D2D, "rl": {"neighbor_cost": 0.1}}).rl.neighbor_cost == 0.1
    with pytest.raises(ValueError, match="rl.neighbor_cost .* topology.kind=d2d"):
        load_config({**STAR, "rl": {"neighbor_cost": 0.1}})
    with pytest.raises(ValueError, match="neighbor_cost"):
        load_config({**D2D, "rl": {"neighbor_cost": -1.0}})
    with pytest.raises(
        ValueError,
        match="neighbor_cost is for the env of topology.kind=d2d; got topology.kind=star",
    ):
        make_rl_env(STAR, neighbor_cost=0.1)


def _first_step(cost):
    env = _env_creator(
        {
            "config": D2D,
            "mode": "surrogate",
            "reward": "min_max_loss",
            "reward_scale": 1.0,
            "neighbor_cost": cost,
        }
    )
    try:
        env.reset(seed=3)
        _, reward, _, _, info = env.step(np.ones(env.action_space.shape))
        return reward, info
    finally:
        env.close()


def test_the_training_env_charges_each_selected_neighbor():
    free, info = _first_step(0.0)
    paid, paid_info = _first_step(0.25)
    chosen = len(info["neighbors"])
    assert chosen >= 1  # positive scores select up to F neighbours
    assert paid_info["neighbors"] == info["neighbors"]  # the cost moves no choice
    assert free - paid == pytest.approx(0.25 * chosen)


def test_the_final_evaluation_charges_the_baselines_too():
    def returns(cost):
        cfg = load_config({**D2D, "rl": {"neighbor_cost": cost}})
        table = evaluate_policies(
            cfg, None, episodes=2, baselines=["channel_threshold"], mode="surrogate"
        )
        return table["return"].to_numpy()

    free, paid = returns(0.0), returns(0.5)
    # each episode pays 0.5 per neighbour per round: a positive whole number of them
    selected = (free - paid) / 0.5
    np.testing.assert_allclose(selected, np.round(selected), atol=1e-9)
    assert (selected >= 1).all()
    assert (selected <= D2D["rounds"] * D2D["topology"]["num_subchannels"]).all()
