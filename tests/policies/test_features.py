"""Per-client features: shape, invariances, robustness."""

from __future__ import annotations

import numpy as np
import pytest

from policies.features import FEATURE_NAMES, NUM_FEATURES, client_features
from tests.policies.helpers import make_spaces, sample_observation


@pytest.fixture
def obs():
    observation_space, _ = make_spaces(9, 3)
    observation_space.seed(0)
    return sample_observation(observation_space, np.random.default_rng(0))


def test_shape_and_dtype(obs):
    features = client_features(obs)
    assert features.shape == (9, NUM_FEATURES) == (9, len(FEATURE_NAMES))
    assert features.dtype == np.float32
    assert np.isfinite(features).all()


def test_permuting_clients_permutes_rows(obs):
    # a per-client network then gives permutation-equivariant scores
    perm = np.random.default_rng(1).permutation(9)
    permuted = {k: (v if k == "round" else np.asarray(v)[perm]) for k, v in obs.items()}
    np.testing.assert_allclose(
        client_features(permuted), client_features(obs)[perm], rtol=1e-5, atol=1e-6
    )


def test_a_common_gain_offset_changes_nothing(obs):
    # z-scores of gains: adding 20 dB to every link (e.g. more power) is invisible
    shifted = dict(obs, channel_gain=obs["channel_gain"] + 20.0)
    np.testing.assert_allclose(
        client_features(shifted), client_features(obs), rtol=1e-4, atol=1e-4
    )


def test_dead_links_and_huge_epsilon_stay_finite(obs):
    obs = dict(obs)
    gain = np.array(obs["channel_gain"], dtype=np.float64)
    gain[0] = -np.inf
    obs["channel_gain"] = gain
    obs["privacy_spent"] = np.full(9, 3e38, np.float32)
    features = client_features(obs)
    assert np.isfinite(features).all()
    best = FEATURE_NAMES.index("best_gain_z")
    assert features[0, best] == features[:, best].min()


def test_equal_clients_have_zero_z_scores():
    n = 4
    obs = {
        "channel_gain": np.full((n, 2), -90.0),
        "loss": np.ones(n),
        "upload_count": np.full(n, 3.0),
        "privacy_spent": np.zeros(n),
        "staleness": np.zeros(n),
        "data_size": np.full(n, 100.0),
        "eligible": np.ones(n),
        "round": np.array([5.0]),
    }
    features = client_features(obs)
    for name in ("loss_z", "upload_z", "best_gain_z", "mean_gain_z"):
        np.testing.assert_allclose(features[:, FEATURE_NAMES.index(name)], 0.0)
    np.testing.assert_allclose(features[:, FEATURE_NAMES.index("upload_share")], 0.5)


def test_client_features_many_is_client_features_of_each_lane():
    """The vector envs' batched features are bit for bit each lane's features."""
    from policies.features import client_features, client_features_many

    rng = np.random.default_rng(0)
    for trial in range(40):
        e, n, k = rng.integers(1, 6), rng.integers(1, 30), rng.integers(1, 8)
        obs = {
            "channel_gain": rng.normal(-80, 20, (e, n, k)).astype(np.float32),
            "loss": rng.exponential(2, (e, n)).astype(np.float32),
            "upload_count": rng.integers(0, 9, (e, n)).astype(np.float32),
            "privacy_spent": rng.exponential(3, (e, n)).astype(np.float32),
            "staleness": rng.integers(0, 9, (e, n)).astype(np.float32),
            "data_size": rng.integers(5, 300, (e, n)).astype(np.float32),
            "eligible": (rng.random((e, n)) < 0.8).astype(np.float32),
            "round": rng.integers(0, 30, (e, 1)).astype(np.float32),
        }
        if trial % 5 == 0:
            obs["loss"][:] = 1.0  # constant: the z-scores' zero spread
        if trial % 7 == 0:
            obs["channel_gain"][0, 0, 0] = -np.inf  # a closed subchannel
        many = client_features_many(obs)
        for lane in range(e):
            one = client_features({key: v[lane] for key, v in obs.items()})
            np.testing.assert_array_equal(many[lane], one)
