"""``rayfl bench policies --self-tune``: each heuristic tuned for itself (issue 47).

The search's choice is checked against an oracle that plays the grid by hand
(the learning rate as a config value, the policy's parameter as a plain
constructor argument), the routing of a tuned row's parameters (own ones to
the policy, the topology's constants to controls or config), each policy's
``tunable`` declaration against its constructor, and the errors.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from rayfl.benchmarks.policies import (
    BenchError,
    bench_policies,
    build_policy,
    make_env,
    play,
    policy_specs,
)
from rayfl.benchmarks.policies.benchmark import self_tune_names
from rayfl.benchmarks.policies.cli import main
from rayfl.benchmarks.policies.scenarios import Scenario
from rayfl.benchmarks.policies.stats import best_heuristic
from rayfl.benchmarks.policies.tuning import (
    CONSTANT_GRID,
    ConstantControls,
    check_tunable,
    constant_grid,
    env_config,
    policy_knobs,
    split_params,
    tune_policy,
)
from rayfl.config import load_config
from rayfl.registry import POLICIES, policy_class

#: A tiny star with unequal data sizes, so data_weighted's exponent matters.
SKEWED = Scenario(
    "tiny-skewed",
    "star",
    "small",
    {
        "name": "tiny-skewed",
        "rounds": 3,
        "data": {
            "dataset": "digits",
            "num_clients": 5,
            "partition": "dirichlet",
            "alpha": 0.3,
        },
        "model": {"kind": "mlr"},
        "wireless": {"num_subchannels": 2},
        "output": {"progress": False, "plots": False},
    },
)
HIER = {
    "name": "tiny-hier",
    "rounds": 2,
    "data": {"dataset": "digits", "num_clients": 8, "partition": "iid"},
    "model": {"kind": "mlr"},
    "topology": {
        "kind": "hierarchical",
        "num_edges": 2,
        "scheduling": {"subchannels_per_edge": 1},
    },
    "output": {"progress": False, "plots": False},
}


def _oracle_means(cfg, lr: float, powers, seeds) -> list[float]:
    """data_weighted's mean return at ``lr`` (a config value) for each power, by hand."""
    at_lr = load_config(cfg, {"algorithm.lr": lr})
    specs = [(f"p={p}", "data_weighted", {"power": p}) for p in powers]
    rows = pd.DataFrame(play(at_lr, specs, seeds, "surrogate"))
    means = rows.groupby("policy", sort=False)["return"].mean()
    return [float(means[label]) for label, *_ in specs]


def test_self_tuned_data_weighted_is_the_best_grid_value_played_by_hand(tmp_path):
    train, held_out = [0, 1], [1000, 1001]
    bench_policies(
        [SKEWED],
        modes=["surrogate"],
        seeds=held_out,
        train_seeds=train,
        out=tmp_path,
        only=["data_weighted", "data_weighted_tuned"],
        verbose=False,
        constant_search="fixed",
        self_tune="data_weighted",
    )
    run = pd.read_csv(tmp_path / "runs.csv").iloc[0]
    chosen = json.loads(run["self_tuned"])["data_weighted_tuned"]
    grid = json.loads(run["self_tuned_grid"])["data_weighted_tuned"]
    assert json.loads(run["constant_tuned"]) == {}  # constant_tuned not run

    # the coordinate search by hand: lr at power 1, then power at that lr
    cfg = load_config(SKEWED.config)
    lrs = constant_grid(cfg.algorithm.lr, 0.0, 1.0)  # configured first
    lr_means = [_oracle_means(cfg, lr, [1.0], train)[0] for lr in lrs]
    best_lr = lrs[int(np.argmax(lr_means))]
    powers = constant_grid(1.0, 0.0, 16.0)
    power_means = _oracle_means(cfg, best_lr, powers, train)
    assert np.ptp(power_means) > 0  # the exponent matters here: not a tie
    best_power = powers[int(np.argmax(power_means))]

    assert chosen == {"lr": best_lr, "power": best_power}
    np.testing.assert_allclose([grid["lr"][str(v)] for v in lrs], lr_means, rtol=1e-9)
    np.testing.assert_allclose(
        [grid["power"][str(v)] for v in powers], power_means, rtol=1e-9
    )
    assert len(grid["power"]) == len(CONSTANT_GRID)
    episodes = pd.read_csv(tmp_path / "episodes.csv")
    wide = episodes.pivot(index="seed", columns="policy", values="return")
    np.testing.assert_allclose(
        wide.loc[held_out, "data_weighted_tuned"],
        _per_seed(cfg, best_lr, best_power, held_out),
        rtol=1e-9,
    )


