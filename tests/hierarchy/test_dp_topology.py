"""Hierarchical DP stds (spec §2.6), the observer ledger, topology and cost model."""

import math

import numpy as np
import pytest

from rayfl.hierarchy.config import CostConfig, HierDPConfig, TopologyConfig
from rayfl.hierarchy.cost import CostModel, uplink_rate_bps
from rayfl.hierarchy.dp import ObserverLedger, noise_multiplier, stream_stds
from rayfl.hierarchy.topology import build_topology

KW = dict(
    learning_rate=0.05,
    tau=20,
    period=5,
    num_global=200,
    num_local=3,
    sample_rate=0.027,
)


def test_stds_match_eq_15_closed_form():
    # σ_{i,Loc} = 2 v_2 q η τ G √(K_g K_ℓ ln(1/δ))/ε, σ̄ = same c_2 / s_c (spec §2.6)
    s = stream_stds(
        HierDPConfig(),
        enabled=True,
        trusted=np.array([True, False]),
        participants=np.array([5, 5]),
        **KW,
    )
    expect_loc = (
        2 * 1.5 * 0.027 * 0.05 * 20 * 1.0 * math.sqrt(600 * math.log(1e5)) / 1.0
    )
    expect_glob = (
        2 * 1.5 * 0.027 * 0.05 * 20 * 1.0 * math.sqrt(200 * math.log(1e5)) / 1.0
    )
    assert s.device_local[1] == pytest.approx(expect_loc)
    assert s.device_global[1] == pytest.approx(expect_glob)
    assert s.edge_local[0] == pytest.approx(expect_loc / 5)
    assert s.edge_global[0] == pytest.approx(expect_glob / 5)
    assert s.device_local[0] == 0 and s.edge_local[1] == 0


def test_options_scale_the_stds():
    base = stream_stds(
        HierDPConfig(),
        enabled=True,
        trusted=np.array([False]),
        participants=np.array([5]),
        **KW,
    )
    strict = stream_stds(
        HierDPConfig(strict_accounting=True),
        enabled=True,
        trusted=np.array([False]),
        participants=np.array([5]),
        **KW,
    )
    period = stream_stds(
        HierDPConfig(local_sensitivity_steps="period"),
        enabled=True,
        trusted=np.array([False]),
        participants=np.array([5]),
        **KW,
    )
    assert strict.device_global[0] == pytest.approx(2 * base.device_global[0])
    assert period.device_local[0] == pytest.approx(base.device_local[0] / 4)
    assert period.device_global[0] == pytest.approx(base.device_global[0])
    off = stream_stds(
        HierDPConfig(),
        enabled=False,
        trusted=np.array([False]),
        participants=np.array([5]),
        **KW,
    )
    assert off.device_local[0] == 0 and off.device_global[0] == 0


def test_accountant_mode_meets_its_target():
    # z from dp-accounting at q = 1 (device batches are not Poisson samples): the
    # ledger's ε of L releases at q = 1 is the target; eq. 15's q is ignored.
    from rayfl.privacy.accountant import PrivacyLedger

    z = noise_multiplier(
        epsilon=1.0,
        delta=1e-5,
        sample_rate=0.027,
        releases=200,
        constant=1.5,
        calibration="accountant",
    )
    led = PrivacyLedger(1)
    led.record([0], noise_multiplier=z, sample_rate=1.0, steps=200)
    assert led.epsilon(1e-5)[0] == pytest.approx(1.0, abs=0.02)
    assert z > 50  # ~ √200 × the single-release z of (1, 1e-5): no amplification


def test_observer_ledger_untrusted_edge_sees_both_streams():
    led = ObserverLedger(2, delta=1e-5, strict=False)
    for _ in range(50):
        led.record([0], trusted=True, noise_multiplier=1.0)
        led.record([1], trusted=False, noise_multiplier=1.0)
    per = led.per_observer()
    assert per["edge"][0] == 0 and per["edge"][1] > 0  # a trusted edge is no observer
    assert per["cloud"][0] == pytest.approx(per["cloud"][1])
    eps, _ = led.epsilons()
    assert eps[1] == pytest.approx(per["edge"][1])


