"""One reward set for every topology: the formulas, and each env computing them.

The formulas are checked against sums written out by hand; each env (star,
hierarchical, D2D, surrogate mode, no Ray) is stepped with every reward it
accepts, and the reward is recomputed from what the step reports in ``info``
(the test losses of the evaluated models, the round's cost).
"""

from __future__ import annotations

import numpy as np
import pytest

from envs.d2d import D2DNeighborEnv
from envs.hierarchy.scheduling import HierarchicalSchedulingEnv
from envs.star.scheduling import WirelessFLEnv
from rayfl.rl.rewards import REWARDS, Scores, check_reward, reward
from tests.hierarchy.test_scheduling import TINY

_DATA = {
    "dataset": "digits",
    "partition": "dirichlet",
    "alpha": 1.0,
    "min_partition_size": 20,
}
_BASE = {
    "seed": 0,
    "rounds": 3,
    "model": {"kind": "mlp", "hidden": [16]},
    "output": {"progress": False, "plots": False},
}
STAR = {
    **_BASE,
    "data": {**_DATA, "num_clients": 6},
    "wireless": {"num_subchannels": 3},
}
HIER = {
    **TINY,
    "topology": {**TINY["topology"], "scheduling": {"subchannels_per_edge": 2}},
}
D2D = {**_BASE, "data": {**_DATA, "num_clients": 6}, "topology": {"kind": "d2d"}}
D2D_ALL = {**D2D, "topology": {"kind": "d2d", "target": "all"}}


def test_formulas_against_hand_sums():
    before = Scores(np.array([2.0, 1.0, 3.0]), np.array([0.1, 0.5, 0.3]))
    now = Scores(
        np.array([1.0, 0.5, 2.5]),
        np.array([0.4, 0.6, 0.2]),
        np.array([1.0, 3.0, 1.0]),
        latency_s=0.7,
        energy_j=2.5,
    )
    mean_loss = (1.0 * 1 + 0.5 * 3 + 2.5 * 1) / 5  # weighted by test-split size
    mean_acc = (0.4 * 1 + 0.6 * 3 + 0.2 * 1) / 5
    expected = {
        "min_max_loss": -2.5,
        "loss": -mean_loss,
        "loss_decrease": 2.0 - mean_loss,  # before: plain mean (no weights)
        "accuracy": mean_acc,
        "accuracy_gain": mean_acc - 0.3,
        "jain": 4.0**2 / (3 * (1.0 + 0.25 + 6.25)),
        "latency": -0.7,
        "energy": -2.5,
    }
    assert set(expected) == set(REWARDS)
    for name, value in expected.items():
        assert reward(name, now, before) == pytest.approx(value, rel=1e-12), name
    # no "before": no decrease, accuracy counted from 0
    assert reward("loss_decrease", now) == 0.0
    assert reward("accuracy_gain", now) == pytest.approx(mean_acc)
    # unmeasured accuracy (NaN) reads as 0, never NaN
    assert reward("accuracy", Scores(np.ones(2), np.full(2, np.nan))) == 0.0


@pytest.mark.parametrize(
    ("name", "topology", "mode", "message"),
    [
        ("fairness", "star", "emulate", "reward must be one of min_max_loss, loss,"),
        ("accuracy", "star", "surrogate", "reward=accuracy needs mode=emulate"),
        ("accuracy_gain", "d2d", "surrogate", "needs mode=emulate"),
        (
            "latency",
            "d2d",
            "emulate",
            "reward=latency has no form on topology.kind=d2d",
        ),
    ],
)
def test_check_reward_refuses_in_one_line(name, topology, mode, message):
    with pytest.raises(ValueError) as error:
        check_reward(name, topology=topology, mode=mode, rewards=_rewards(topology))
    assert message in str(error.value) and "\n" not in str(error.value)


def _rewards(topology):
    """The rewards the topology's plug-in declares (None: all)."""
    from rayfl.registry import topology_of

    return topology_of(topology).rewards


def _accepted(topology, mode):
    out = []
    for name in REWARDS:
        try:
            check_reward(name, topology=topology, mode=mode, rewards=_rewards(topology))
        except ValueError:
            continue
        out.append(name)
    return out


