"""Min-max fair scheduler (seed_000 Algorithm 2): KM, P5/P7 and the env contract."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from gymnasium import spaces
from scipy.optimize import minimize_scalar

from policies import make_policy
from policies.minmax import (
    MinMaxPolicy,
    element_error_probability,
    min_error_assignment,
)
from policies.minmax_bound import PLBound, feasible_intervals, pl_weight
from tests.policies.helpers import make_spaces, observation, sample_observation


def brute_force(rho, feasible, eligible):
    """(max cardinality, min Σρ at that cardinality) over all partial matchings."""
    num_clients, num_subchannels = rho.shape
    best = (0, 0.0)
    options = [None, *np.flatnonzero(eligible).tolist()]
    for choice in itertools.product(options, repeat=num_subchannels):
        used = [c for c in choice if c is not None]
        if len(set(used)) != len(used):
            continue
        pairs = [(c, k) for k, c in enumerate(choice) if c is not None]
        if not all(feasible[c, k] for c, k in pairs):
            continue
        value = (len(pairs), -sum(rho[c, k] for c, k in pairs))
        if value > (best[0], -best[1]):
            best = (len(pairs), -value[1])
    return best


def controls_spaces(num_clients, num_subchannels, names=("lr", "personal_lr", "lam")):
    observation_space, assignment = make_spaces(num_clients, num_subchannels)
    high = {"lr": 1.0, "personal_lr": 1.0, "lam": 2.0}
    controls = spaces.Box(
        np.zeros((num_clients, len(names)), np.float32),
        np.tile(np.array([high[n] for n in names], np.float32), (num_clients, 1)),
        dtype=np.float32,
    )
    return observation_space, spaces.Dict(
        {"assignment": assignment, "controls": controls}
    )


# ------------------------------------------------------------------ eq. 13-14
def test_error_probability_matches_the_wireless_package():
    # Oracle: rayfl.wireless.modulation, an independent implementation of eq. 13-14
    from rayfl.wireless.modulation import (
        element_error_probability as reference_rho,
    )
    from rayfl.wireless.modulation import qam_bit_error_rate

    snr = np.logspace(-2, 6, 200)
    for order in (4, 16, 256):
        expected = reference_rho(
            qam_bit_error_rate(snr, qam_order=order), bits_per_element=16
        )
        actual = element_error_probability(snr, qam_order=order, bits_per_element=16)
        np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-300)


# ------------------------------------------------------------------ P3 / KM
@pytest.mark.parametrize("case", range(60))
def test_assignment_is_optimal_against_brute_force(case):
    # Arrange: N <= 5 clients, K <= 4 subchannels, ρ spread over 12 decades
    rng = np.random.default_rng(case)
    num_clients, num_subchannels = rng.integers(1, 6), rng.integers(1, 5)
    rho = 10.0 ** rng.uniform(-12, 0, (num_clients, num_subchannels))
    feasible = rng.random((num_clients, num_subchannels)) < rng.uniform(0.2, 1.0)
    eligible = rng.random(num_clients) < 0.8
    # Act
    assignment = min_error_assignment(
        rho, feasible, np.flatnonzero(eligible), idle=num_clients
    )
    # Assert
    used = np.flatnonzero(assignment < num_clients)
    clients = assignment[used]
    assert np.unique(clients).size == clients.size
    assert eligible[clients].all() and feasible[clients, used].all()
    size, cost = brute_force(rho, feasible, eligible)
    assert used.size == size
    np.testing.assert_allclose(rho[clients, used].sum(), cost, rtol=1e-12, atol=1e-15)


def test_policy_never_schedules_ineligible_or_rate_violators():
    # Arrange: C5 of CNN-CIFAR10, r_min = 878,538·16/0.6 s = 23.4 Mbit/s over 1 MHz
    rng = np.random.default_rng(5)
    observation_space, action_space = make_spaces(20, 10)
    policy = make_policy(
        "minmax",
        (observation_space, action_space),
        max_latency_s=0.6,
        num_params=878_538,
    )
    r_min = 878_538 * 16 / 0.6
    idle_seen = used_seen = 0
    for _ in range(50):
        distance = rng.uniform(10, 100, 20)
        gain_db = (
            -30
            - 28 * np.log10(distance)[:, None]
            + 10 * np.log10(rng.exponential(1.0, (20, 10)))
        )
        eligible = (rng.random(20) < 0.7).astype(np.float32)
        obs = observation(gain_db, eligible)
        # Act
        assignment = np.asarray(policy(obs))
        # Assert: rate by hand, B·log2(1 + P·h/(N0·B)) with P = 23 dBm
        snr = 10 ** ((gain_db + 23 + 169 - 60) / 10)
        rate = 1e6 * np.log2(1 + snr)
        used = np.flatnonzero(assignment < 20)
        clients = assignment[used]
        assert eligible[clients].all()
        assert (rate[clients, used] >= r_min).all()
        size, _ = brute_force_size(rate >= r_min, eligible > 0)
        assert used.size == size
        idle_seen += 10 - used.size
        used_seen += used.size
    assert idle_seen > 0 and used_seen > 0  # C5 binds, but not always


def brute_force_size(feasible, eligible):
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    graph = csr_matrix(feasible & eligible[:, None])
    return int((maximum_bipartite_matching(graph, perm_type="column") >= 0).sum()), None


# ------------------------------------------------------------------ P5 / P7
def test_pl_weight_hits_its_interval_ends():
    mu, eps = 0.27, 1 - 0.27**2 / 4 + 0.01
    (low, high), (third, _) = feasible_intervals(mu=mu, pl_contraction=eps)
    np.testing.assert_allclose(pl_weight(low, mu=mu, pl_contraction=eps), 2.0)
    np.testing.assert_allclose(
        pl_weight([high, third], mu=mu, pl_contraction=eps), 0.0, atol=1e-12
    )


@pytest.mark.parametrize(
    ("mu", "smoothness", "expected"),
    [
        (0.27, 1.32, 0.070),
        (0.13, 0.43, 0.033),
        (0.05, 0.29, 0.0126),
        (0.09, 0.33, 0.023),
    ],
    ids=["DNN", "MLR", "CNN-FMNIST", "CNN-CIFAR10"],
)
def test_pl_solution_matches_spec_illustrative_values(mu, smoothness, expected):
    # Oracle: spec §3.3 [VERIFIED] η_P* ≈ λ* with ε_P = 1 − μ²/4, G0 = M = 1
    bound = PLBound(mu=mu, smoothness=smoothness, pl_contraction=1 - mu**2 / 4)
    eta, lam, _ = bound.solve_pl(bound.bracket(0.0, [0.0]))
    np.testing.assert_allclose(eta, expected, rtol=0.05)
    np.testing.assert_allclose(lam, expected, rtol=0.05)


@pytest.mark.parametrize(
    "setting",
    [
        {"mu": 0.05, "smoothness": 0.29},  # CNN-FMNIST defaults, Ω1 non-empty
        {
            "mu": 0.27,
            "smoothness": 1.32,
            "clip_norm": 7.0,
            "num_params": 79_510,
            "noise_std": 0.016,
        },
        {
            "mu": 1.5,
            "smoothness": 1.6,
            "pl_contraction": 0.6,
            "phi2": 1e-4,
            "varphi1": 1e-4,
        },  # ε_P > 2 − μ: Ω0 only
    ],
    ids=["cnn", "dnn", "omega0-only"],
)
def test_pl_search_meets_constraints_and_matches_grid(setting):
    # Arrange
    bound = PLBound(**setting)
    brackets = bound.bracket(bound.uplink_error_term(1e-5), [0.0, 1e-4, 1e-2])
    eps_p = bound.contraction
    # Act
    eta, lam, phi = bound.solve_pl(brackets)
    # Assert: C1 (equal contraction), C8, C9 and the P5 closed form
    np.testing.assert_allclose(bound.pl_contraction_of(eta, lam), eps_p, atol=1e-12)
    assert ((lam > 0) & (lam < 2) & (eta > 0) & (eta < 1)).all()
    eta_f = bound.fl_lr()
    fine = np.linspace(1e-4, 0.999, 200_001)
    assert bound.fl_contraction(eta_f) <= bound.fl_contraction(fine).min() + 1e-15
    assert 0 < bound.fl_contraction() < 1
    # Oracle: a fine grid of the same objective over the feasible η (λ ∈ (0, 2))
    grid = np.concatenate(
        [
            np.linspace(a, b, 400_001)[1:-1]
            for a, b in feasible_intervals(mu=bound.mu, pl_contraction=eps_p)
        ]
    )
    grid_lam = pl_weight(grid, mu=bound.mu, pl_contraction=eps_p)
    for i, bracket in enumerate(brackets):
        values = bound.objective(grid, grid_lam, bracket)
        assert phi[i] <= values.min() * (1 + 1e-9)
        np.testing.assert_allclose(eta[i], grid[values.argmin()], rtol=1e-3)
        # and scipy's bounded Brent on Ω0, the spec's recommended solver
        low, high = feasible_intervals(mu=bound.mu, pl_contraction=eps_p)[0]
        brent = minimize_scalar(
            lambda e, b=bracket: float(
                bound.objective(e, pl_weight(e, mu=bound.mu, pl_contraction=eps_p), b)
            ),
            bounds=(low + 1e-12, high - 1e-12),
            method="bounded",
            options={"xatol": 1e-12},
        )
        assert phi[i] <= brent.fun * (1 + 1e-9)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"mu": 2.5}, "mu must be in"),
        ({"pl_contraction": 0.5}, "pl_contraction must be in"),
        ({"phi2": 0.1}, "C11"),
        ({"max_latency_s": 0.0}, "max_latency_s"),
        ({"qam_order": 8}, "power of 4"),
    ],
)
def test_bad_parameters_raise(params, match):
    with pytest.raises(ValueError, match=match):
        MinMaxPolicy(*make_spaces(4, 2), **params)


def test_unknown_parameter_raises():
    with pytest.raises(TypeError, match="unknown parameters"):
        MinMaxPolicy(*make_spaces(4, 2), window=3)


# ------------------------------------------------------------------ controls
def test_controls_carry_the_solution_and_stay_in_the_box():
    # Arrange
    observation_space, action_space = controls_spaces(20, 10)
    policy = make_policy("minmax", (observation_space, action_space))
    obs = sample_observation(observation_space, np.random.default_rng(0))
    # Act
    action = policy(obs)
    # Assert
    assert action_space.contains(action)
    solution = policy.last_solution
    np.testing.assert_allclose(
        action["controls"][:, 0], policy.bound.fl_lr(), rtol=1e-6
    )
    np.testing.assert_allclose(
        action["controls"][:, 1], solution["personal_lr"], rtol=1e-6
    )
    np.testing.assert_allclose(action["controls"][:, 2], solution["lam"], rtol=1e-6)
    assert solution["max_phi"] == pytest.approx(solution["phi"].max())


def test_non_adjustment_schedules_the_same_but_sends_no_controls():
    observation_space, action_space = controls_spaces(12, 4)
    rng = np.random.default_rng(1)
    proposed = make_policy("minmax", (observation_space, action_space))
    baseline = make_policy("non_adjustment", (observation_space, action_space))
    for _ in range(20):
        obs = sample_observation(observation_space, rng)
        first, second = proposed(obs), baseline(obs)
        np.testing.assert_array_equal(first["assignment"], second["assignment"])
        assert "controls" in first and "controls" not in second


def test_error_free_bound_ignores_channel_errors():
    observation_space, action_space = controls_spaces(6, 3)
    obs = sample_observation(observation_space, np.random.default_rng(2))
    obs["channel_gain"][:] = -125.0  # far clients: ρ near 1e-1
    noisy = make_policy("minmax", (observation_space, action_space))
    clean = make_policy(
        "minmax", (observation_space, action_space), assume_error_free=True
    )
    noisy(obs)
    clean(obs)
    assert clean.last_solution["theta"] == 0.0 < noisy.last_solution["theta"]
    assert (clean.last_solution["phi"] < noisy.last_solution["phi"]).all()


def test_controls_columns_must_match_names():
    with pytest.raises(ValueError, match="control_names"):
        MinMaxPolicy(*controls_spaces(4, 2, names=("lr",)))
    policy = MinMaxPolicy(*controls_spaces(4, 2, names=("lr",)), control_names=["lr"])
    obs = sample_observation(policy.observation_space, np.random.default_rng(0))
    np.testing.assert_allclose(
        policy(obs)["controls"][:, 0], policy.bound.fl_lr(), rtol=1e-6
    )


# ------------------------------------------------------------------ env rollout
@pytest.mark.parametrize("name", ["minmax", "non_adjustment"])
def test_rollout_in_the_surrogate_env(name):
    # Arrange: Ditto declares lr, personal_lr, lam; T0 = 2 uploads per client
    from envs.star.scheduling import WirelessFLEnv

    env = WirelessFLEnv(
        mode="surrogate",
        controls=True,
        overrides=["algorithm.kind=ditto", "privacy.max_uploads=2"],
    )
    policy = make_policy(name, env, num_params=1000)
    obs, _ = env.reset(seed=0)
    policy.reset(seed=0)
    sent = []
    run = env.backend.run
    env.backend.run = lambda t, schedule: sent.append(schedule) or run(t, schedule)
    terminated, steps = False, 0
    # Act
    while not terminated and steps < 20:
        action = policy(obs)
        if name == "minmax":
            assert env.action_space.contains(action)
        else:  # no controls key: the env uses the algorithm's configured values
            assert set(action) == {"assignment"}
            assert env.action_space["assignment"].contains(action["assignment"])
        obs, _, terminated, _, info = env.step(action)
        assert info["ignored"] == []
        steps += 1
    # Assert: every client used its T0 = 2 uploads; controls reached the schedule
    assert terminated and env.backend.uplink.upload_count().tolist() == [2] * 10
    if name == "minmax":
        np.testing.assert_allclose(
            sent[0].controls["lr"], policy.bound.fl_lr(), rtol=1e-6
        )
        assert set(sent[0].controls) == {"lr", "personal_lr", "lam"}
    else:
        np.testing.assert_allclose(sent[0].controls["lam"], env.config.algorithm.lam)


def test_link_constants_come_from_the_run_unless_given():
    """minmax / non_adjustment read the run's link (the hierarchy's topology.cost,
    the star's wireless section); Table I only fills what neither gives."""
    from gymnasium import spaces as sp

    from policies.minmax import TABLE_I_LINK, MinMaxPolicy, NonAdjustmentPolicy
    from rayfl.hierarchy.config import CostConfig
    from rayfl.observation import LinkConstants, SystemContext

    obs = sp.Dict(
        {
            "channel_gain": sp.Box(-np.inf, np.inf, (3, 2)),
            "eligible": sp.Box(0, 1, (3,)),
        }
    )
    act = sp.MultiDiscrete([4, 4])
    cost = CostConfig()
    link = LinkConstants(
        bandwidth_hz=cost.bandwidth_hz,
        noise_psd_dbm_hz=cost.noise_psd_dbm_hz,
        tx_power_dbm=cost.tx_power_dbm,
    )
    context = SystemContext(
        topology="hierarchical", seed=0, rounds=5, model_dim=10, link=link
    )
    edge = NonAdjustmentPolicy(obs, act, context=context)
    assert (edge.tx_power_dbm, edge.noise_psd_dbm_hz, edge.bandwidth_hz) == (
        cost.tx_power_dbm,
        cost.noise_psd_dbm_hz,
        cost.bandwidth_hz,
    )
    assert (cost.tx_power_dbm, cost.noise_psd_dbm_hz) != (
        TABLE_I_LINK["tx_power_dbm"],
        TABLE_I_LINK["noise_psd_dbm_hz"],
    )  # the hierarchy's link really differs from Table I
    assert edge.bs_tx_power_dbm == TABLE_I_LINK["bs_tx_power_dbm"]  # not in cost
    given = NonAdjustmentPolicy(obs, act, context=context, tx_power_dbm=10.0)
    assert given.tx_power_dbm == 10.0
    bare = MinMaxPolicy(obs, act)
    assert bare.noise_psd_dbm_hz == TABLE_I_LINK["noise_psd_dbm_hz"]
    # the decision follows the constants: a lower SNR changes the ρ it ranks by
    gain = {
        "channel_gain": np.array(
            [[-110.0, -104.0], [-100.0, -115.0], [-112.0, -109.0]]
        ),
        "eligible": np.ones(3),
    }
    assert bare.snr_linear(gain["channel_gain"], bare.tx_power_dbm)[
        0, 0
    ] != pytest.approx(edge.snr_linear(gain["channel_gain"], edge.tx_power_dbm)[0, 0])