def _per_seed(cfg, lr: float, power: float, seeds) -> list[float]:
    at_lr = load_config(cfg, {"algorithm.lr": lr})
    rows = play(at_lr, [("p", "data_weighted", {"power": power})], seeds, "surrogate")
    return [row["return"] for row in rows]


def test_a_tie_keeps_the_default():
    cfg = load_config(SKEWED.config)
    calls: list[list[str]] = []

    def flat(cfg, specs, seeds, mode, progress=None):
        calls.append([s[0] for s in specs])
        return [{"policy": s[0], "seed": 0, "return": 1.0} for s in specs]

    chosen = tune_policy(cfg, [0], "surrogate", play=flat, policy="data_weighted")

    assert chosen == {"lr": cfg.algorithm.lr, "power": 1.0}
    assert calls[0][0] == f"data_weighted_tuned:lr={cfg.algorithm.lr}"
    assert calls[-1][0] == "data_weighted_tuned:power=1.0"


def test_own_parameters_go_to_the_policy_and_constants_to_the_controls():
    cfg = load_config(SKEWED.config)
    env = make_env(cfg, "surrogate")
    obs, _ = env.reset(seed=0)
    try:
        spec = ("data_weighted_tuned", "data_weighted", {"power": 0.5, "lr": 0.1})
        policy = build_policy(env, cfg, spec, "surrogate")
        assert isinstance(policy, ConstantControls)
        assert policy.policy.power == 0.5
        policy.reset(seed=0)
        np.testing.assert_allclose(policy(obs)["controls"], 0.1)

        # minmax sends lr itself: only its μ is tuned, and it is not wrapped
        assert list(policy_knobs(cfg, "minmax")) == ["mu"]
        minmax = build_policy(
            env, cfg, ("minmax_tuned", "minmax", {"mu": 0.1}), "surrogate"
        )
        assert not isinstance(minmax, ConstantControls)
        assert minmax.bound.mu == 0.1
        minmax.reset(seed=0)
        np.testing.assert_allclose(
            minmax(obs)["controls"], minmax.bound.fl_lr(), rtol=1e-6
        )

        # lyapunov's own controls keep every column but the tuned one
        lyapunov = build_policy(
            env, cfg, ("lyapunov_tuned", "lyapunov", {"V": 5.0, "lr": 0.2}), "surrogate"
        )
        assert lyapunov.policy.V == 5.0 and lyapunov.columns == [0]
        lyapunov.reset(seed=0)
        np.testing.assert_allclose(lyapunov(obs)["controls"], 0.2)
    finally:
        env.close()


def test_on_the_hierarchy_the_step_size_is_a_config_value():
    cfg = load_config(HIER)
    spec = (
        "data_weighted_tuned",
        "data_weighted",
        {"power": 2.0, "topology.lr.gamma": 0.1},
    )

    own, constants = split_params(cfg, "data_weighted", spec[2])

    assert own == {"power": 2.0} and constants == {"topology.lr.gamma": 0.1}
    assert env_config(cfg, spec).topology.lr.gamma == 0.1
    assert env_config(cfg, ("data_weighted", "data_weighted", {})) is cfg
    assert list(policy_knobs(cfg, "data_weighted")) == ["topology.lr.gamma", "power"]


def test_specs_add_a_tuned_row_per_heuristic_with_something_to_tune():
    star = load_config(SKEWED.config)

    labels = [s[0] for s in policy_specs(star, self_tune=self_tune_names("all"))]
    some = [s[0] for s in policy_specs(star, self_tune=("data_weighted", "minmax"))]

    assert {"data_weighted_tuned", "minmax_tuned", "lyapunov_tuned"} <= set(labels)
    assert "learned_tuned" not in labels and "learned_untrained_tuned" not in labels
    assert "round_robin_tuned" not in labels  # that is constant_tuned
    assert [label for label in some if label.endswith("_tuned")] == [
        "constant_tuned",
        "data_weighted_tuned",
        "minmax_tuned",
    ]
    assert not any(s[0].endswith("_tuned") for s in policy_specs(star)[:-1])


def test_the_best_heuristic_may_be_a_self_tuned_row():
    episodes = pd.DataFrame(
        {
            "policy": ["learned", "data_weighted", "data_weighted_tuned"] * 2,
            "seed": [0, 0, 0, 1, 1, 1],
            "return": [3.0, 1.0, 2.0, 3.0, 1.0, 2.5],
        }
    )
    assert best_heuristic(episodes) == "data_weighted_tuned"


