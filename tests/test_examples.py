"""Smoke runs of every example on a tiny budget (STYLE.md rule 35); slow."""

from pathlib import Path

import pytest

import rayfl
from rayfl.compare.variants import sweep
from rayfl.config import load_config

EXAMPLES = sorted(Path(__file__).parents[1].joinpath("examples").glob("*.yaml"))
TINY = {"rounds": 2, "data.num_clients": 4, "output.progress": False, "eval_every": 1}


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_smoke(ray_session, tmp_path, path):
    full = load_config(path)  # the example as shipped must be valid
    shrink: dict = {**TINY, "output.dir": str(tmp_path)}
    if full.wireless is not None and full.wireless.num_subchannels > 4:
        shrink["wireless.num_subchannels"] = 4
    if full.topology.kind == "hierarchical":  # 4 devices: 2 edges of 2
        shrink["topology.num_edges"] = 2
    if full.scheduler.clients_per_round:
        shrink["scheduler.clients_per_round"] = 2
    if full.data.client_sizes:  # the first 4 clients' sizes
        shrink["data.client_sizes"] = full.data.client_sizes[:4]
    cfg = load_config(path, shrink)
    if (
        cfg.data.dataset == "fashion_mnist"
        and not Path("/usr/share/datasets/fashion-mnist").is_dir()
    ):
        pytest.skip("dataset-fashion-mnist not installed")
    if cfg.sweep:
        table, _ = sweep(cfg)
        assert len(table) >= 1
    else:
        result = rayfl.run(cfg)
        assert result.summary["status"] == "completed"


def _script(name: str):
    """Import ``examples/<name>.py`` as a module (the examples are not a package)."""
    import importlib.util
    import sys

    path = Path(__file__).parents[1] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _curve(seed, variant, accs, energy, rounds=4, tau=20, fraction=0.0):
    """Per-round rows as reproduce_h2fdp writes them (eval at rounds 2 and 4)."""
    import numpy as np

    return [
        {
            "seed": seed,
            "variant": variant,
            "method": "h2fdp",
            "eps": 1.0,
            "fraction": fraction,
            "rounds": rounds,
            "round": k,
            "energy_j_cum": energy * (k + 1),
            "delay_s_cum": 2.0 * (k + 1),
            "tau": tau,
            "s_trusted": 5.0,
            "s_untrusted": np.nan,
            "eta": 0.05,
            "sigma_device_local": 0.0,
            "sigma_device_global": 0.0,
            "sigma_edge_local": 0.7 / (k + 1),
            "sigma_edge_global": 0.3,
            "global_acc": accs.get(k, np.nan),
            "wall_s": 9.0,
            "epsilon_max": 3.5,
        }
        for k in range(rounds)
    ]


def test_reproduce_h2fdp_summary_and_resume():
    """results.csv rows: last evaluated accuracy, totals, first round at target."""
    import pandas as pd

    mod = _script("reproduce_h2fdp")
    curves = pd.DataFrame(
        _curve(0, "a", {1: 0.6, 3: 0.8}, 1.0)
        + _curve(1, "a", {1: 0.76, 3: 0.7}, 2.0)
        + _curve(0, "b", {1: 0.1}, 1.0, fraction=0.5)[:2]  # unfinished run
        + _curve(0, "c", {3: 0.9}, 1.0, fraction=1.0)
        + _curve(1, "c", {3: 0.65}, 1.0, fraction=1.0)
    )
    res = mod.summarise(curves, target=0.75).set_index(["seed", "variant"])
    assert res.loc[(0, "a"), "final_acc"] == 0.8
    assert res.loc[(0, "a"), "energy_j"] == 4.0
    assert res.loc[(0, "a"), "round_reached"] == 4  # 1-based global round
    assert res.loc[(0, "a"), "energy_to_target_j"] == 4.0
    low = mod.summarise(curves, target=0.75, low_target=0.6)
    assert low.set_index(["seed", "variant"]).loc[(0, "a"), "round_reached_low"] == 2
    assert res.loc[(1, "a"), "round_reached"] == 2
    assert res.loc[(1, "a"), "delay_to_target_s"] == 4.0
    assert res.loc[(1, "a"), "final_acc"] == 0.7
    assert res.loc[(0, "a"), "sigma_edge_local_r0"] == 0.7
    # trust gain: paired with p_c = 0 of the same seed and ε
    assert res.loc[(0, "c"), "acc_gain_vs_p0"] == pytest.approx(0.1)
    assert res.loc[(1, "c"), "acc_gain_vs_p0"] == pytest.approx(-0.05)
    assert res.loc[(1, "a"), "acc_gain_vs_p0"] == 0.0
    # resume: only complete runs at the same number of rounds count as done
    assert mod.done_labels(curves, 0, 4) == {"a", "c"}
    assert mod.done_labels(curves, 0, 5) == set()
    assert mod.done_labels(curves, 2, 4) == set()


def test_reproduce_h2fdp_plan_reuses_identical_runs():
    """Algorithm 2 and HFL-DP reuse the sweep's runs only when the sweep has them."""
    mod = _script("reproduce_h2fdp")
    args = mod._args(["--eps", "1", "8", "--fractions", "0", "1"])
    variants = {v.label: v for v in mod.plan(args)}
    assert len(variants) == 4 + 1 + 4  # sweep, HFL, control comparison
    assert variants["hfl_dp"].same_as == "h2fdp p=0 eps=1"
    assert variants["h2fdp_noctrl"].same_as is None  # p_c = 0.5 not swept
    assert variants["h2fdp_ctrl"].same_as is None
    args = mod._args(["--skip-sweep", "--no-pedpfl", "--control-eps", "8"])
    assert [v.same_as for v in mod.plan(args)] == [None, None, None]


def test_reproduce_h2fdp_reductions_and_trust_gain():
    """Per-seed reductions of H2FDP(ctrl) and the gain over p_c = 0 at equal ε."""
    import numpy as np
    import pandas as pd

    mod = _script("reproduce_h2fdp")
    rows = []
    for seed, scale in ((0, 1.0), (1, 2.0)):
        for variant, method, frac, acc, energy, to_target in (
            ("h2fdp p=0 eps=1", "h2fdp", 0.0, 0.5, 10.0, np.nan),
            ("h2fdp p=1 eps=1", "h2fdp", 1.0, 0.7, 10.0, np.nan),
            ("h2fdp_ctrl", "h2fdp_ctrl", 0.5, 0.76, 4.0, 3.0),
            ("h2fdp_noctrl", "h2fdp_noctrl", 0.5, 0.78, 10.0, 6.0),
        ):
            rows.append(
                {
                    "seed": seed,
                    "variant": variant,
                    "method": method,
                    "eps": 1.0,
                    "fraction": frac,
                    "final_acc": acc * scale,
                    "energy_j": energy,
                    "delay_s": energy,
                    "energy_to_target_j": to_target,
                    "delay_to_target_s": to_target,
                    "energy_to_low_target_j": energy / 2,
                    "delay_to_low_target_s": energy / 2,
                }
            )
    res = pd.DataFrame(rows)
    red = mod.reductions(res)
    assert len(red) == 2 * 1 * 2 * 3  # seeds × baselines × metrics × bases
    total = red[(red["basis"] == "total") & (red["metric"] == "energy")]
    assert np.allclose(total["reduction_pct"], 60.0)
    assert np.allclose(red[red["basis"] == "to_target"]["reduction_pct"], 50.0)
    assert np.allclose(red[red["basis"] == "to_low_target"]["reduction_pct"], 60.0)
    assert set(red["paper_fmnist_pct"]) == {25.1, 24.9}
