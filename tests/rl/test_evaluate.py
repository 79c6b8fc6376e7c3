"""`evaluate_policies` over several data partitions (no RLlib needed)."""

from __future__ import annotations

import pytest

from rayfl.config import load_config
from rayfl.train_policy import evaluate_policies

SMALL = {
    "name": "eval",
    "rounds": 3,
    "data": {
        "dataset": "digits",
        "num_clients": 5,
        "partition": "dirichlet",
        "alpha": 0.3,
        "min_partition_size": 20,
    },
    "model": {"kind": "mlr"},
    "wireless": {"num_subchannels": 2},
    "output": {"progress": False, "plots": False},
}


def _returns(table):
    keys = zip(table["policy"], table["episode"], strict=True)
    return dict(zip(keys, table["return"], strict=True))


def test_episodes_cycle_over_the_partitions():
    cfg = load_config(SMALL)
    kw = {"episodes": 3, "baselines": ["round_robin", "random"], "mode": "surrogate"}
    both = evaluate_policies(cfg, None, partition_seeds=[0, 7], **kw)
    assert both["policy"].tolist() == ["round_robin"] * 3 + ["random"] * 3
    assert both["partition"].tolist() == [0, 7, 0] * 2
    only0 = _returns(evaluate_policies(cfg, None, partition_seeds=[0], **kw))
    only7 = _returns(evaluate_policies(cfg, None, partition_seeds=[7], **kw))
    got = _returns(both)
    for policy in ("round_robin", "random"):
        # episode i keeps its run seed; only its data partition follows the cycle
        assert got[policy, 0] == pytest.approx(only0[policy, 0])
        assert got[policy, 1] == pytest.approx(only7[policy, 1])
        assert got[policy, 1] != pytest.approx(only0[policy, 1])


def test_default_partition_is_the_config_seed_or_rl_partition_seeds():
    cfg = load_config({**SMALL, "seed": 3})
    table = evaluate_policies(
        cfg, None, episodes=2, baselines=["round_robin"], mode="surrogate"
    )
    assert table["partition"].tolist() == [3, 3]
    cfg = load_config({**SMALL, "rl": {"partition_seeds": [5, 6]}})
    table = evaluate_policies(
        cfg, None, episodes=2, baselines=["round_robin"], mode="surrogate"
    )
    assert table["partition"].tolist() == [5, 6]
    with pytest.raises(ValueError, match="at least one"):
        evaluate_policies(cfg, None, episodes=1, mode="surrogate", partition_seeds=[])


def test_env_copies_start_on_different_partitions():
    from rayfl.train_policy import rllib_available
    from rayfl.train_policy.algorithm import _env_creator

    if not rllib_available():
        pytest.skip("RLlib not installed: pip install -e '.[rl]'")
    from ray.rllib.env.env_context import EnvContext

    base = {
        "config": SMALL,
        "mode": "surrogate",
        "reward": "min_max_loss",
        "reward_scale": 1.0,
        "partition_seeds": [10, 11, 12, 13],
    }
    # two vector copies of env runner 1 of 1, as RLlib's new stack builds them:
    # the same EnvContext twice, no vector_index
    ctx = EnvContext(base, worker_index=1, num_workers=1)
    first = []
    for _ in range(2):
        env = _env_creator(ctx)
        env.reset(seed=0)
        first.append(env.get_wrapper_attr("partition_seed"))
        env.close()
    assert first[0] != first[1]


def test_the_learning_curve_undoes_the_reward_scale(tmp_path, monkeypatch):
    # PPO's returns carry rl.reward_scale; the evaluation's do not. The curve
    # must put both on the evaluation's axis (a scaled curve at -1 drawn beside
    # unscaled evaluations at -110 looked far better than it was).
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd

    from rayfl.train_policy.evaluate import plot_training

    pd.DataFrame({"iteration": [1, 2], "episode_return_mean": [-2.0, -1.0]}).to_csv(
        tmp_path / "progress.csv", index=False
    )
    pd.DataFrame(
        {"policy": ["learned", "round_robin"], "episode": [0, 0], "return": [-40, -110]}
    ).to_csv(tmp_path / "evaluation.csv", index=False)
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    plot_training(tmp_path, reward_scale=0.02)
    monkeypatch.undo()
    curve = figures[0].axes[0].lines[0]
    np.testing.assert_allclose(curve.get_ydata(), [-100.0, -50.0])
    for fig in figures:
        plt.close(fig)
