"""PEDPFL and HFL-DP at equal ledger ε (docs/h2fdp/equal_privacy.csv) against the oracle.

The oracle (``tests.privacy.test_oracle``) builds its own dp-accounting events.
A PEDPFL device makes one release per global round, a step of τ SGD steps
clipped to η·τ·G: z = σ/(2η·τ·G), K_g releases at q = 1. An HFL-DP device
makes τ/m releases per global round (τ/m − 1 local, one global), each a step of
m SGD steps clipped to η·m·G: z = σ/(2η·m·G), both streams seen by its
untrusted edge. The σ checked are the code path's (``stream_stds``) and the
ones the runs recorded (``sigma_device_*_r0``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dp_accounting import ComposedDpEvent, rdp
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr

from rayfl.config import load_config
from rayfl.hierarchy.dp import stream_stds
from tests.privacy.test_oracle import _event, oracle_epsilon

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "h2fdp" / "equal_privacy.csv"
LABEL = "pedpfl (equal ledger ε)"
HFL_LABEL = "hfl_dp (equal ledger ε)"
ROUNDS = 50


def _config(epsilon: float, calibration: str = "accountant"):
    return load_config(
        ROOT / "examples" / "h2fdp_fmnist.yaml",
        [
            f"rounds={ROUNDS}",
            "topology.baseline=pedpfl",
            f"topology.dp.calibration={calibration}",
            f"topology.dp.epsilon={epsilon!r}",
        ],
    )


def _first_sensitivity(cfg) -> float:
    """Δ of a round-0 release: 2 η_0 τ G, η_0 = γ/√1 (manual schedule)."""
    topo = cfg.topology
    assert topo.lr.mode == "manual"
    return 2 * topo.lr.gamma * topo.tau * topo.dp.grad_bound


def _exact_delta(epsilon: float, z: float) -> float:
    """δ(ε) of one Gaussian mechanism of multiplier z, in log space (ε ≫ 1)."""
    mu = 1.0 / z
    return float(
        ndtr(mu / 2 - epsilon / mu) - np.exp(epsilon + log_ndtr(-epsilon / mu - mu / 2))
    )


def _table() -> pd.DataFrame:
    return pd.read_csv(TABLE)


def _targets() -> list[float]:
    t = _table()
    return sorted(t.loc[t["variant"] == LABEL, "target_epsilon"].tolist())


def test_table_has_three_seeds_and_targets_from_the_controlled_run() -> None:
    t = _table()
    sweep = pd.read_csv(TABLE.with_name("results.csv")).set_index(["seed", "variant"])
    for seed, d in t.groupby("seed"):
        d = d.set_index("variant")
        for base in ("h2fdp_ctrl", "hfl_dp", "pedpfl"):  # the same runs as results.csv
            for col in ("final_acc", "energy_j", "epsilon_max", "round_reached_low"):
                assert d.loc[base, col] == pytest.approx(
                    sweep.loc[(seed, base), col], rel=1e-12, nan_ok=True
                )
        ctrl = d.loc["h2fdp_ctrl", "epsilon_max"]
        assert d.loc[LABEL, "target_epsilon"] == pytest.approx(ctrl, rel=1e-12)
        assert d.loc[LABEL, "calibration"] == "accountant"
        assert d.loc[HFL_LABEL, "target_epsilon"] == pytest.approx(ctrl, rel=1e-12)
        assert d.loc[HFL_LABEL, "calibration"] == "closed_form"
        assert d.loc[LABEL, "rounds"] == ROUNDS
    assert sorted(t["seed"].unique()) == [0, 1, 2]


@pytest.mark.parametrize("target", _targets())
def test_code_path_sigma_meets_the_target_under_the_oracle(target: float) -> None:
    cfg = _config(target)
    stds = stream_stds(
        cfg.topology.dp,
        enabled=True,
        trusted=np.array([False]),
        participants=np.array([cfg.data.num_clients]),
        learning_rate=cfg.topology.lr.gamma,
        tau=cfg.topology.tau,
        period=cfg.topology.tau,
        num_global=ROUNDS,
        num_local=0,
        sample_rate=0.027,  # eq. 15's q: the accountant mode must ignore it
    )
    z = float(stds.device_global[0]) / _first_sensitivity(cfg)
    delta = cfg.topology.dp.delta
    eps = oracle_epsilon(z, ROUNDS, delta)
    assert eps <= target * (1 + 1e-6)
    assert eps == pytest.approx(target, rel=1e-4)
    # the oracle's own calibration: the smallest z with ε(z) ≤ target
    z_star = brentq(lambda v: oracle_epsilon(v, ROUNDS, delta) - target, 1e-3, 10.0)
    assert z == pytest.approx(z_star, rel=1e-4)
    # exact: K_g Gaussian releases of multiplier z are one of multiplier z/√K_g;
    # its δ(ε) (Balle and Wang 2018, Thm. 8) at the target is ≤ δ, and not
    # far below it (RDP is a close upper bound here)
    assert _exact_delta(target, z / math.sqrt(ROUNDS)) <= delta
    assert _exact_delta(0.95 * target, z / math.sqrt(ROUNDS)) > delta
    assert float(stds.device_local[0]) == 0.0  # no edge aggregation: one stream


def test_recorded_sigma_gives_the_recorded_ledger_epsilon() -> None:
    t = _table()
    pedpfl = t[t["method"] == "pedpfl"]
    assert len(pedpfl) == 6  # eq. 15 at ε = 32 and the equal-ledger run, per seed
    for row in pedpfl.itertuples():
        cfg = _config(float(row.eps), str(row.calibration))
        z = row.sigma_device_global_r0 / _first_sensitivity(cfg)
        eps = oracle_epsilon(float(z), ROUNDS, cfg.topology.dp.delta)
        assert row.epsilon_max == pytest.approx(eps, rel=1e-4), row.variant
        if row.variant == LABEL:
            assert row.epsilon_max == pytest.approx(row.target_epsilon, rel=1e-4)
            assert row.epsilon_max <= row.target_epsilon * (1 + 1e-9)
        else:  # eq. 15 at nominal ε spends far more than it names
            assert row.epsilon_max > 100 * row.eps
    assert pedpfl["sigma_device_global_r0"].notna().all()


def _hfl_dp_oracle(cfg, sigma_local: float, sigma_global: float) -> float:
    topo = cfg.topology
    sensitivity = 2 * topo.lr.gamma * topo.local_period * topo.dp.grad_bound
    per_round = topo.tau // topo.local_period  # segments of m steps
    accountant = rdp.RdpAccountant()
    accountant.compose(
        ComposedDpEvent(
            [
                _event(sigma_local / sensitivity, ROUNDS * (per_round - 1)),
                _event(sigma_global / sensitivity, ROUNDS),
            ]
        )
    )
    return float(accountant.get_epsilon(topo.dp.delta))


def test_hfl_dp_recorded_sigma_gives_the_recorded_ledger_epsilon() -> None:
    t = _table()
    hfl = t[t["method"] == "hfl_dp"]
    assert len(hfl) == 6
    cfg = load_config(ROOT / "examples" / "h2fdp_fmnist.yaml", [f"rounds={ROUNDS}"])
    assert cfg.topology.tau % cfg.topology.local_period == 0
    for row in hfl.itertuples():
        eps = _hfl_dp_oracle(
            cfg, float(row.sigma_device_local_r0), float(row.sigma_device_global_r0)
        )
        assert row.epsilon_max == pytest.approx(eps, rel=1e-6), row.variant
    for seed, d in hfl.groupby("seed"):
        d = d.set_index("variant")
        eq, nominal = d.loc[HFL_LABEL], d.loc["hfl_dp"]
        assert eq["epsilon_max"] == pytest.approx(eq["target_epsilon"], rel=5e-4), seed
        # eq. 15 kept: both streams' σ scale by nominal ε / scaled ε
        for col in ("sigma_device_local_r0", "sigma_device_global_r0"):
            ratio = eq[col] / nominal[col]
            assert ratio == pytest.approx(nominal["eps"] / eq["eps"], rel=1e-9)


@pytest.mark.parametrize("target", [50.0, 2957.4])
def test_scaled_nominal_epsilon_meets_the_target_for_two_streams(target) -> None:
    """150 local and 50 global releases, z ∝ 1/ε (eq. 15): the scaling holds."""
    from tests.test_examples import _script

    mod = _script("reproduce_h2fdp")
    delta = 1e-5

    def ledger(epsilon: float) -> float:
        accountant = rdp.RdpAccountant()
        accountant.compose(
            ComposedDpEvent([_event(4.0 / epsilon, 150), _event(2.0 / epsilon, 50)])
        )
        return float(accountant.get_epsilon(delta))

    run = pd.Series({"eps": 32.0, "epsilon_max": ledger(32.0)})
    eps = mod._scaled_epsilon(run, target, delta)
    assert ledger(eps) == pytest.approx(target, rel=5e-4)
    assert abs(eps - 32.0) > 1.0  # the targets are far from the run's ε
