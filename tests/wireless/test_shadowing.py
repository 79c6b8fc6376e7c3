"""Oracle tests of Gudmundson's correlated shadowing (rayfl.wireless.shadowing).

- At constant speed (the same path Δd every round) the lag-1 correlation of
  the series is exp(−Δd/d_corr) (Gudmundson 1991) within sampling
  error over 10^5 pairs, and the lag-2 one its square (a Markov chain);
- the marginal stays N(0, σ²) at a late round (KS), with paths that differ
  per client (a moving world from rayfl.wireless.mobility);
- a device that does not move keeps its shadowing, and ``initial_db`` sets it;
- a client's series does not depend on who else is followed.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rayfl.wireless.mobility import Mobility
from rayfl.wireless.shadowing import GudmundsonShadowing, gudmundson_correlation


def _series(shadow: GudmundsonShadowing, moved: np.ndarray) -> np.ndarray:
    """(T, n) shadowing of rounds 0..T-1 with the (T, n) paths ``moved``."""
    return np.stack([shadow.shadowing_db(t, moved[t]) for t in range(len(moved))])


@pytest.mark.parametrize("step_m", [5.0, 20.0, 60.0], ids=["slow", "d_corr", "fast"])
def test_lag1_correlation_at_constant_speed_is_exp_of_path(step_m):
    # Arrange: 2000 clients x 51 rounds, 10^5 pairs
    sigma, d_corr = 8.0, 20.0
    shadow = GudmundsonShadowing(1, range(2000), std_db=sigma, decorrelation_m=d_corr)
    # Act
    s = _series(shadow, np.full((51, 2000), step_m))
    lag1 = np.corrcoef(s[1:].ravel(), s[:-1].ravel())[0, 1]
    lag2 = np.corrcoef(s[2:].ravel(), s[:-2].ravel())[0, 1]
    # Assert: independent reference exp(−Δd/d_corr), s.e. (1 − ρ²)/√n < 0.004
    rho = np.exp(-step_m / d_corr)
    assert lag1 == pytest.approx(rho, abs=0.015)
    assert lag2 == pytest.approx(rho**2, abs=0.015)
    assert s.std() == pytest.approx(sigma, rel=0.03)


def test_marginal_stays_normal_on_a_moving_world():
    # Arrange: paths from Gauss-Markov mobility, different per client and round
    world = Mobility(
        "gauss_markov",
        2,
        range(4000),
        distance_min_m=10.0,
        distance_max_m=200.0,
        round_s=5.0,
        memory=0.6,
        speed_mean_mps=3.0,
        speed_std_mps=1.0,
        direction_std_rad=0.7,
    )
    shadow = GudmundsonShadowing(2, range(4000), std_db=6.0, decorrelation_m=30.0)
    # Act
    for t in range(15):
        late = shadow.shadowing_db(t, world.moved_m(t))
    # Assert
    assert stats.kstest(late, stats.norm(0.0, 6.0).cdf).pvalue > 1e-3
    assert stats.kstest(late, stats.norm(0.0, 7.0).cdf).pvalue < 1e-3  # power


def test_a_device_that_stays_keeps_its_shadowing_and_initial_db_sets_it():
    start = np.array([3.0, -1.5, 0.0])
    shadow = GudmundsonShadowing(
        0, [4, 5, 6], std_db=8.0, decorrelation_m=50.0, initial_db=start
    )
    s = _series(shadow, np.zeros((6, 3)))
    np.testing.assert_array_equal(s, np.tile(start, (6, 1)))
    np.testing.assert_allclose(gudmundson_correlation([0.0, 50.0], 50.0), [1, 1 / np.e])


def test_a_clients_shadowing_does_not_depend_on_who_else_is_followed():
    moved = np.abs(np.sin(np.arange(8 * 30.0))).reshape(8, 30) * 40.0
    crowd = _series(
        GudmundsonShadowing(9, range(30), std_db=5.0, decorrelation_m=25.0), moved
    )
    some = [29, 2, 11]
    few = _series(
        GudmundsonShadowing(9, some, std_db=5.0, decorrelation_m=25.0), moved[:, some]
    )
    np.testing.assert_array_equal(few, crowd[:, some])


def test_rounds_in_order_checkpoints_and_bad_input():
    shadow = GudmundsonShadowing(3, range(4), std_db=4.0, decorrelation_m=10.0)
    whole = _series(shadow, np.full((5, 4), 3.0))
    half = GudmundsonShadowing(3, range(4), std_db=4.0, decorrelation_m=10.0)
    _series(half, np.full((3, 4), 3.0))
    resumed = GudmundsonShadowing(3, range(4), std_db=4.0, decorrelation_m=10.0)
    resumed.load_state_dict(half.state_dict())
    np.testing.assert_array_equal(resumed.shadowing_db(3, np.full(4, 3.0)), whole[3])
    with pytest.raises(ValueError, match="draw in order"):
        resumed.shadowing_db(7, np.zeros(4))
    with pytest.raises(ValueError, match="decorrelation_m must be > 0"):
        GudmundsonShadowing(3, range(4), std_db=4.0, decorrelation_m=0.0)
    with pytest.raises(ValueError, match="moved_m must be >= 0"):
        gudmundson_correlation([-1.0], 10.0)
