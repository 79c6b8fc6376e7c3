"""Oracle tests of device mobility (rayfl.wireless.mobility, issue 48).

- static: the distances are exactly the ones the channel draws today
  (WirelessChannel on the ``geometry`` stream), and never change;
- random waypoint: positions stay in the cell; after a few legs the distance
  to the centre follows the stationary law of the RWP in a disk, whose
  density is ∝ r (R² − r²) E(r/R) (Hyytiä, Lassila & Virtamo 2006, for a convex area:
  f(x) ∝ ∫_0^{2π} ℓ1 ℓ2 (ℓ1 + ℓ2) dφ, with ℓ1 ℓ2 = R² − r² and
  ℓ1 + ℓ2 = 2√(R² − r² sin²φ) in a disk), integrated here by scipy's quad;
  the same sample rejects the uniform-in-disk law. With pauses the law is the
  mixture with the uniform law in the share of time paused, T_p / (T_p +
  E[L] E[1/v]) with E[L] = 128R/(45π) (Bettstetter, Resta & Santi 2003);
- Gauss-Markov: positions stay in the cell (with bounces several times per
  round); the speed's lag-1 autocorrelation is α and its marginal N(s̄, σ_s²);
- packing independence, replay from scratch, and checkpoints.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, special, stats

from rayfl.seeding import rng_for
from rayfl.wireless.channel import WirelessChannel
from rayfl.wireless.config import WirelessConfig
from rayfl.wireless.mobility import Mobility
from rayfl.wireless.walks import reflect_in_disk

RADIUS = 100.0
CELL = {"distance_min_m": 1.0, "distance_max_m": RADIUS}
PARAMS = {
    "static": {},
    "random_waypoint": {"speed_min_mps": 1.0, "speed_max_mps": 3.0, "pause_s": 5.0},
    "gauss_markov": {
        "memory": 0.8,
        "speed_mean_mps": 2.0,
        "speed_std_mps": 0.5,
        "direction_std_rad": 0.4,
    },
}


def _moving_cdf(radius: float):
    """CDF of ‖x‖ under the stationary moving RWP in a disk (Hyytiä et al. 2006).

    The density r (R² − r²) E(r/R) is integrated by the trapezoid rule on
    20,001 points (error ~1e-8, far below the KS tests' resolution).
    """
    r = np.linspace(0.0, radius, 20_001)
    density = r * (radius**2 - r**2) * special.ellipe((r / radius) ** 2)
    cdf = integrate.cumulative_trapezoid(density, r, initial=0.0)
    cdf /= cdf[-1]
    return lambda x: np.interp(x, r, cdf)


def test_static_reproduces_the_channels_distances_and_stays():
    # Arrange
    config = WirelessConfig()
    channel = WirelessChannel(config, 12, rng_for(4, "geometry"))
    cell = {
        "distance_min_m": config.distance_min_m,
        "distance_max_m": config.distance_max_m,
    }
    # Act
    world = Mobility("static", 4, range(12), round_s=1.0, **cell)
    first, later = world.positions(0), world.positions(9)
    # Assert
    np.testing.assert_array_equal(world.distances(0), channel.distances_m)
    np.testing.assert_allclose(np.hypot(*first.T), channel.distances_m, rtol=1e-12)
    np.testing.assert_array_equal(first, later)
    np.testing.assert_array_equal(world.moved_m(9), np.zeros(12))


def test_random_waypoint_reaches_the_stationary_law_of_the_disk():
    # Arrange: ~4 legs a round, so round 6 is ~25 legs from the start
    world = Mobility(
        "random_waypoint",
        1,
        range(3000),
        round_s=200.0,
        speed_min_mps=1.0,
        speed_max_mps=3.0,
        **CELL,
    )
    # Act
    radius = np.hypot(*world.positions(6).T)  # one draw per client: independent
    moved = world.moved_m(6)
    # Assert
    assert radius.max() <= RADIUS
    assert (world.distances(6) >= CELL["distance_min_m"]).all()
    assert moved.min() >= 200.0 * 1.0 - 1e-9 and moved.max() <= 200.0 * 3.0 + 1e-9
    assert stats.kstest(radius, _moving_cdf(RADIUS)).pvalue > 1e-3
    uniform = stats.kstest(radius, lambda r: (np.clip(r, 0, RADIUS) / RADIUS) ** 2)
    assert uniform.pvalue < 1e-10  # the test has the power to tell the laws apart
    start = np.hypot(*world.positions(0).T)  # the papers' U[d_min, R] start
    assert stats.kstest(start, _moving_cdf(RADIUS)).pvalue < 1e-10


def test_random_waypoint_with_pauses_mixes_in_the_uniform_law():
    # Arrange
    pause_s, low, high = 30.0, 1.0, 3.0
    leg_s = 128.0 * RADIUS / (45.0 * np.pi) * np.log(high / low) / (high - low)
    paused = pause_s / (pause_s + leg_s)
    moving = _moving_cdf(RADIUS)

    def mixture(r):
        return paused * (np.clip(r, 0, RADIUS) / RADIUS) ** 2 + (1 - paused) * moving(r)

    world = Mobility(
        "random_waypoint",
        2,
        range(3000),
        round_s=300.0,
        speed_min_mps=low,
        speed_max_mps=high,
        pause_s=pause_s,
        **CELL,
    )
    # Act
    radius = np.hypot(*world.positions(5).T)
    # Assert
    assert stats.kstest(radius, mixture).pvalue > 1e-3
    assert stats.kstest(radius, moving).pvalue < 1e-6


def test_random_waypoint_trajectory_does_not_depend_on_the_round_length():
    # Arrange: one continuous-time walk, sampled every 7 s or every 21 s
    rwp = PARAMS["random_waypoint"]
    short = Mobility("random_waypoint", 4, range(30), round_s=7.0, **rwp, **CELL)
    long = Mobility("random_waypoint", 4, range(30), round_s=21.0, **rwp, **CELL)
    # Act
    path = sum(short.moved_m(t) for t in range(1, 7))
    # Assert
    np.testing.assert_allclose(short.positions(6), long.positions(2), atol=1e-9)
    np.testing.assert_allclose(path, long.moved_m(1) + long.moved_m(2), rtol=1e-9)


def test_gauss_markov_stays_in_the_cell_and_its_speed_is_ar1():
    # Arrange: 1000 clients x 101 rounds = 10^5 speed pairs
    alpha, mean, std, round_s = 0.7, 5.0, 1.0, 10.0
    world = Mobility(
        "gauss_markov",
        3,
        range(1000),
        round_s=round_s,
        memory=alpha,
        speed_mean_mps=mean,
        speed_std_mps=std,
        direction_std_rad=0.5,
        **CELL,
    )
    # Act: moved_m(t) = |s_{t-1}| T, and s > 0 but with probability ~3e-7
    speed = np.stack([world.moved_m(t) / round_s for t in range(1, 102)])
    radius = np.hypot(*world.positions(101).T)
    # Assert
    assert radius.max() <= RADIUS
    lag1 = np.corrcoef(speed[1:].ravel(), speed[:-1].ravel())[0, 1]
    assert lag1 == pytest.approx(alpha, abs=0.01)  # s.e. (1 − α²)/√n ≈ 0.002
    marginal = stats.kstest(speed[-1], stats.norm(mean, std).cdf)
    assert marginal.pvalue > 1e-3


def test_gauss_markov_bounces_off_the_edge_many_times_a_round():
    fast = dict(PARAMS["gauss_markov"], speed_mean_mps=80.0, speed_std_mps=5.0)
    world = Mobility("gauss_markov", 5, range(200), round_s=10.0, **fast, **CELL)
    for t in range(1, 6):  # 800 m a round in a 200 m wide cell
        assert np.hypot(*world.positions(t).T).max() <= RADIUS


def test_reflect_in_disk_keeps_path_length_and_mirrors_directions():
    # Arrange: from the centre, 3 m east in a disk of radius 2 m
    start, move = np.zeros((1, 2)), np.array([[3.0, 0.0]])
    # Act
    end, sign, offset = reflect_in_disk(start, move, 2.0)
    # Assert: bounced at (2, 0), 1 m back; heading east (0) becomes west (π)
    np.testing.assert_allclose(end, [[1.0, 0.0]], atol=1e-9)
    np.testing.assert_allclose(np.mod(offset + sign * 0.0, 2 * np.pi), [np.pi])


@pytest.mark.parametrize("kind", list(PARAMS), ids=list(PARAMS))
def test_a_clients_trajectory_does_not_depend_on_who_else_moves(kind):
    # Arrange
    some = [3, 17, 42, 0, 9]
    crowd = Mobility(kind, 8, range(50), round_s=20.0, **PARAMS[kind], **CELL)
    few = Mobility(kind, 8, some, round_s=20.0, **PARAMS[kind], **CELL)
    # Act / Assert
    for t in range(8):
        np.testing.assert_array_equal(few.positions(t), crowd.positions(t)[some])
        np.testing.assert_array_equal(few.moved_m(t), crowd.moved_m(t)[some])


@pytest.mark.parametrize("kind", ["random_waypoint", "gauss_markov"])
def test_rounds_replay_from_scratch_and_resume_from_a_checkpoint(kind):
    # Arrange
    def make():
        return Mobility(kind, 6, range(20), round_s=15.0, **PARAMS[kind], **CELL)

    straight = make()
    series = [straight.positions(t) for t in range(8)]
    jumpy, resumed = make(), make()
    # Act
    late, early = jumpy.positions(7), jumpy.positions(2)
    jumpy.positions(5)
    resumed.load_state_dict(jumpy.state_dict())
    # Assert
    np.testing.assert_array_equal(late, series[7])
    np.testing.assert_array_equal(early, series[2])
    np.testing.assert_array_equal(resumed.positions(6), series[6])


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="kind must be one of"):
        Mobility("teleport", 0, range(2), round_s=1.0, **CELL)
    with pytest.raises(ValueError, match="speed_min_mps <= speed_max_mps"):
        Mobility(
            "random_waypoint",
            0,
            range(2),
            round_s=1.0,
            speed_min_mps=0.0,
            speed_max_mps=1.0,
            **CELL,
        )
    with pytest.raises(ValueError, match="required"):
        Mobility("gauss_markov", 0, range(2), round_s=1.0, memory=0.5, **CELL)
    with pytest.raises(ValueError, match="round_s must be > 0"):
        Mobility("static", 0, range(2), round_s=0.0, **CELL)