def test_topology_sizes_trust_and_baselines():
    t = build_topology(TopologyConfig(num_edges=10, trusted_fraction=0.5), 50, seed=3)
    assert t.sizes.tolist() == [5] * 10 and int(t.trusted.sum()) == 5
    again = build_topology(
        TopologyConfig(num_edges=10, trusted_fraction=0.5), 50, seed=3
    )
    assert (t.trusted == again.trusted).all() and (
        t.distance_m == again.distance_m
    ).all()
    assert ((t.distance_m >= 10) & (t.distance_m <= 100)).all()
    r = build_topology(TopologyConfig(num_edges=4, assignment="random"), 10, seed=0)
    assert sorted(i for s in r.subnets for i in s) == list(range(10))
    near = build_topology(TopologyConfig(num_edges=4, assignment="nearest"), 60, seed=0)
    assert sum(near.sizes) == 60
    p = build_topology(TopologyConfig(num_edges=10, baseline="pedpfl"), 50, seed=0)
    assert p.num_edges == 1 and not p.trusted.any()
    h = build_topology(
        TopologyConfig(num_edges=10, baseline="hfl_dp", trusted_fraction=1.0),
        50,
        seed=0,
    )
    assert not h.trusted.any()
    fixed = build_topology(
        TopologyConfig(num_edges=3, trusted_edges=(2,), clients_per_edge=(1, 2, 3)),
        6,
        seed=0,
    )
    assert fixed.subnets == ((0,), (1, 2), (3, 4, 5)) and fixed.trusted.tolist() == [
        False,
        False,
        True,
    ]
    with pytest.raises(ValueError, match="clients_per_edge sums to"):
        build_topology(TopologyConfig(num_edges=2, clients_per_edge=3), 7, seed=0)


def test_cost_model_matches_the_spec_sanity_table():
    # spec §2.7 [CHECK]: M = 7840, Q = 32: 10 m → 23.1 Mbps, 10.9 ms, 2.7 mJ;
    # 100 m → 10.6 Mbps, 23.6 ms, 5.9 mJ; backhaul 2.5 ms, 15.8 mJ.
    cost = CostConfig()
    assert uplink_rate_bps(cost, distance_m=100.0, fading=1.0) / 1e6 == pytest.approx(
        10.6, abs=0.05
    )
    m = CostModel(cost, distance_m=np.array([10.0, 100.0]), model_dim=7840)
    assert m.expected_time_s * 1e3 == pytest.approx([10.9, 23.6], abs=0.05)
    assert m.expected_energy_j * 1e3 == pytest.approx([2.7, 5.9], abs=0.05)
    energy, delay = m.global_hop()
    assert energy * 1e3 == pytest.approx(15.8, abs=0.05) and delay == pytest.approx(
        2 * 2.5088e-3
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"sensitivity_mode": "per_sample_mean"}, "topology.dp.sensitivity_mode"),
        ({"sample_rate": 0.027}, "topology.dp.sample_rate"),
        ({"grad_bound": math.inf}, "grad_bound\n  Input should be a finite number"),
        ({"epsilon": math.inf}, "epsilon\n  Input should be a finite number"),
    ],
    ids=["per-sample-mean", "sample-rate", "grad-bound-inf", "epsilon-inf"],
)
def test_invalid_dp_settings_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        HierDPConfig(**fields)


def test_release_noise_multiplier_uses_the_enforced_step_sensitivity():
    from rayfl.hierarchy.dp import release_noise_multiplier

    # device: step of 3 SGD steps clipped to η·3·G → Δ = 2·0.1·3·2 = 1.2
    z = release_noise_multiplier(0.6, learning_rate=0.1, steps=3, grad_bound=2.0)
    assert z == pytest.approx(0.5)
    # trusted edge, equal weights over 4 devices: Δ = 1.2/4
    z_edge = release_noise_multiplier(
        0.6, learning_rate=0.1, steps=3, grad_bound=2.0, max_weight=0.25
    )
    assert z_edge == pytest.approx(2.0)
    # no clip: nothing bounds the release
    assert (
        release_noise_multiplier(0.6, learning_rate=0.1, steps=3, grad_bound=None) == 0
    )
