"""deadline_max_weight: the predictor, the deadline test, max-weight, the moving example."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from policies.deadline_max_weight import (
    DeadlineMaxWeightPolicy,
    predict_gain,
    shrinkage,
)
from rayfl.observation import (
    CORE_KEYS,
    LinkConstants,
    SystemContext,
    observation_space,
)
from rayfl.wireless.compute import deadline_misses
from rayfl.wireless.config import WirelessConfig
from rayfl.wireless.cost import uplink_airtime_s
from rayfl.wireless.dynamics import GaussMarkovFading
from rayfl.wireless.world import MovingWorld
from tests.policies.helpers import make_spaces, observation

MOVING = CORE_KEYS + ("available", "channel_age", "compute_time_s")
EXAMPLE = "examples/mobile_star.yaml"


def _spaces(n, k, keys=MOVING):
    import gymnasium

    return observation_space(keys, n, k), gymnasium.spaces.MultiDiscrete([n + 1] * k)


def _context(**link):
    """A run context with the wireless defaults' link and the engine's airtime model."""
    constants = LinkConstants(1e6, -169.0, 23.0, airtime_model=uplink_airtime_s, **link)
    return SystemContext("star", seed=0, rounds=1, model_dim=1, link=constants)


def _airtime(gain_db, bits=1e6, bandwidth=1e6, tx_dbm=23.0, n0_dbm_hz=-169.0):
    """Z / (B·log2(1 + P·g/(N0·B))) by hand, in s."""
    snr_db = gain_db + tx_dbm - n0_dbm_hz - 10 * math.log10(bandwidth)
    return bits / (bandwidth * math.log2(1 + 10 ** (snr_db / 10)))


# ------------------------------------------------------------------ predictor
def test_shrinkage_is_the_closed_form_and_age_0_gives_the_seen_gain():
    rho, seen, mean = 0.8, np.array([[5.0, 0.2]]), np.array([1.5])
    for age in (0, 1, 3):
        c = rho ** (2 * age)  # Rayleigh: E[g | g_seen, a] = ρ^{2a}·g + (1 − ρ^{2a})·ḡ
        expected = c * seen + (1 - c) * mean[:, None]
        np.testing.assert_allclose(
            predict_gain(seen, [age], mean, rho=rho), expected, rtol=1e-12
        )
    np.testing.assert_array_equal(predict_gain(seen, [0], mean, rho=0.0), seen)
    # Rician K = 3: (2Kρ^a + ρ^{2a})/(2K + 1); i.i.d. fading forgets at once
    np.testing.assert_allclose(shrinkage(2, rho, 3.0), (6 * 0.64 + 0.4096) / 7)
    np.testing.assert_allclose(predict_gain(seen, [1], mean, rho=0.0), [[1.5, 1.5]])


def _orthogonal(gain_a, gain_0, coefficient):
    """Mean residual and its covariance with g_0 (unit-mean fading), with SEs."""
    error = gain_a - (coefficient * gain_0 + 1 - coefficient)
    moment = (error * (gain_0 - 1)).ravel()
    se = moment.std() / math.sqrt(moment.size)
    return abs(error.mean()), abs(moment.mean()), se


def test_the_predictor_matches_simulated_gauss_markov_rayleigh_fading():
    # Oracle: rayfl.wireless.dynamics' AR(1) draws, 4000 clients × 8 subchannels
    rho = 0.86
    fading = GaussMarkovFading(7, range(4000), 8, rho=rho)
    gains = [fading.power_gains(t) for t in range(5)]
    for age in (1, 2, 4):
        c = float(shrinkage(age, rho))
        bias, moment, se = _orthogonal(gains[age], gains[0], c)
        # the conditional mean: no bias, residual uncorrelated with the seen gain
        assert bias < 0.03 and moment < 4 * se, (age, bias, moment, se)
        # and within the top decile of seen gains (not only a linear fit)
        top = gains[0] > np.quantile(gains[0], 0.9)
        predicted = c * gains[0][top] + 1 - c
        assert abs(gains[age][top].mean() - predicted.mean()) < 0.1
        # the test has power: the weight ρ^a (not ρ^{2a}) fails it
        assert _orthogonal(gains[age], gains[0], rho**age)[1] > 8 * se


def test_the_predictor_matches_the_worlds_rician_fading_with_a_fixed_line_of_sight():
    # Oracle: rayfl.wireless.world's Rician AR(1) (line of sight fixed), K = 3
    rho, k = 0.86, 3.0
    wireless = WirelessConfig(
        num_subchannels=8,
        fading="rician",
        rician_k_db=10 * math.log10(k),
        fading_dynamics="gauss_markov",
        fading_correlation=rho,
    )
    world = MovingWorld(wireless, 5, 2000)
    gains = [world.fading(t)[0] for t in range(5)]
    for age in (1, 4):
        bias, moment, se = _orthogonal(
            gains[age], gains[0], float(shrinkage(age, rho, k))
        )
        assert bias < 0.02 and moment < 4 * se, (age, bias, moment, se)
        # Rayleigh's weight ρ^{2a} is not the best linear predictor here
        assert _orthogonal(gains[age], gains[0], rho ** (2 * age))[1] > 8 * se


def test_the_policy_shrinks_a_stale_row_toward_the_running_mean_of_fresh_rows():
    policy = DeadlineMaxWeightPolicy(*_spaces(2, 2), rho=0.5)
    fresh = observation(
        10 * np.log10([[2.0, 4.0], [1.0, 1.0]]), channel_age=np.zeros(2)
    )
    np.testing.assert_allclose(policy.predicted_gain(fresh), [[2.0, 4.0], [1, 1]])
    again = observation(
        10 * np.log10([[8.0, 8.0], [1.0, 1.0]]), channel_age=np.array([2.0, 0.0])
    )
    # client 0's mean stays 3 (its fresh row); age 2 weighs the seen gain 0.5^4
    expected = 0.0625 * 8.0 + 0.9375 * 3.0
    np.testing.assert_allclose(policy.predicted_gain(again)[0], [expected] * 2)
    policy.reset(seed=0)  # forgets the mean: the row itself is the estimate
    np.testing.assert_allclose(policy.predicted_gain(again)[0], [8.0, 8.0])


# ---------------------------------------------------------- deadline and max-weight
def test_the_deadline_test_is_compute_plus_the_shannon_airtime():
    airtime = _airtime(-80.0)
    for slack, meets in ((1e-9, True), (-1e-9, False)):
        policy = DeadlineMaxWeightPolicy(
            *_spaces(1, 1),
            round_deadline_s=0.5 + airtime + slack,
            payload_bits=1e6,
            context=_context(),
        )
        obs = observation(np.array([[-80.0]]), compute_time_s=np.array([0.5]))
        assert bool(policy.feasible(obs, policy.predicted_gain(obs))[0, 0]) is meets


def test_a_client_predicted_to_miss_the_deadline_is_not_scheduled():
    # Arrange: client 0 stalest but computes past D; client 1's channel too weak
    gain_db = np.array([[-60.0, -60.0], [-150.0, -150.0], [-60.0, -61.0]])
    policy = DeadlineMaxWeightPolicy(
        *_spaces(3, 2), round_deadline_s=0.1, payload_bits=1e5, context=_context()
    )
    obs = observation(
        gain_db,
        staleness=np.array([9.0, 8.0, 1.0]),
        compute_time_s=np.array([0.2, 0.0, 0.0]),
    )
    # Act
    assignment = policy(obs).tolist()
    # Assert: only client 2 goes, on its better subchannel; the other idles
    assert assignment == [2, 3]
    assert policy.allows_idle


def test_a_stale_row_is_judged_at_its_predicted_not_its_seen_gain():
    # a strong gain seen 10 rounds ago under i.i.d. fading predicts the mean
    seen_db = np.array([[-60.0], [-150.0], [-150.0]])
    obs = observation(
        seen_db,
        staleness=np.array([5.0, 1.0, 0.0]),
        channel_age=np.array([10.0, 0.0, 0.0]),
        compute_time_s=np.zeros(3),
    )
    frozen = DeadlineMaxWeightPolicy(
        *_spaces(3, 1),
        round_deadline_s=0.1,
        payload_bits=1e5,
        context=_context(),
        rho=1.0,
    )
    forgetful = DeadlineMaxWeightPolicy(
        *_spaces(3, 1),
        round_deadline_s=0.1,
        payload_bits=1e5,
        context=_context(),
        rho=0.0,
    )
    assert frozen(obs).tolist() == [0]
    # ρ = 0: ḡ_0 is its row (-60 dB) too, so both predict the same here ...
    assert forgetful(obs).tolist() == [0]
    # ... until a fresh weak row has set the running mean
    weak = observation(np.full((3, 1), -150.0), channel_age=np.zeros(3))
    forgetful.predicted_gain(weak)
    assert forgetful(obs).tolist() == [3]  # nobody meets D: the subchannel idles
    assert frozen(obs).tolist() == [0]


def test_the_stalest_feasible_client_gets_the_subchannel_it_can_use():
    # client 0 (stalest) meets D only on subchannel 1; client 1 anywhere
    gain_db = np.array([[-150.0, -60.0], [-60.0, -50.0], [-60.0, -50.0]])
    policy = DeadlineMaxWeightPolicy(
        *_spaces(3, 2), round_deadline_s=0.1, payload_bits=1e5, context=_context()
    )
    obs = observation(
        gain_db, staleness=np.array([7.0, 3.0, 2.0]), compute_time_s=np.zeros(3)
    )
    assert policy(obs).tolist() == [1, 0]
    # ineligible clients are never scheduled, however stale
    obs["eligible"] = np.array([0.0, 1.0, 1.0], np.float32)
    assert sorted(policy(obs).tolist()) == [1, 2]


def _brute_force(weight, gain_db, eligible, k):
    """Lexicographic max (Σ (s+1), Σ gain dB) over full injective maps."""
    best = None
    for clients in itertools.permutations(np.flatnonzero(eligible), k):
        value = (
            sum(weight[c] for c in clients),
            sum(gain_db[c, j] for j, c in enumerate(clients)),
        )
        best = value if best is None else max(best, value)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_a_static_world_is_max_weight_on_staleness_with_best_channel_matching(seed):
    # Arrange: the core keys only (no age, no compute time), no deadline
    rng = np.random.default_rng(seed)
    n, k = 6, 3
    policy = DeadlineMaxWeightPolicy(*make_spaces(n, k))
    gain_db = rng.normal(-80, 10, (n, k))
    staleness = rng.integers(0, 4, n).astype(float)
    eligible = np.ones(n)
    eligible[rng.integers(n)] = 0
    obs = observation(gain_db, eligible, staleness=staleness)
    # Act
    assignment = policy(obs)
    # Assert: every subchannel used, and the lexicographic optimum reached
    assert not policy.allows_idle and (assignment < n).all()
    value = (
        sum(staleness[c] + 1 for c in assignment),
        sum(float(obs["channel_gain"][c, j]) for j, c in enumerate(assignment)),
    )
    best = _brute_force(staleness + 1, obs["channel_gain"], eligible, k)
    assert value[0] == best[0] and value[1] == pytest.approx(best[1], abs=1e-3)


# ------------------------------------------------------------------- context
def test_the_runs_constants_fill_what_the_user_leaves_unset():
    link = LinkConstants(
        bandwidth_hz=2e6,
        noise_psd_dbm_hz=-170.0,
        tx_power_dbm=20.0,
        round_deadline_s=0.02,
        fading_rho=0.9,
        rician_k=2.0,
        upload_bits=5e4,
        airtime_model=uplink_airtime_s,
    )
    context = SystemContext(topology="star", seed=0, rounds=3, model_dim=100, link=link)
    policy = DeadlineMaxWeightPolicy(*_spaces(2, 1), context=context)
    assert (policy.round_deadline_s, policy.rho, policy.rician_k) == (0.02, 0.9, 2.0)
    assert policy.payload_bits == 5e4
    assert policy.link_constants == {
        "bandwidth_hz": 2e6,
        "noise_psd_dbm_hz": -170.0,
        "tx_power_dbm": 20.0,
    }
    given = DeadlineMaxWeightPolicy(
        *_spaces(2, 1), context=context, rho=0.1, round_deadline_s=1.0
    )
    assert (given.rho, given.round_deadline_s) == (0.1, 1.0)
    # without upload_bits the dense model: 32·abs(w)
    bare = context.replace(link=LinkConstants(1e6, -169.0, 23.0))
    assert DeadlineMaxWeightPolicy(*_spaces(2, 1), context=bare).payload_bits == 3200


def test_a_deadline_the_policy_cannot_test_is_refused():
    # no context: no airtime model (policies reach the engine through it)
    with pytest.raises(ValueError, match="airtime model"):
        DeadlineMaxWeightPolicy(*_spaces(2, 1), round_deadline_s=1.0, payload_bits=1.0)
    with pytest.raises(ValueError, match="rho"):
        DeadlineMaxWeightPolicy(*_spaces(2, 1), rho=1.5)


def test_the_airtime_and_the_deadline_are_the_engines():
    """The context's airtime model gives uplink_round's transmission time."""
    from rayfl.seeding import rng_for
    from rayfl.wireless.channel import WirelessChannel
    from rayfl.wireless.effects import uplink_round

    wireless = WirelessConfig(num_subchannels=3, round_deadline_s=0.05)
    state = WirelessChannel(wireless, 4, rng_for(0, "geometry")).realize(
        rng_for(0, "channel", round=0)
    )
    out = uplink_round(
        state,
        client=[0, 1, 2],
        subchannel=[2, 0, 1],
        tx_power_w=state.tx_power_w,
        payload_bits=1e5,
        num_samples=10,
        bits_per_element=32,
        config=wireless,
    )
    gain = state.gain_linear[[0, 1, 2], [2, 0, 1]]
    predicted = uplink_airtime_s(
        gain,
        payload_bits=1e5,
        bandwidth_hz=wireless.bandwidth_hz,
        noise_psd_dbm_hz=wireless.noise_psd_dbm_hz,
        tx_power_dbm=wireless.tx_power_dbm,
    )
    np.testing.assert_allclose(predicted, out.transmit_time_s, rtol=1e-12)
    # the policy's test on a fresh row is deadline_misses' complement
    policy = DeadlineMaxWeightPolicy(
        *_spaces(4, 3), round_deadline_s=0.05, payload_bits=1e5, context=_context()
    )
    compute = np.array([0.0, 0.01, 0.04, 0.049])
    obs = observation(
        np.asarray(state.gain_db), compute_time_s=compute, channel_age=np.zeros(4)
    )
    airtime = uplink_airtime_s(
        policy.predicted_gain(obs),
        payload_bits=1e5,
        bandwidth_hz=1e6,
        noise_psd_dbm_hz=-169.0,
        tx_power_dbm=23.0,
    )
    expected = ~deadline_misses(compute[:, None], airtime, 0.05)
    np.testing.assert_array_equal(
        policy.feasible(obs, policy.predicted_gain(obs)), expected
    )
    assert expected.any() and not expected.all()


def test_the_mobile_scenarios_context_states_the_world():
    from rayfl.config import load_config
    from rayfl.star.context import config_context

    link = config_context(load_config(EXAMPLE)).link
    assert link is not None
    assert (link.round_deadline_s, link.fading_rho, link.rician_k) == (0.012, 0.86, 0)
    assert link.upload_bits is None  # the model is not built yet
    assert link.airtime_model is uplink_airtime_s
    static = config_context(
        load_config(
            EXAMPLE,
            ["wireless.fading_dynamics=iid", "wireless.fading_correlation=null"],
        )
    ).link
    assert static is not None and static.fading_rho == 0.0


def test_in_the_moving_example_no_scheduled_upload_misses_the_deadline():
    """Surrogate env of examples/mobile_star.yaml, the star's context of its system.

    An eligible client is reachable, so its row is this round's gain (age 0):
    the prediction is exact and the deadline test the engine's, so no upload
    it schedules is a straggler, and it schedules no ineligible client.
    """
    from envs.star.scheduling import WirelessFLEnv
    from envs.star.vector import LaneSystem
    from rayfl.registry import build_policy
    from rayfl.star.context import star_context

    env = WirelessFLEnv(EXAMPLE, mode="surrogate", overrides={"rounds": 12})
    obs, _ = env.reset(seed=0)
    backend = env.unwrapped.backend
    system = LaneSystem(env.unwrapped.config, backend.dim, backend.uplink)
    context = star_context(system)
    assert context.link.upload_bits == backend.payload_bits
    policy = build_policy("deadline_max_weight", env, context=context, seed=0)
    scheduled = stragglers = 0
    done = False
    while not done:
        action = policy(obs)
        used = action[action < env.num_clients]
        assert (obs["eligible"][used] == 1).all()
        obs, _, terminated, truncated, info = env.step(action)
        assert info["ignored"] == []
        rows = env.unwrapped.last_outcome.rows
        scheduled += len(rows)
        stragglers += sum(bool(r.get("straggler")) for r in rows)
        done = terminated or truncated
    assert scheduled > 0 and stragglers == 0


def test_the_surrogate_benchmark_gives_the_policy_the_runs_upload_size():
    """`rayfl bench policies --mode surrogate` builds it with the surrogate's model.

    Before, the benchmark gave surrogate runs the config's context (model size
    1, no upload bits), so the policy tested the deadline with 32-bit uploads.
    """
    from envs.star.scheduling import WirelessFLEnv
    from rayfl.star.bench import bench_policy

    env = WirelessFLEnv(EXAMPLE, mode="surrogate", overrides={"rounds": 2})
    env.reset(seed=0)
    backend = env.unwrapped.backend
    # Act
    policy = bench_policy(
        env, env.unwrapped.config, "deadline_max_weight", {}, "surrogate"
    )
    # Assert
    assert backend.dim > 100
    assert policy.payload_bits == backend.payload_bits
