"""Fitting the star surrogate to rollouts (``rayfl bench policies --fit-surrogate``).

The oracle: rollouts of the surrogate itself (:class:`envs.surrogate.SurrogateDynamics`,
an implementation independent of the fit's ``predict``) with known constants;
the fit must give them back.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from envs.surrogate import SurrogateDynamics
from rayfl.benchmarks import policies as bench
from rayfl.benchmarks import surrogate_fit as surrogate_fit_cli
from rayfl.benchmarks.policies.cli import surrogate_overrides
from rayfl.benchmarks.policies.scenarios import Scenario
from rayfl.benchmarks.surrogate_fit import (
    Trajectory,
    fit,
    fit_command,
    load_trajectories,
    predict,
    save_trajectories,
)
from rayfl.config import load_config

TRUE = {
    "contraction": 1.3,
    "participation_scale": 2.0,
    "recency_scale": 1.6,
    "channel_weight": 4.0,
}
RANGES = {
    "floor_low": 0.1,
    "floor_high": 0.8,
    "heterogeneity_low": 0.3,
    "heterogeneity_high": 1.6,
}


def oracle_rollouts(seeds=(0, 1), n=6, rounds=12):
    """Random schedules played on the surrogate with the TRUE constants."""
    trajs, truth = [], {}
    for seed in seeds:
        share = np.random.default_rng(seed).dirichlet(np.full(n, 2.0))
        for p, k in enumerate((2, 3)):
            dyn = SurrogateDynamics(
                share,
                10,
                0.0,
                np.random.default_rng(100 + seed),  # same clients in both rollouts
                recency_weight=0.5,
                **TRUE,
                **RANGES,
            )
            truth[seed] = dyn
            rng = np.random.default_rng(10 * seed + p)
            loss, delivered, errors = [dyn.client_loss()], [], []
            for _ in range(rounds):
                ids = np.sort(rng.choice(n, size=k, replace=False))
                rho = rng.uniform(0.0, 0.02, size=k)
                dyn.step(ids, rho)
                delivered.append(ids)
                errors.append(rho)
                loss.append(dyn.client_loss())
            trajs.append(
                Trajectory(
                    seed,
                    f"k{k}",
                    share,
                    10,
                    0.0,
                    tuple(delivered),
                    tuple(errors),
                    np.array(loss),
                )
            )
    return trajs, truth


@pytest.fixture(scope="module")
def oracle():
    trajs, truth = oracle_rollouts()
    return trajs, truth, fit(trajs)


def test_predict_replays_the_surrogate_exactly():
    trajs, truth = oracle_rollouts(seeds=(3,))
    dyn = truth[3]
    shared = {**TRUE, "noise_weight": 1.0}
    for t in trajs:
        got = predict(shared, dyn.floor, dyn.heterogeneity, dyn.drift, t)
        np.testing.assert_allclose(got, t.loss, rtol=0, atol=1e-12)
    # a wrong constant is visible: the comparison can fail
    wrong = predict(
        {**shared, "contraction": 0.5},
        dyn.floor,
        dyn.heterogeneity,
        dyn.drift,
        trajs[0],
    )
    assert np.abs(wrong - trajs[0].loss).max() > 1e-2


def test_fit_recovers_the_constants_of_its_own_rollouts(oracle):
    trajs, truth, result = oracle
    assert sorted(result.fitted) == sorted(TRUE)  # channel errors: a_channel identified
    for name, value in TRUE.items():
        assert result.shared[name] == pytest.approx(value, rel=1e-4), name
    assert result.rmse < 1e-6
    assert result.rmse_default > 100 * result.rmse  # the defaults do not fit
    for seed, dyn in truth.items():
        mine = result.clients[result.clients["seed"] == seed]
        np.testing.assert_allclose(mine["floor"], dyn.floor, atol=1e-4)
        np.testing.assert_allclose(mine["heterogeneity"], dyn.heterogeneity, atol=1e-4)
        np.testing.assert_allclose(mine["drift"], dyn.drift, atol=1e-4)


def test_rl_fields_are_the_moments_of_the_fitted_clients(oracle):
    _, truth, result = oracle
    fields = result.rl_fields()
    floor = np.concatenate([d.floor for d in truth.values()])
    half = np.sqrt(3.0) * floor.std()
    assert fields["surrogate_floor"] == pytest.approx(
        [max(floor.mean() - half, 0), floor.mean() + half], abs=1e-3
    )
    drift = np.concatenate([d.drift for d in truth.values()])
    assert fields["surrogate_recency"] == pytest.approx(drift.mean(), abs=1e-3)
    assert fields["surrogate_contraction"] == pytest.approx(
        TRUE["contraction"], abs=1e-3
    )
    # the fragment is a valid rl section
    rl = load_config({}, {f"rl.{k}": v for k, v in fields.items()}).rl
    assert rl.surrogate_participation_scale == pytest.approx(2.0, abs=1e-3)


def test_trajectories_round_trip_through_csv(tmp_path):
    trajs, _ = oracle_rollouts(seeds=(0,), rounds=4)
    save_trajectories(trajs, tmp_path / "t.csv")
    back = load_trajectories(tmp_path / "t.csv")
    assert len(back) == len(trajs)
    for a, b in zip(trajs, back, strict=True):
        assert (a.seed, a.policy, a.num_classes) == (b.seed, b.policy, b.num_classes)
        np.testing.assert_allclose(a.loss, b.loss)
        np.testing.assert_allclose(a.data_share, b.data_share)
        for x, y in zip(a.delivered, b.delivered, strict=True):
            np.testing.assert_array_equal(x, y)
        for x, y in zip(a.element_error, b.element_error, strict=True):
            np.testing.assert_allclose(x, y)


TINY = Scenario(
    "tiny-fit",
    "star",
    "small",
    {
        "name": "tiny-fit",
        "rounds": 6,
        "data": {"dataset": "digits", "num_clients": 5, "partition": "iid"},
        "model": {"kind": "mlr"},
        "wireless": {"num_subchannels": 2},
        "output": {"progress": False, "plots": False},
        "rl": {"surrogate_contraction": 0.8, "surrogate_participation_scale": 2.5},
    },
)


def test_the_command_on_surrogate_rollouts_gives_back_the_configured_surrogate(
    tmp_path,
):
    cfg = load_config(TINY.config)
    specs = [("round_robin", "round_robin", {}), ("random", "random", {})]
    result = fit_command(
        cfg, specs, [2000], tmp_path, mode="surrogate", say=lambda _: None
    )
    assert result.shared["contraction"] == pytest.approx(0.8, rel=1e-3)
    assert result.shared["participation_scale"] == pytest.approx(2.5, rel=1e-3)
    report = json.loads((tmp_path / "surrogate_fit.json").read_text())
    assert report["seeds"] == [2000]
    assert report["policies"] == ["round_robin", "random"]
    assert len(load_trajectories(tmp_path / "trajectories.csv")) == 2
    fragment = yaml.safe_load((tmp_path / "surrogate_fit.yaml").read_text())
    overrides = surrogate_overrides(tmp_path / "surrogate_fit.yaml")
    assert (
        overrides["rl.surrogate_contraction"] == fragment["rl"]["surrogate_contraction"]
    )


def test_fit_seeds_must_be_disjoint_from_the_held_out_seeds():
    with pytest.raises(bench.BenchError, match="--fit-seeds"):
        surrogate_fit_cli.main(
            ["--scenario", "star-small", "--seeds", "0:3", "--fit-seeds", "2:4"]
        )


def test_fit_needs_a_star_scenario():
    with pytest.raises(bench.BenchError, match="star scenario"):
        surrogate_fit_cli.main(["--scenario", "d2d-small"])


def test_rayfl_bench_lists_the_fit():
    from rayfl.benchmarks import BENCHMARKS

    assert BENCHMARKS["fit-surrogate"] == "rayfl.benchmarks.surrogate_fit"


def test_a_bad_surrogate_file_is_one_clear_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("rl:\n  lr: 0.1\n")
    with pytest.raises(bench.BenchError, match="surrogate_"):
        bench.main(
            [
                "--scenario",
                "star-small",
                "--surrogate",
                str(bad),
                "--out",
                str(tmp_path),
            ]
        )
    with pytest.raises(bench.BenchError, match="no such file"):
        bench.main(
            ["--scenario", "star-small", "--surrogate", str(tmp_path / "none.yaml")]
        )


def test_bad_ranges_are_refused_with_the_field_name():
    with pytest.raises(Exception, match="surrogate_floor"):
        load_config({}, {"rl.surrogate_floor": [0.5, 0.2]})


def _episodes(mode, offset):
    rows = []
    for i, policy in enumerate(["random", "round_robin", "age_based"]):
        for seed in (1000, 1001, 1002):
            rows.append(
                {
                    "scenario": "s",
                    "topology": "star",
                    "size": "small",
                    "mode": mode,
                    "policy": policy,
                    "seed": seed,
                    "return": -10.0 + i + offset + 0.1 * seed % 3,
                    **{k: 0.5 for k in ("max_client_loss", "jain", "accuracy")},
                    **{k: 1.0 for k in ("energy_j", "latency_s", "epsilon")},
                }
            )
    return pd.DataFrame(rows)


def test_merge_reports_episodes_of_two_runs_together_and_refuses_duplicates(
    tmp_path, monkeypatch
):
    from rayfl.benchmarks.policies import report as policies_report

    monkeypatch.setattr(policies_report, "plot_scenario", lambda *a: None)  # speed
    for mode, offset in (("surrogate", 0.0), ("emulate", -1.0)):
        d = tmp_path / mode
        d.mkdir()
        _episodes(mode, offset).to_csv(d / "episodes.csv", index=False)
        pd.DataFrame([{"scenario": "s", "mode": mode, "wall_s": 1.0}]).to_csv(
            d / "runs.csv", index=False
        )
    out = tmp_path / "merged"
    bench.main(
        [
            "--merge",
            f"{tmp_path / 'surrogate'},{tmp_path / 'emulate'}",
            "--out",
            str(out),
        ]
    )
    check = pd.read_csv(out / "surrogate_check.csv")
    assert set(check["policy"]) == {"random", "round_robin", "age_based"}
    assert check["spearman"].iloc[0] == pytest.approx(1.0)  # same order in both modes
    assert len(pd.read_csv(out / "runs.csv")) == 2
    # DIR:MODE takes one mode: the emulate episodes of a two-mode run
    both = tmp_path / "both"
    bench.main(
        [
            "--merge",
            f"{tmp_path / 'surrogate'},{tmp_path / 'emulate'}",
            "--out",
            str(both),
        ]
    )
    again = tmp_path / "again"
    bench.main(
        ["--merge", f"{both}:emulate,{tmp_path / 'surrogate'}", "--out", str(again)]
    )
    pd.testing.assert_frame_equal(
        pd.read_csv(again / "surrogate_check.csv"),
        pd.read_csv(out / "surrogate_check.csv"),
    )
    with pytest.raises(bench.BenchError, match="two sources have the episode"):
        bench.main(
            [
                "--merge",
                f"{tmp_path / 'emulate'},{tmp_path / 'emulate'}",
                "--out",
                str(out),
            ]
        )