def test_bound_constants_come_from_the_run_unless_given():
    """abs(ω), C and σ_DP of the bound are the run's (context); Table I's otherwise."""
    from gymnasium import spaces as sp

    from policies.minmax import MinMaxPolicy
    from rayfl.observation import PrivacyConstants, SystemContext

    obs = sp.Dict(
        {
            "channel_gain": sp.Box(-np.inf, np.inf, (3, 2)),
            "eligible": sp.Box(0, 1, (3,)),
        }
    )
    act = sp.MultiDiscrete([4, 4])
    privacy = PrivacyConstants(clip_norm=5.0, noise_std=0.2)
    context = SystemContext(
        topology="star", seed=0, rounds=5, model_dim=1210, privacy=privacy
    )
    run = MinMaxPolicy(obs, act, context=context)
    assert (run.bound.num_params, run.bound.clip_norm, run.bound.noise_std) == (
        1210,
        5.0,
        0.2,
    )
    given = MinMaxPolicy(obs, act, context=context, noise_std=0.009, mu=0.1)
    assert (given.bound.noise_std, given.bound.mu, given.bound.clip_norm) == (
        0.009,
        0.1,
        5.0,
    )
    bare = MinMaxPolicy(obs, act)
    assert (bare.bound.num_params, bare.bound.clip_norm, bare.bound.noise_std) == (
        582_026,
        20.0,
        0.009,
    )
    silent = SystemContext(topology="star", seed=0, rounds=5, model_dim=10)
    plain = MinMaxPolicy(obs, act, context=silent)  # the run states no DP constants
    assert (plain.bound.num_params, plain.bound.noise_std) == (10, 0.009)
