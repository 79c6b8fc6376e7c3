"""``rayfl bench policies`` on a tiny scenario, checked against scipy (issue 34).

The benchmark's statistics (t confidence intervals, paired wins, paired
t-tests, Spearman's ρ and the surrogate verdict) are recomputed here
independently from its per-episode CSV with :mod:`scipy.stats`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from rayfl.benchmarks.policies import (
    BenchError,
    bench_policies,
    learned_checkpoints,
    policy_specs,
)
from rayfl.benchmarks.policies.scenarios import (
    Scenario,
    scenarios,
    scenarios_for,
)
from rayfl.benchmarks.policies.stats import (
    KPIS,
    LEARNED,
    best_heuristic,
    surrogate_check,
)
from rayfl.benchmarks.policies.tuning import (
    CONSTANT_GRID,
    MAX_EXTENSIONS,
    tunable_constants,
    tune_constants,
)
from rayfl.config import load_config

TINY = Scenario(
    "tiny",
    "star",
    "small",
    {
        "name": "tiny",
        "rounds": 3,
        "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
        "model": {"kind": "mlr"},
        "wireless": {"num_subchannels": 2},
        "output": {"progress": False, "plots": False},
    },
)
POLICIES = [
    "random",
    "round_robin",
    "minmax",
    "learned",
    "learned_untrained",
    "constant_tuned",
]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    summary = bench_policies(
        [TINY],
        modes=["surrogate"],
        seeds=[1000, 1001],
        train_seeds=[0],
        out=out,
        only=POLICIES,
        verbose=False,
    )
    return summary, out


def test_it_writes_csv_markdown_and_plot(tiny_run):
    _, out = tiny_run

    summary = pd.read_csv(out / "summary.csv")
    episodes = pd.read_csv(out / "episodes.csv")

    for kpi in ("return", *KPIS):
        assert {f"{kpi}_mean", f"{kpi}_ci_low", f"{kpi}_ci_high"} <= set(summary)
    assert {"best_heuristic", "wins_vs_best", "losses_vs_best", "ties_vs_best"} <= set(
        summary
    )
    assert {"diff_vs_best_mean", "diff_vs_best_ci_low", "p_vs_best"} <= set(summary)
    assert sorted(summary["policy"]) == sorted(POLICIES)
    assert (summary["seeds"] == 2).all()
    assert len(episodes) == len(POLICIES) * 2
    assert "| learned_untrained |" in (out / "summary.md").read_text()
    assert (out / "tiny.png").stat().st_size > 1000
    assert pd.read_csv(out / "runs.csv")["wall_s"].notna().all()


def test_cis_match_scipy(tiny_run):
    _, out = tiny_run
    summary = pd.read_csv(out / "summary.csv").set_index("policy")
    episodes = pd.read_csv(out / "episodes.csv")

    for policy, group in episodes.groupby("policy"):
        for kpi in ("return", "max_client_loss", "jain", "energy_j"):
            x = group[kpi].to_numpy()
            low, high = stats.t.interval(
                0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x)
            )
            row = summary.loc[policy]
            np.testing.assert_allclose(row[f"{kpi}_mean"], x.mean(), rtol=1e-12)
            if np.ptp(x) > 0:
                np.testing.assert_allclose(
                    [row[f"{kpi}_ci_low"], row[f"{kpi}_ci_high"]],
                    [low, high],
                    rtol=1e-9,
                )


def test_paired_wins_and_tests_match_an_independent_count(tiny_run):
    _, out = tiny_run
    summary = pd.read_csv(out / "summary.csv").set_index("policy")
    episodes = pd.read_csv(out / "episodes.csv")
    wide = episodes.pivot(index="seed", columns="policy", values="return")
    heuristics = [p for p in wide.columns if p not in LEARNED]
    best = wide[heuristics].mean().idxmax()

    for policy in wide.columns:
        diff = wide[policy] - wide[best]
        row = summary.loc[policy]
        assert row["best_heuristic"] == best
        assert row["wins_vs_best"] == int((diff > 0).sum())
        assert row["losses_vs_best"] == int((diff < 0).sum())
        assert row["ties_vs_best"] == int((diff == 0).sum())
        np.testing.assert_allclose(row["diff_vs_best_mean"], diff.mean(), atol=1e-12)
        if np.ptp(diff) > 0:
            p = stats.ttest_rel(wide[policy], wide[best]).pvalue
            np.testing.assert_allclose(row["p_vs_best"], p, rtol=1e-9)


def test_untrained_network_differs_from_the_shipped_policy(tiny_run):
    _, out = tiny_run
    episodes = pd.read_csv(out / "episodes.csv")
    wide = episodes.pivot(index="seed", columns="policy", values="return")

    assert not np.allclose(wide["learned"], wide["learned_untrained"])


def _fake_episodes(surrogate: dict[str, list[float]], emulate: dict[str, list[float]]):
    rows = []
    for mode, table in (("surrogate", surrogate), ("emulate", emulate)):
        for policy, returns in table.items():
            for seed, value in enumerate(returns):
                rows.append(
                    {
                        "scenario": "s",
                        "mode": mode,
                        "policy": policy,
                        "seed": seed,
                        "return": value,
                    }
                )
    return pd.DataFrame(rows)


def test_surrogate_check_spearman_and_verdict_against_scipy():
    emulate = {
        "round_robin": [-10.0, -11.0, -10.5, -10.2],
        "random": [-12.0, -12.5, -13.0, -12.2],
        "best_channel": [-15.0, -14.0, -15.5, -14.8],
        "learned": [-11.0, -12.0, -11.6, -11.1],  # significantly below round robin
    }
    surrogate = {  # same order of means, but learned ahead of round robin
        "round_robin": [-20.0, -21.0, -20.5, -20.2],
        "random": [-22.0, -22.5, -23.0, -22.2],
        "best_channel": [-25.0, -24.0, -25.5, -24.8],
        "learned": [-19.0, -20.1, -19.6, -19.0],
    }
    episodes = _fake_episodes(surrogate, emulate)

    check = surrogate_check(episodes).set_index("policy")

    policies = list(emulate)
    rho = stats.spearmanr(
        [np.mean(surrogate[p]) for p in policies],
        [np.mean(emulate[p]) for p in policies],
    )[0]
    np.testing.assert_allclose(check["spearman"].iloc[0], rho)
    assert check["reference"].iloc[0] == "round_robin"
    learned = check.loc["learned"]
    assert learned["significant_emulate"] and not learned["same_sign"]
    assert not check["fit_for_training"].any()
    assert "learned" in check["reason"].iloc[0]
    np.testing.assert_allclose(
        learned["return_error"],
        np.mean(surrogate["learned"]) - np.mean(emulate["learned"]),
    )


def test_every_topology_has_small_medium_large_and_a_breaking_scenario():
    for topology in ("star", "hierarchical", "d2d"):
        mine = scenarios_for(topology)
        assert {s.size for s in mine} == {"small", "medium", "large"}
        assert any(s.breaks for s in mine)
    for scenario in scenarios().values():
        load_config(scenario.config)


@pytest.mark.parametrize("topology", ["star", "hierarchical", "d2d"])
def test_specs_include_the_required_baselines(topology):
    cfg = load_config(scenarios_for(topology, "small")[0].config)

    labels = [label for label, *_ in policy_specs(cfg)]

    assert "learned" in labels and "learned_untrained" in labels
    assert ("constant_tuned" in labels) == (topology in ("star", "hierarchical"))
    assert "all" not in labels
    if topology == "star":
        assert "minmax" in labels


def test_named_learned_policies_run_side_by_side():
    cfg = load_config(scenarios()["star-small"].config)

    specs = policy_specs(cfg, learned="learned_a=/x/a,learned_b=/x/b")

    by_label = {label: (name, params) for label, name, params in specs}
    assert by_label["learned_a"] == ("learned", {"checkpoint": "/x/a"})
    assert by_label["learned_b"] == ("learned", {"checkpoint": "/x/b"})
    assert by_label["learned"] == ("learned", {})  # the shipped one stays
    assert learned_checkpoints("/x/p") == {"learned": "/x/p"}
    assert learned_checkpoints("learned=/x/p,learned_e=/y") == {
        "learned": "/x/p",
        "learned_e": "/y",
    }


@pytest.mark.parametrize(
    "text",
    ["emulate=/x", "learned_untrained=/x", "learned_a=", "learned_a=/x,learned_a=/y"],
)
def test_bad_learned_labels_are_refused_in_one_line(text):
    with pytest.raises(BenchError, match="--learned"):
        learned_checkpoints(text)


def test_named_learned_policies_are_never_the_best_heuristic():
    episodes = pd.DataFrame(
        {
            "policy": ["learned_emulate", "round_robin", "random", "learned"],
            "return": [-1.0, -5.0, -9.0, -2.0],
        }
    )

    assert best_heuristic(episodes) == "round_robin"


def test_overlapping_seeds_are_refused(tmp_path):
    with pytest.raises(BenchError, match="disjoint"):
        bench_policies(
            [TINY], modes=["surrogate"], seeds=[0, 1], train_seeds=[1], out=tmp_path
        )


def test_cli_unknown_scenario_is_one_line(capsys):
    from rayfl.cli import main

    code = main(["bench", "policies", "--scenario", "nope"])

    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and "--scenario must be one of" in err[0]


def test_constant_search_flag_defaults_to_extend_and_takes_fixed():
    from rayfl.benchmarks.policies.cli import parser

    assert parser().parse_args([]).constant_search == "extend"
    assert (
        parser().parse_args(["--constant-search", "fixed"]).constant_search == "fixed"
    )
    with pytest.raises(SystemExit):
        parser().parse_args(["--constant-search", "wide"])


def _fake_play(best: float, seen: list[list[str]]):
    """A ``play`` whose round-robin return is −|lr − best| (records each call's labels)."""

    def fake_play(cfg, specs, seeds, mode, progress=None):
        seen.append([s[0] for s in specs])
        return [
            {"policy": label, "seed": s, "return": -abs(p["lr"] - best)}
            for label, _, p in specs
            for s in seeds
        ]

    return fake_play


def test_tune_constants_fixed_search_picks_the_best_grid_value():
    cfg = load_config(TINY.config)  # fedavg: one control, lr = configured value
    configured, seen = cfg.algorithm.lr, []
    scores: dict = {}

    chosen = tune_constants(
        cfg,
        [0, 1, 2],
        "surrogate",
        play=_fake_play(8 * configured, seen),
        scores=scores,
        search="fixed",
    )

    assert len(seen) == 1 and len(seen[0]) == len(CONSTANT_GRID)
    np.testing.assert_allclose(chosen["lr"], 2 * configured)  # the grid's edge
    assert len(scores["lr"]) == len(CONSTANT_GRID)


@pytest.mark.parametrize("factor", [8.0, 2.0, 1.0, 0.05])
def test_tune_constants_extends_the_grid_until_the_best_is_inside(factor):
    cfg = load_config(TINY.config)
    configured, seen = cfg.algorithm.lr, []
    low, high = tunable_constants(cfg)["lr"][1:]
    scores: dict = {}

    chosen = tune_constants(
        cfg,
        [0, 1],
        "surrogate",
        play=_fake_play(factor * configured, seen),
        scores=scores,
    )

    tried = sorted(float(v) for v in scores["lr"])
    best = chosen["lr"]
    i = tried.index(best)
    # a worse value on each side, or the range's limit there
    assert i > 0 or best <= low or len(seen) == 1 + MAX_EXTENSIONS
    assert i < len(tried) - 1 or best >= high or len(seen) == 1 + MAX_EXTENSIONS
    assert all(scores["lr"][str(best)] >= v for v in scores["lr"].values())
    # each extension tries one new value, ×2 or ÷2 from the best so far
    assert all(len(labels) == 1 for labels in seen[1:])
    expected_best = {8.0: 8.0, 2.0: 2.0, 1.0: 1.0, 0.05: 0.2 / 4}[factor]
    np.testing.assert_allclose(best, expected_best * configured)
    if factor == 1.0:
        assert len(seen) == 1  # inside the grid: nothing to extend


def test_tune_constants_stops_at_the_range_limit():
    cfg = load_config(TINY.config)
    seen: list[list[str]] = []
    high = tunable_constants(cfg)["lr"][2]

    chosen = tune_constants(cfg, [0], "surrogate", play=_fake_play(10 * high, seen))

    assert chosen["lr"] == high
    assert len(seen) <= 1 + MAX_EXTENSIONS


def test_tune_constants_rejects_an_unknown_search():
    cfg = load_config(TINY.config)
    with pytest.raises(ValueError, match="search must be one of"):
        tune_constants(cfg, [0], "surrogate", play=_fake_play(0.1, []), search="x")


def test_constant_controls_replace_the_policys_controls():
    from rayfl.benchmarks.policies.tuning import ConstantControls

    table = np.full((4, 1), 0.25, np.float32)
    policy = ConstantControls(lambda obs: np.array([0, 1]), table)

    action = policy({})

    np.testing.assert_array_equal(action["assignment"], [0, 1])
    np.testing.assert_array_equal(action["controls"], table)


# ------------------------------------------------------------------ the hierarchy
#: A tiny hierarchy with DP: its surrogate's return depends on the step size γ
#: (through the DP noise), so tuning γ has something to choose.
TINY_HIER = Scenario(
    "tiny-hier",
    "hierarchical",
    "small",
    {
        "name": "tiny-hier",
        "rounds": 3,
        "data": {
            "dataset": "digits",
            "num_clients": 8,
            "partition": "pathological",
            "classes_per_client": 3,
        },
        "model": {"kind": "mlr"},
        "algorithm": {"kind": "fedavg", "batch_size": 16, "lr": 0.05},
        "topology": {
            "kind": "hierarchical",
            "num_edges": 2,
            "tau": 2,
            "local_period": 1,
            "dp": {"epsilon": 1.0, "delta": 1.0e-5},
            "scheduling": {"subchannels_per_edge": 1},
        },
        "output": {"progress": False, "plots": False},
        "rl": {"reward": "min_max_loss"},
    },
)


def _round_robin_return(gamma: float, seed: int) -> float:
    """Round robin per edge at step size ``gamma``, played on the env by hand."""
    from envs.hierarchy.scheduling import EdgePolicies, HierarchicalSchedulingEnv

    env = HierarchicalSchedulingEnv(
        TINY_HIER.config,
        reward="min_max_loss",
        overrides={"topology.lr.gamma": gamma, "seed": seed},
        mode="surrogate",
    )
    obs, _ = env.reset(seed=seed)
    policy = EdgePolicies(env, "round_robin")
    policy.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(policy(obs))
        total += float(reward)
        done = terminated or truncated
    env.close()
    return total


@pytest.mark.parametrize(
    ("lr", "tuned"),
    [
        ({"mode": "manual"}, {"topology.lr.gamma"}),
        ({"mode": "constant"}, {"algorithm.lr"}),
        ({"mode": "theory"}, set()),
    ],
)
def test_the_hierarchy_tunes_its_configured_step_size(lr, tuned):
    cfg = load_config(TINY_HIER.config, {"topology.lr": lr})

    labels = [label for label, *_ in policy_specs(cfg)]

    assert set(tunable_constants(cfg)) == tuned
    assert ("constant_tuned" in labels) == bool(tuned)


def test_hierarchy_constant_tuned_is_round_robin_at_the_best_step_size(tmp_path):
    import json

    train, held_out, configured = [0, 1], [1000, 1001], 0.02
    bench_policies(
        [TINY_HIER],
        modes=["surrogate"],
        seeds=held_out,
        train_seeds=train,
        out=tmp_path,
        only=["round_robin", "constant_tuned"],
        verbose=False,
        overrides={"topology.lr.gamma": configured},  # as --set does
        constant_search="fixed",
    )
    run = pd.read_csv(tmp_path / "runs.csv").iloc[0]
    assert json.loads(run["overrides"]) == {"topology.lr.gamma": configured}
    assert run["constant_search"] == "fixed"
    tuned = json.loads(run["constant_tuned"])
    grid = json.loads(run["constant_grid"])["topology.lr.gamma"]
    episodes = pd.read_csv(tmp_path / "episodes.csv")
    wide = episodes.pivot(index="seed", columns="policy", values="return")

    gammas = sorted(configured * f for f in CONSTANT_GRID)
    means = [np.mean([_round_robin_return(g, s) for s in train]) for g in gammas]
    assert np.ptp(means) > 0  # the step size matters: the choice is not a tie
    np.testing.assert_allclose(sorted(float(v) for v in grid), gammas, rtol=1e-9)
    np.testing.assert_allclose(
        [grid[k] for k in sorted(grid, key=float)], means, rtol=1e-9
    )
    best = gammas[int(np.argmax(means))]
    np.testing.assert_allclose(tuned["topology.lr.gamma"], best, rtol=1e-9)
    np.testing.assert_allclose(
        wide.loc[held_out, "constant_tuned"],
        [_round_robin_return(best, s) for s in held_out],
        rtol=1e-9,
    )
    np.testing.assert_allclose(
        wide.loc[held_out, "round_robin"],
        [_round_robin_return(configured, s) for s in held_out],
        rtol=1e-9,
    )


def test_hierarchy_extended_search_ends_inside_or_at_a_limit(tmp_path):
    import json

    train, configured = [0, 1], 0.02
    bench_policies(
        [TINY_HIER],
        modes=["surrogate"],
        seeds=[1000],
        train_seeds=train,
        out=tmp_path,
        only=["constant_tuned"],
        verbose=False,
        overrides={"topology.lr.gamma": configured},
    )
    run = pd.read_csv(tmp_path / "runs.csv").iloc[0]
    assert run["constant_search"] == "extend"
    grid = json.loads(run["constant_grid"])["topology.lr.gamma"]
    tuned = json.loads(run["constant_tuned"])["topology.lr.gamma"]
    tried = sorted(float(v) for v in grid)

    # every value's mean is round robin's, played by hand at that step size
    means = [np.mean([_round_robin_return(g, s) for s in train]) for g in tried]
    np.testing.assert_allclose([grid[str(g)] for g in tried], means, rtol=1e-9)
    assert tuned == tried[int(np.argmax(means))]
    grid_only = sorted(configured * f for f in CONSTANT_GRID)
    assert len(tried) > len(grid_only) or 0 < tried.index(tuned) < len(tried) - 1
    i, high = tried.index(tuned), 1.0
    assert len(tried) == len(grid_only) + MAX_EXTENSIONS or (
        (i > 0) and (i < len(tried) - 1 or tuned >= high)
    )


# ------------------------------------------------------------------ progress
def test_each_episode_is_on_disk_as_it_finishes_and_a_failure_keeps_them(
    tmp_path, monkeypatch, capsys
):
    import rayfl.benchmarks.policies.benchmark as bench
    from rayfl.compare.progress import CompareFailed

    real = bench.episode_kpis
    calls = {"held_out": 0}
    on_disk: list[int] = []

    def failing(env, policy, seed):
        if seed >= 1000:  # a held-out episode (tuning uses seed 0)
            path = tmp_path / "episodes.csv"
            on_disk.append(len(pd.read_csv(path)) if path.exists() else 0)
            calls["held_out"] += 1
            if calls["held_out"] == 3:
                raise RuntimeError("boom\nsecond line")
        return real(env, policy, seed)

    monkeypatch.setattr(bench, "episode_kpis", failing)

    with pytest.raises(CompareFailed) as caught:
        bench_policies(
            [TINY],
            modes=["surrogate"],
            seeds=[1000, 1001],
            train_seeds=[0],
            out=tmp_path,
            only=["round_robin", "constant_tuned"],
        )

    episodes = pd.read_csv(tmp_path / "episodes.csv")
    assert on_disk == [0, 1, 2]  # each finished row was written before the next
    assert list(episodes[["policy", "seed"]].itertuples(index=False, name=None)) == [
        ("round_robin", 1000),
        ("constant_tuned", 1000),
    ]
    assert {"scenario", "mode", "return", *KPIS} <= set(episodes)
    # 4 tuning + 4 held-out episodes planned; 4 + 2 done, 2 rows kept
    assert "after 6 of 8 runs" in str(caught.value)
    assert "the 2 finished row(s)" in str(caught.value)
    assert "RuntimeError: boom" in str(caught.value)
    err = capsys.readouterr().err
    assert "episodes" in err and "6/8" in err  # the tqdm bar


def test_cli_bad_set_key_names_the_key_without_a_traceback(capsys):
    from rayfl.cli import main

    argv = ["--scenario", "star-small", "--set", "algorithm.nope=1", "--out", "x"]

    code = main(["bench", "policies", *argv])

    err = capsys.readouterr().err
    assert code == 2
    assert "algorithm.nope: unknown key" in err and "Traceback" not in err


def test_a_best_value_still_at_an_edge_after_the_extensions_tries_the_limit():
    """÷2 never reaches 0: a neighbour probability of 0 (local training) is tried."""
    from rayfl.benchmarks.policies.tuning import edge_limit, tune_policy
    from tests.configs import TINY_D2D

    cfg = load_config(TINY_D2D)
    seen: list[list[str]] = []

    def fewer_is_better(cfg, specs, seeds, mode, progress=None):
        seen.append([s[0] for s in specs])
        return [
            {"policy": label, "seed": s, "return": -p["probability"]}
            for label, _, p in specs
            for s in seeds
        ]

    scores: dict = {}
    # Act
    chosen = tune_policy(
        cfg,
        [0],
        "surrogate",
        play=fewer_is_better,
        policy="random_neighbors",
        scores=scores,
    )
    # Assert: the grid, MAX_EXTENSIONS halvings, then the range's limit
    assert chosen == {"probability": 0.0}
    assert len(seen) == 2 + MAX_EXTENSIONS
    assert seen[-1] == ["random_neighbors_tuned:probability=0.0"]
    assert min(float(v) for v in scores["probability"] if float(v) > 0) == 0.1 / 2**4
    # inside, or at an infinite limit: nothing more
    assert edge_limit([0.1, 0.2, 0.4], 0.2, 0.0, 1.0) is None
    assert edge_limit([1.0, 2.0], 2.0, 1.0, float("inf")) is None
