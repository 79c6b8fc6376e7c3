"""D2D devices (issue 48, rayfl.d2d.devices): availability, stragglers, fading memory.

Oracles without Ray:
- the round deadline drops exactly the models whose local training time
  τ·abs(D_s)·Φ/f_s plus D2D airtime 32·dim / (W·log2(1 + P ĥ²/σ²)) exceed it,
  both computed here from the config alone;
- a node's availability is the star's on/off chain of (seed, node), and its
  long-run share of rounds up is T_on / (T_on + T_off);
- with correlated fading a bernoulli link still succeeds with probability
  1 − P^err (Monte-Carlo), but its successes are correlated over rounds as a
  Gauss-Markov Rayleigh channel's are (a separate bivariate simulation);
- mc_sinr with the fading given is the SINR rule on that fading;
- the observation: an away node is not eligible, the device keys appear
  only when configured, and the CSI after round 0 is last round's fading;
- config errors name the topology field.
"""

from __future__ import annotations

import numpy as np
import pytest

from rayfl.config import ConfigError, load_config
from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.devices import D2DDevices, LinkState, device_keys
from rayfl.d2d.layout import make_layout
from rayfl.d2d.links import deliveries
from rayfl.d2d.motion import D2DMotion
from rayfl.d2d.selection import (
    Selection,
    round_observation,
    selection_observation,
    selection_spaces,
)
from rayfl.observation import ObservationTracker
from rayfl.wireless.compute import cpu_frequencies
from rayfl.wireless.d2d import d2d_round_delivery
from rayfl.wireless.dynamics import OnOffAvailability
from rayfl.wireless.units import linear_to_db

N = 8


def _topology(**fields):
    return D2DTopologyConfig(target=0, **fields)


def test_the_deadline_drops_exactly_the_models_whose_compute_plus_airtime_exceed_it():
    # Arrange: bits large enough that airtime matters beside compute
    topo = _topology(
        cpu_frequency_distribution="lognormal",
        cpu_frequency_sigma=0.6,
        round_deadline_s=0.01,
        bandwidth_hz=2e5,
        side_m=400.0,
    )
    data_size = np.array([30, 120, 60, 250, 10, 90, 180, 40])
    bits = 32.0 * 650
    layout = make_layout(topo, N, seed=4)
    devices = D2DDevices(topo, N, seed=4, data_size=data_size, model_bits=bits)
    # the oracle, from the config alone
    f = cpu_frequencies(4, range(N), "lognormal", median=2.4e9, sigma=0.6)
    compute = data_size * 2e5 / f
    snr = 0.2 * layout.path_gain[:, 0] / layout.noise_power_w
    with np.errstate(divide="ignore"):  # the target's own row
        airtime = bits / (2e5 * np.log2(1.0 + snr))
    want = compute + airtime > 0.01
    want[0] = False  # the target sends nothing
    # Act
    late = devices.late(layout, 0)
    state = devices.link_state(0, layout, 0)
    senders = list(range(1, N))
    selection = Selection(0, tuple(senders), (0,) * len(senders), np.zeros(N))
    got = deliveries(topo, layout, selection, senders, round=0, seed=4, state=state)
    # Assert
    np.testing.assert_array_equal(late, want)
    assert 0 < want.sum() < N - 1, "the test needs some late and some on time"
    assert (airtime[1:] > 1e-3).any(), "airtime should matter here"
    assert got == {s: not want[s] for s in senders}
    assert {state.reason(s) for s in senders if want[s]} == {"straggler"}


def test_availability_is_the_star_chain_of_each_node_and_its_long_run_share():
    # Arrange
    topo = _topology(availability="markov", mean_on_rounds=6, mean_off_rounds=3)
    devices = D2DDevices(topo, N, seed=11)
    chain = OnOffAvailability(11, range(N), mean_on=6, mean_off=3)
    # Act
    rounds = 3000
    up = np.array([devices.available(t) for t in range(rounds)])
    # Assert: the same keyed series as the star's, any order of rounds
    for t in range(5):
        np.testing.assert_array_equal(up[t], chain.available(t))
    np.testing.assert_array_equal(devices.available(2), up[2])  # replayed
    share = up.mean()
    sigma = np.sqrt(share * (1 - share) / (N * rounds / 9))  # ~ one cycle per 9 rounds
    assert abs(share - 6 / 9) < 4 * sigma
    state = devices.link_state(7, make_layout(topo, N, seed=11), 0)
    assert state.up[0]  # the target is always on
    assert {state.reason(s) for s in range(1, N) if not up[7][s]} <= {"unavailable"}


