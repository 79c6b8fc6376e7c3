"""The star in a moving world (issue 48): deadline, availability, observation.

No Ray here: the uplink model and the scheduling env in surrogate mode (the
engine's own UplinkModel and star observation). The engine runs on Ray are in
tests/star/test_moving_world_runs.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from envs.star.scheduling import DEFAULT_CONFIG, WirelessFLEnv
from rayfl.config import load_config
from rayfl.observation import CORE_KEYS
from rayfl.schedule import Schedule
from rayfl.uplink import UplinkModel
from rayfl.wireless.compute import cpu_frequencies
from rayfl.wireless.dynamics import OnOffAvailability

MARKOV = [
    "wireless.availability=markov",
    "wireless.mean_on_rounds=3",
    "wireless.mean_off_rounds=2",
]
EVERY_MODEL = [
    *MARKOV,
    "wireless.fading_dynamics=gauss_markov",
    "wireless.speed_mps=1.5",
    "wireless.carrier_hz=2.4e9",
    "wireless.round_duration_s=0.05",
    "wireless.cpu_frequency_distribution=lognormal",
    "wireless.cpu_frequency_sigma=0.6",
    "wireless.round_deadline_s=0.02",
]


def _uplink(overrides: list[str]) -> tuple[UplinkModel, object]:
    cfg = load_config(DEFAULT_CONFIG, overrides)
    num_train = np.arange(40, 40 + 10 * cfg.data.num_clients, 10)
    return UplinkModel(cfg, num_train=num_train, model_dim=1000), cfg


def test_round_deadline_drops_exactly_the_late_uploads_by_hand() -> None:
    # Arrange: per-client lognormal f_i, ideal effects otherwise (no losses)
    overrides = [
        "wireless.effects=none",
        "wireless.cpu_frequency_distribution=lognormal",
        "wireless.cpu_frequency_sigma=0.8",
    ]
    uplink, cfg = _uplink(overrides)
    w = cfg.wireless
    clients, subchannels = np.array([0, 3, 5, 8]), np.array([2, 0, 3, 1])
    bits = np.array([4e4, 6e4, 3e4, 5e4])
    # the hand computation: d^lo = samples·Φ/f_i, d^up = bits / (B·log2(1 + γ))
    state = uplink.channel_state(0)
    snr = 10 ** (w.tx_power_dbm / 10) / 1e3 * state.gain_linear[clients, subchannels]
    noise_w = 10 ** (w.noise_psd_dbm_hz / 10) / 1e3 * w.bandwidth_hz
    airtime = bits / (w.bandwidth_hz * np.log2(1 + snr / noise_w))
    f = cpu_frequencies(cfg.seed, range(10), "lognormal", median=2.4e9, sigma=0.8)
    samples = uplink.num_train[clients] * cfg.algorithm.local_epochs
    total = samples * w.cpu_cycles_per_sample / f[clients] + airtime
    deadline = float(np.sort(total)[1] + np.sort(total)[2]) / 2  # two late
    late = total > deadline
    timed, _ = _uplink([*overrides, f"wireless.round_deadline_s={deadline!r}"])
    schedule = Schedule(clients, subchannel=subchannels)
    # Act
    rows, link = timed.link(0, schedule, bits)
    # Assert: exactly the late ones are stragglers, lost, and priced by latency_s
    assert late.sum() == 2
    assert [rows[int(c)]["straggler"] for c in clients] == late.tolist()
    np.testing.assert_array_equal(link.delivered, ~late)
    np.testing.assert_allclose(
        [rows[int(c)]["latency_s"] for c in clients], total, rtol=1e-9
    )
    # without the deadline nothing is lost, and no straggler column is added
    rows_free, link_free = uplink.link(0, schedule, bits)
    assert link_free.delivered.all() and "straggler" not in rows_free[0]


def test_a_straggler_counts_as_a_release() -> None:
    # Arrange: a deadline nobody meets, the surrogate backend's round
    env = WirelessFLEnv(mode="surrogate", overrides=["wireless.round_deadline_s=1e-9"])
    env.reset(seed=0)
    action = np.array([0, 1, 2, 3])
    # Act
    _, _, _, _, info = env.step(action)
    # Assert
    assert info["delivered"] == [] and info["scheduled"] == [0, 1, 2, 3]
    assert info["stragglers"] == [0, 1, 2, 3]
    assert env.backend.uplink.upload_count()[:4].tolist() == [1, 1, 1, 1]


def test_an_unavailable_client_is_not_eligible_and_is_repaired_and_reported() -> None:
    # Arrange
    env = WirelessFLEnv(mode="surrogate", overrides=MARKOV)
    obs, _ = env.reset(seed=0)
    chain = OnOffAvailability(0, range(10), mean_on=3.0, mean_off=2.0)
    away_seen = 0
    for t in range(6):
        online = chain.available(t)
        away = np.flatnonzero(~online)
        here = np.flatnonzero(online)
        # Assert: the observation says who is away
        np.testing.assert_array_equal(obs["available"], online.astype(np.float32))
        assert not obs["eligible"][away].any()
        # Act: name every away client first, then the available ones
        named = np.concatenate([away, here])[:4]
        action = np.full(4, 10)
        action[: len(named)] = named
        obs, _, terminated, _, info = env.step(action)
        # Assert: the away clients were ignored (reported), never scheduled
        expected_ignored = [int(c) for c in named if not online[c]]
        assert info["ignored"] == expected_ignored
        assert set(info["scheduled"]) == {int(c) for c in named if online[c]}
        assert not terminated  # nobody reachable is no end: budgets are not spent
        away_seen += len(expected_ignored)
    assert away_seen > 0  # the test named some away client


def test_channel_age_counts_rounds_away_and_gain_is_the_last_seen() -> None:
    # Arrange
    env = WirelessFLEnv(mode="surrogate", overrides=MARKOV)
    obs, _ = env.reset(seed=1)
    uplink = env.backend.uplink
    chain = OnOffAvailability(1, range(10), mean_on=3.0, mean_off=2.0)
    last_gain = {c: None for c in range(10)}
    last_round = dict.fromkeys(range(10), -1)
    for t in range(6):
        online = chain.available(t)
        truth = np.asarray(uplink.channel_state(t).gain_db, dtype=np.float32)
        for c in np.flatnonzero(online):
            last_gain[int(c)], last_round[int(c)] = truth[c], t
        # Assert
        for c in range(10):
            assert obs["channel_age"][c] == t - last_round[c]
            if last_gain[c] is not None:
                np.testing.assert_array_equal(obs["channel_gain"][c], last_gain[c])
        obs, *_ = env.step(np.full(4, 10))


def test_observation_keys_appear_only_with_their_model() -> None:
    plain = WirelessFLEnv(mode="surrogate")
    deadline = WirelessFLEnv(
        mode="surrogate", overrides=["wireless.round_deadline_s=0.1"]
    )
    everything = WirelessFLEnv(mode="surrogate", overrides=EVERY_MODEL)
    assert set(plain.observation_space.spaces) == set(CORE_KEYS)
    assert set(deadline.observation_space.spaces) - set(CORE_KEYS) == {"compute_time_s"}
    assert set(everything.observation_space.spaces) - set(CORE_KEYS) == {
        "available",
        "channel_age",
        "compute_time_s",
    }


@pytest.mark.parametrize("overrides", [[], EVERY_MODEL], ids=["papers", "moving"])
def test_env_checker_and_same_seed_rollouts(overrides: list[str]) -> None:
    # Arrange
    env = WirelessFLEnv(mode="surrogate", overrides=overrides)
    check_env(env, skip_render_check=True)

    def rollout() -> list[np.ndarray]:
        obs, _ = env.reset(seed=4)
        out = [obs["channel_gain"]]
        for t in range(5):
            obs, *_ = env.step(np.array([t, t + 1, t + 2, t + 3]) % 10)
            out += [obs["channel_gain"], obs["eligible"]]
        return out

    # Act / Assert
    for a, b in zip(rollout(), rollout(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_compute_time_is_samples_times_cycles_over_frequency() -> None:
    env = WirelessFLEnv(
        mode="surrogate",
        overrides=[
            "wireless.cpu_frequency_distribution=uniform",
            "wireless.cpu_frequency_low_hz=1e9",
            "wireless.cpu_frequency_high_hz=3e9",
        ],
    )
    obs, _ = env.reset(seed=2)
    cfg = env.config
    f = cpu_frequencies(2, range(10), "uniform", low=1e9, high=3e9)
    expected = env.backend.data_size * cfg.wireless.cpu_cycles_per_sample / f
    np.testing.assert_allclose(obs["compute_time_s"], expected, rtol=1e-6)


def test_the_columns_refuse_a_moving_world_by_name() -> None:
    # Arrange
    from envs.star.vector import WirelessFLVectorEnv
    from rayfl.star.columns import columns_refusal

    plain = load_config(DEFAULT_CONFIG)
    moving = load_config(DEFAULT_CONFIG, ["wireless.round_deadline_s=0.1"])
    # Act / Assert: the lanes run it (auto), columns=True says why not
    assert columns_refusal(plain) is None
    assert "wireless.round_deadline_s" in columns_refusal(moving)
    with pytest.raises(ValueError, match="wireless.fading_dynamics=gauss_markov"):
        WirelessFLVectorEnv(2, overrides=EVERY_MODEL, columns=True)
    venv = WirelessFLVectorEnv(2, overrides=EVERY_MODEL)
    try:
        assert not venv.columnar
    finally:
        venv.close()


def test_a_client_set_policy_sees_an_unavailable_client_as_ineligible() -> None:
    # Arrange: the participants' observation (policy `all`) of round t
    from types import SimpleNamespace

    from rayfl.star.actions import StarParticipants

    uplink, _ = _uplink(MARKOV)
    chain = OnOffAvailability(0, range(10), mean_on=3.0, mean_off=2.0)
    rules = StarParticipants(10, 4)
    for t in range(4):
        online = chain.available(t)
        # Act
        obs = rules.observe(SimpleNamespace(uplink=uplink), t)
        schedule, ignored = rules.to_schedule(np.ones(10, int), obs["eligible"] > 0.5)
        # Assert
        np.testing.assert_array_equal(obs["eligible"], online.astype(np.float32))
        assert online[schedule.clients].all()
        assert set(ignored) >= set(np.flatnonzero(~online).tolist())


def test_a_fresh_uplink_sees_round_t_as_a_run_that_lived_through_it() -> None:
    # Arrange: a resumed run's uplink model starts fresh at its next round
    from rayfl.star.moving import moving_observation

    lived, _ = _uplink(EVERY_MODEL)
    fresh, _ = _uplink(EVERY_MODEL)
    # Act
    for t in range(6):
        before = moving_observation(lived, t)
        gain = lived.channel_state(t).gain_db
    resumed = moving_observation(fresh, 5)
    # Assert: the world is a function of (seed, round), not of the path
    for key in before:
        np.testing.assert_array_equal(resumed[key], before[key], key)
    np.testing.assert_array_equal(fresh.channel_state(5).gain_db, gain)
    np.testing.assert_array_equal(fresh.eligible(5), lived.eligible(5))


def test_the_flat_id_sees_availability_through_its_eligible_feature() -> None:
    # Arrange: the RL-ready id over a moving world (surrogate mode)
    import gymnasium as gym

    import envs  # noqa: F401  (registers the ids)
    from policies.features import FEATURE_NAMES

    env = gym.make("WirelessFL-Flat-v0", overrides=EVERY_MODEL)
    check_env(env.unwrapped, skip_render_check=True)
    column = FEATURE_NAMES.index("eligible")
    obs, _ = env.reset(seed=0)
    for _ in range(4):
        online = env.unwrapped.base.backend.uplink.available(env.unwrapped.base.round)
        # Assert: bounded, the away clients' eligible feature 0, never scheduled
        assert obs.min() >= -1.0 and obs.max() <= 1.0
        assert not (obs.reshape(10, -1)[~online, column] > 0).any()
        obs, _, _, _, info = env.step(env.action_space.sample())
        assert online[info["scheduled"]].all() and info["ignored"] == []


def test_a_trace_drives_the_star_envs_availability() -> None:
    # Arrange: the shipped sample trace (20 clients) on the star env
    from pathlib import Path

    from rayfl.wireless.availability_trace import read_trace

    path = Path(__file__).resolve().parents[2] / "examples" / "availability_trace.csv"
    env = WirelessFLEnv(
        mode="surrogate",
        overrides=[
            "data.num_clients=20",
            "wireless.availability=trace",
            f"wireless.availability_trace={path}",
        ],
    )
    trace = read_trace(path, num_clients=20)
    obs, _ = env.reset(seed=0)
    for t in range(5):
        # Assert: the observation and the eligibility follow the file
        online = trace.available(t)
        np.testing.assert_array_equal(obs["available"], online.astype(np.float32))
        assert not obs["eligible"][~online].any()
        obs, *_ = env.step(np.arange(4))
