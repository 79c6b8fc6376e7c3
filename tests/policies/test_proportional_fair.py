"""Proportional fair: largest instantaneous-to-average SNR (Yang et al. 2020)."""

from __future__ import annotations

import numpy as np
import pytest

from policies.best_channel import BestChannelPolicy
from policies.proportional_fair import ProportionalFairPolicy, wideband_gain
from tests.policies.helpers import make_spaces, observation


def test_rising_client_beats_always_strong_client():
    # Arrange: K = 1. Client 0 is always at -60 dB; client 1 sits at -95 dB for
    # 40 rounds, then rises to -85 dB: still 25 dB below client 0, but 10 dB
    # above its own average. Client 2 is ineligible.
    spaces_ = make_spaces(3, 1)
    policy = ProportionalFairPolicy(*spaces_, window=10)
    eligible = [1, 1, 0]
    for _ in range(40):
        policy(observation(np.array([[-60.0], [-95.0], [0.0]]), eligible=eligible))
    obs = observation(np.array([[-60.0], [-85.0], [0.0]]), eligible=eligible)
    # Act
    fair = policy(obs)
    greedy = BestChannelPolicy(*spaces_)(obs)
    # Assert: PF serves the riser, max-SNR the strong client
    np.testing.assert_array_equal(fair, [1])
    np.testing.assert_array_equal(greedy, [0])


def test_steady_channels_rank_by_ratio_not_absolute_gain():
    # Arrange: five clients at steady, very different gains; then client 3 dips
    # and client 4 rises by 3 dB. K = 1.
    policy = ProportionalFairPolicy(*make_spaces(5, 1), window=5)
    base = np.array([[-50.0], [-70.0], [-90.0], [-60.0], [-110.0]])
    for _ in range(30):
        policy(observation(base))
    # Act
    action = policy(observation(base + np.array([[0], [0], [0], [-3.0], [3.0]])))
    # Assert
    np.testing.assert_array_equal(action, [4])


def test_average_is_an_exponential_window():
    # Arrange
    policy = ProportionalFairPolicy(*make_spaces(2, 1), window=4)
    # Act: first round sets the average, second moves it 1/4 of the way
    policy(observation(np.array([[0.0], [0.0]])))
    policy(observation(np.array([[10.0], [0.0]])))
    # Assert: 1 + (10 - 1) / 4 = 3.25 (linear)
    np.testing.assert_allclose(policy.average_gain, [3.25, 1.0], rtol=1e-12)


def test_reset_forgets_the_average():
    policy = ProportionalFairPolicy(*make_spaces(2, 1))
    policy(observation(np.array([[0.0], [-10.0]])))
    policy.reset(seed=0)
    assert policy.average_gain is None


def test_wideband_gain_is_mean_linear_gain():
    np.testing.assert_allclose(wideband_gain([[0.0, 10.0], [-10.0, -10.0]]), [5.5, 0.1])


@pytest.mark.parametrize("window", [0.5, 0.0, -3.0, float("nan")])
def test_window_below_one_round_raises(window):
    with pytest.raises(ValueError, match="window must be >= 1"):
        ProportionalFairPolicy(*make_spaces(2, 1), window=window)