def test_correlated_bernoulli_links_keep_the_marginal_and_lose_in_bursts():
    # Arrange: P^err 0.3 on every link, ρ = 0.86
    rho, p_err, rounds = 0.86, 0.3, 4000
    topo = _topology(
        link_model="bernoulli", fading_dynamics="gauss_markov", fading_correlation=rho
    )
    layout = make_layout(topo, N, seed=2)
    devices = D2DDevices(topo, N, seed=2)
    senders = list(range(1, N))
    selection = Selection(0, tuple(senders), (1,) * len(senders), np.full(N, p_err))
    # Act
    ok = np.array(
        [
            list(
                deliveries(
                    topo,
                    layout,
                    selection,
                    senders,
                    round=t,
                    seed=2,
                    state=devices.link_state(t, layout, 0),
                ).values()
            )
            for t in range(rounds)
        ],
        dtype=float,
    )
    # Assert: marginal 1 − P^err
    assert abs(ok.mean() - (1 - p_err)) < 0.02  # ~5σ with the rounds' memory
    # lag-1 P(success, success) against a bivariate Rayleigh simulation
    both = (ok[1:] * ok[:-1]).mean()
    rng = np.random.default_rng(0)
    h0 = (rng.standard_normal(10**6) + 1j * rng.standard_normal(10**6)) / np.sqrt(2)
    w = (rng.standard_normal(10**6) + 1j * rng.standard_normal(10**6)) / np.sqrt(2)
    h1 = rho * h0 + np.sqrt(1 - rho**2) * w
    quantile = np.log(1 / (1 - p_err))  # success iff |h|² ≥ −ln(1 − P^err)
    want = np.mean((np.abs(h0) ** 2 >= quantile) & (np.abs(h1) ** 2 >= quantile))
    assert abs(both - want) < 0.03
    fail_after_fail = (1 - 2 * (1 - p_err) + both) / p_err
    assert fail_after_fail > 1.8 * p_err  # bursts: a lost link tends to stay lost
    # i.i.d. fading: no memory
    iid = _topology(link_model="bernoulli")
    draws = np.array(
        [
            list(deliveries(iid, layout, selection, senders, round=t, seed=2).values())
            for t in range(rounds)
        ],
        dtype=float,
    )
    assert abs((draws[1:] * draws[:-1]).mean() - (1 - p_err) ** 2) < 0.03


def test_mc_sinr_with_given_fading_applies_the_sinr_rule_to_it():
    # Arrange
    topo = _topology(link_model="mc_sinr")
    layout = make_layout(topo, N, seed=5)
    fading = np.random.default_rng(1).exponential(2.0, size=(N, 14))
    # Act
    ok, sinr = d2d_round_delivery(
        layout.path_gain,
        0,
        tx_power_w=0.2,
        noise_power_w=layout.noise_power_w,
        sinr_threshold=5.0,
        fading_threshold=2.0,
        rayleigh_factor=2.0,
        num_subchannels=14,
        rng=np.random.default_rng(99),
        fading=fading,
    )
    # Assert: best sub-channel, β² threshold, co-channel interference
    best = fading.argmax(axis=1)
    on = fading[np.arange(N), best] >= 4.0
    on[0] = False
    rx = 0.2 * layout.path_gain[:, 0] * fading[np.arange(N), best] * on
    want = np.zeros(N)
    for s in np.flatnonzero(on):
        other = rx[(best == best[s]) & (np.arange(N) != s)].sum()
        want[s] = rx[s] / (layout.noise_power_w + other)
    np.testing.assert_allclose(sinr, want, rtol=1e-12)
    np.testing.assert_array_equal(ok, on & (want >= 5.0))


def test_the_observation_shows_devices_and_last_rounds_fading():
    # Arrange
    topo = _topology(
        availability="markov",
        mean_on_rounds=2,
        mean_off_rounds=2,
        round_deadline_s=0.01,
        fading_dynamics="gauss_markov",
        fading_correlation=0.9,
    )
    data_size = np.arange(10, 10 + N)
    layout = make_layout(topo, N, seed=6)
    motion = D2DMotion(topo, layout, seed=6, data_size=data_size, model_bits=1e4)
    first, _ = selection_observation(layout, 0, topo, seed=6)
    space, _ = selection_spaces(N, topo.num_subchannels, device_keys(topo))
    away = 0
    for t in range(6):
        # Act
        obs = round_observation(
            layout,
            first,
            ObservationTracker(N),
            None,
            topo,
            data_size=data_size,
            seed=6,
            round=t,
            motion=motion,
        )
        # Assert
        assert space.contains(obs), t
        up = motion.devices.available(t)
        np.testing.assert_array_equal(obs["eligible"][1:], up[1:].astype(np.float32))
        assert obs["eligible"][0] == 0 and obs["available"][0] == 1
        away += int((~up[1:]).sum())
        np.testing.assert_allclose(
            obs["compute_time_s"], data_size * 2e5 / 2.4e9, rtol=1e-6
        )
        if t > 0:
            g = 2.0 * motion.devices.fading(t - 1, 0)
            want = linear_to_db(0.2 * layout.path_gain[:, 0, None] * g)[1:]
            np.testing.assert_allclose(obs["channel_gain"][1:], want, rtol=1e-5)
    assert away > 0, "the test needs a node away"
    assert device_keys(_topology()) == ()
    assert device_keys(topo) == ("available", "compute_time_s")


def test_the_papers_devices_change_nothing():
    topo = _topology(link_model="bernoulli")
    layout = make_layout(topo, N, seed=1)
    assert D2DMotion(topo, layout, seed=1).link_state(3, 0) is None
    assert LinkState().reason(1) is None


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ("topology.fading_dynamics=gauss_markov", "topology.fading_correlation"),
        ("topology.fading_correlation=0.5", "topology.fading_correlation"),
        ("topology.availability=markov", "topology.mean_on_rounds"),
        ("topology.mean_off_rounds=3", "topology.mean_off_rounds"),
        ("topology.availability_period_rounds=4", "topology.availability_period"),
        ("topology.cpu_frequency_distribution=uniform", "topology.cpu_frequency_low"),
        ("topology.cpu_frequency_sigma=0.5", "topology.cpu_frequency_sigma"),
        ("topology.round_deadline_s=0", "round_deadline_s"),
    ],
)
def test_device_fields_are_config_errors_naming_the_topology_field(override, match):
    with pytest.raises(ConfigError, match=match):
        load_config("examples/pfedwn_d2d.yaml", [override, "data.num_clients=6"])


def test_a_missing_availability_trace_names_the_field():
    topo = _topology(availability="trace", availability_trace="no/such.csv")
    with pytest.raises(ValueError, match="topology.availability_trace: no file"):
        D2DDevices(topo, N, seed=0)