@pytest.mark.parametrize(
    ("name", "attribute"),
    [
        ("data_weighted", "power"),
        ("proportional_fair", "window"),
        ("lyapunov", "V"),
        ("channel_threshold", "epsilon"),
        ("random_neighbors", "probability"),
        ("minmax", "mu"),
    ],
)
def test_each_declared_default_is_the_constructors_and_the_range_builds(
    name, attribute
):
    from gymnasium import spaces

    obs_space = spaces.Dict(
        {
            "channel_gain": spaces.Box(-np.inf, np.inf, (3, 2)),
            "eligible": spaces.Box(0, 1, (3,)),
            "data_size": spaces.Box(0, np.inf, (3,)),
            "error_probability": spaces.Box(0, 1, (3,)),
        }
    )
    action_space = spaces.MultiDiscrete([4, 4])
    cls = policy_class(name)
    default, low, high = check_tunable(name)[attribute]

    def value(policy):
        return policy.bound.mu if name == "minmax" else getattr(policy, attribute)

    assert value(cls(obs_space, action_space)) == default
    for bound in (low, high):
        if np.isfinite(bound):  # every finite limit builds (the search tries it)
            built = cls(obs_space, action_space, **{attribute: bound})
            assert value(built) == bound


def test_every_registered_declaration_is_well_formed():
    for name in POLICIES:
        check_tunable(name)


def test_a_bad_declaration_is_refused(monkeypatch):
    cls = policy_class("data_weighted")
    monkeypatch.setattr(cls, "tunable", {"power": (20.0, 0.0, 16.0)})
    with pytest.raises(ValueError, match=r"tunable\['power'\] must be"):
        check_tunable("data_weighted")


def test_a_parameter_outside_its_range_is_refused():
    cfg = load_config(SKEWED.config)
    with pytest.raises(ValueError, match=r"power=-1.0 is outside its range \[0, 16\]"):
        split_params(cfg, "data_weighted", {"power": -1.0})
    with pytest.raises(ValueError, match="has no tunable parameter 'window'"):
        split_params(cfg, "data_weighted", {"window": 3.0})


@pytest.mark.parametrize("text", ["nope", "learned", "data_weighted,nope", ","])
def test_an_unknown_policy_is_refused(text):
    with pytest.raises(BenchError, match="--self-tune takes all or registered"):
        self_tune_names(text)


def test_cli_unknown_self_tune_policy_is_one_line(capsys, tmp_path):
    with pytest.raises(BenchError, match="--self-tune"):
        main(
            [
                "--scenario",
                "star-small",
                "--self-tune",
                "nope",
                "--seeds",
                "1000",
                "--out",
                str(tmp_path),
            ]
        )


def test_bonferroni_multiplies_each_trained_policys_p_by_the_attempts():
    from scipy import stats

    from rayfl.benchmarks.policies.stats import summarise

    rng = np.random.default_rng(0)
    base = rng.normal(size=6)
    returns = {
        "data_weighted_tuned": base,
        "round_robin": base - rng.uniform(0.5, 1.5, 6),
        "learned": base + rng.normal(0.5, 1.0, 6),
        "learned_b": base + rng.normal(0.1, 1.0, 6),
        "learned_untrained": base + rng.normal(0.0, 1.0, 6),
    }
    episodes = pd.DataFrame(
        [
            {
                "scenario": "s",
                "topology": "star",
                "mode": "surrogate",
                "policy": p,
                "seed": seed,
                "return": r,
                **{
                    k: 0.0
                    for k in (
                        "max_client_loss",
                        "jain",
                        "accuracy",
                        "energy_j",
                        "latency_s",
                        "epsilon",
                    )
                },
            }
            for p, values in returns.items()
            for seed, r in enumerate(values)
        ]
    )

    summary = summarise(episodes).set_index("policy")

    assert set(summary["best_heuristic"]) == {"data_weighted_tuned"}
    for label in ("learned", "learned_b"):
        p = stats.ttest_rel(returns[label], base).pvalue
        np.testing.assert_allclose(summary.loc[label, "p_vs_best"], p, rtol=1e-9)
        np.testing.assert_allclose(
            summary.loc[label, "p_vs_best_bonferroni"], min(1.0, 2 * p), rtol=1e-9
        )
    for label in ("learned_untrained", "round_robin", "data_weighted_tuned"):
        assert np.isnan(summary.loc[label, "p_vs_best_bonferroni"])


@pytest.mark.parametrize("name", ["best_channel", "minmax"])
def test_a_heuristic_with_nothing_to_tune_there_is_refused(tmp_path, name):
    d2d = Scenario("d2d", "d2d", "small", {"name": "d2d", "topology": {"kind": "d2d"}})
    with pytest.raises(BenchError, match=f"--self-tune {name}: it does not run or"):
        bench_policies(
            [d2d],
            modes=["surrogate"],
            seeds=[1000],
            train_seeds=[0],
            out=tmp_path,
            verbose=False,
            self_tune=name,
        )