def test_every_env_takes_the_rewards_its_topology_has():
    assert _accepted("star", "emulate") == list(REWARDS)
    assert _accepted("hierarchical", "emulate") == list(REWARDS)
    assert _accepted("d2d", "emulate") == [
        r for r in REWARDS if r not in ("latency", "energy")
    ]
    for make, topology in (
        (lambda r: WirelessFLEnv(STAR, mode="surrogate", reward=r), "star"),
        (
            lambda r: HierarchicalSchedulingEnv(HIER, mode="surrogate", reward=r),
            "hierarchical",
        ),
        (lambda r: D2DNeighborEnv(D2D, mode="surrogate", reward=r), "d2d"),
    ):
        ok = _accepted(topology, "surrogate")
        for name in REWARDS:
            if name in ok:
                make(name)
            else:
                with pytest.raises(ValueError, match=f"reward={name}"):
                    make(name)


def _losses(env, info):
    """The evaluated models' test losses a step reports, and their weights."""
    if isinstance(env, WirelessFLEnv):
        return np.asarray(info["test_loss"]), None
    if isinstance(env, D2DNeighborEnv):
        return np.array([info["test_loss"][t] for t in env.targets]), None
    return env.system.device_loss(), np.asarray(env.system.num_test, float)


@pytest.mark.parametrize("topology", ["star", "hierarchical", "d2d", "d2d_all"])
def test_each_env_computes_the_reward_from_what_it_reports(topology):
    make = {
        "star": lambda r: WirelessFLEnv(STAR, mode="surrogate", reward=r),
        "hierarchical": lambda r: HierarchicalSchedulingEnv(
            HIER, mode="surrogate", reward=r
        ),
        "d2d": lambda r: D2DNeighborEnv(D2D, mode="surrogate", reward=r),
        "d2d_all": lambda r: D2DNeighborEnv(D2D_ALL, mode="surrogate", reward=r),
    }[topology]
    kind = "d2d" if topology.startswith("d2d") else topology
    for name in _accepted(kind, "surrogate"):
        env = make(name)
        env.reset(seed=3)
        env.action_space.seed(3)
        # the first decrease is from the models at reset
        if isinstance(env, D2DNeighborEnv):
            previous = np.array([env._loss[t] for t in env.targets]), None
        elif kind == "hierarchical":
            previous = env.system.device_loss(), np.asarray(env.system.num_test, float)
        else:
            previous = env.backend.dynamics.client_loss(), None
        for _ in range(2):
            _, value, *_, info = env.step(env.action_space.sample())
            loss, w = _losses(env, info)
            mean = float(np.average(loss, weights=w))
            if name == "min_max_loss":
                expected = -loss.max()
            elif name == "loss":
                expected = -mean
            elif name == "loss_decrease":
                expected = float(np.average(previous[0], weights=previous[1])) - mean
            elif name == "jain":
                expected = loss.sum() ** 2 / (len(loss) * (loss**2).sum())
            elif name == "latency":
                expected = -float(np.max(info["latency_s"]))
            else:  # energy
                expected = -float(np.sum(info["energy_j"]))
            assert value == pytest.approx(expected, rel=1e-9, abs=1e-12), name
            previous = loss, w
        env.close()


def test_weighted_means_are_np_average_bit_for_bit() -> None:
    """Scores' weighted mean: np.average's value over the finite entries, or its error."""
    from rayfl.rl.rewards import Scores

    rng = np.random.default_rng(4)
    for trial in range(300):
        n = int(rng.integers(1, 30))
        values = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6)
        values[rng.random(n) < 0.15] = np.nan
        weights = rng.random(n) * 100 if trial % 2 else rng.integers(1, 300, n)
        ok = np.isfinite(values)
        if not ok.any():
            continue
        want = float(np.average(values[ok], weights=np.asarray(weights)[ok]))
        assert Scores(values, weights=weights).mean_loss() == want
    with pytest.raises(ZeroDivisionError):
        Scores(np.array([1.0, 2.0]), weights=np.zeros(2)).mean_loss()
