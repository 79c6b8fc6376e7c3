"""Oracle tests of mobility in a square (rayfl.wireless.areas, issue 48 for D2D).

- reflect_in_square equals an independent wall-by-wall bounce loop (end point
  and the direction map), and keeps points in the square;
- random waypoint in [0, L]²: positions stay in the square; after many legs
  the positions concentrate toward the centre (KS against the uniform law
  rejects), and their law equals an independent plain-Python random waypoint
  (two-sample KS on x and on the distance to the centre);
- Gauss-Markov bounces off the four walls, many times a round, and stays in;
- static keeps the start exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rayfl.wireless.areas import Square, reflect_in_square
from rayfl.wireless.mobility import Trajectories

SIDE = 50.0


def _bounce_loop(p, v, side):
    """One point's straight move in [0, side]², wall by wall (the oracle)."""
    p, v = np.array(p, float), np.array(v, float)
    direction = np.arctan2(v[1], v[0])
    flips = [False, False]
    left = 1.0  # fraction of the move still to do
    while True:
        end = p + left * v
        times = []
        for axis in range(2):
            if end[axis] > side:
                times.append(((side - p[axis]) / (left * v[axis]), axis))
            elif end[axis] < 0:
                times.append(((0 - p[axis]) / (left * v[axis]), axis))
        if not times:
            break
        s, axis = min(times)
        p = p + s * left * v
        left *= 1 - s
        v[axis] = -v[axis]
        flips[axis] = not flips[axis]
    new_direction = direction
    if flips[0]:
        new_direction = np.pi - new_direction
    if flips[1]:
        new_direction = -new_direction
    return p + left * v, direction, new_direction


def test_reflect_in_square_equals_a_wall_by_wall_bounce_loop():
    # Arrange: 500 moves up to 4 sides long from points in the square
    rng = np.random.default_rng(0)
    start = rng.uniform(0, SIDE, (500, 2))
    move = rng.uniform(-4 * SIDE, 4 * SIDE, (500, 2))
    # Act
    end, sign, offset = reflect_in_square(start, move, SIDE)
    # Assert
    assert ((end >= 0) & (end <= SIDE)).all()
    for i in range(len(start)):
        want, theta, want_theta = _bounce_loop(start[i], move[i], SIDE)
        np.testing.assert_allclose(end[i], want, atol=1e-8)
        got_theta = offset[i] + sign[i] * theta
        assert np.cos(got_theta) == pytest.approx(np.cos(want_theta), abs=1e-12)
        assert np.sin(got_theta) == pytest.approx(np.sin(want_theta), abs=1e-12)


def _plain_random_waypoint(n, side, horizon_s, low, high, rng):
    """Positions at ``horizon_s`` of n independent random waypoints (the oracle)."""
    out = np.empty((n, 2))
    for i in range(n):
        x, t = rng.uniform(0, side, 2), 0.0
        while True:
            target, speed = rng.uniform(0, side, 2), rng.uniform(low, high)
            leg = np.hypot(*(target - x)) / speed
            if t + leg >= horizon_s:
                out[i] = x + (target - x) * (horizon_s - t) / leg
                break
            x, t = target, t + leg
    return out


def test_random_waypoint_in_the_square_concentrates_toward_the_centre():
    # Arrange: 3000 nodes, 600 s ≈ 45 legs of ≈ 0.52 L at 1-3 m/s: stationary
    n, horizon = 3000, 600.0
    start = np.random.default_rng(1).uniform(0, SIDE, (n, 2))
    walk = Trajectories(
        "random_waypoint",
        3,
        range(n),
        area=Square(SIDE),
        start=start,
        round_s=horizon,
        stream="d2d_mobility",
        speed_min_mps=1.0,
        speed_max_mps=3.0,
    )
    oracle = _plain_random_waypoint(
        n, SIDE, horizon, 1.0, 3.0, np.random.default_rng(2)
    )
    # Act
    x = walk.positions(1)
    # Assert
    assert ((x >= 0) & (x <= SIDE)).all()
    assert stats.kstest(x[:, 0], stats.uniform(0, SIDE).cdf).pvalue < 1e-6
    centre = np.hypot(*(x - SIDE / 2).T)
    assert np.median(centre) < np.median(np.hypot(*(start - SIDE / 2).T))
    assert stats.ks_2samp(x[:, 0], oracle[:, 0]).pvalue > 1e-3
    oracle_centre = np.hypot(*(oracle - SIDE / 2).T)
    assert stats.ks_2samp(centre, oracle_centre).pvalue > 1e-3


def test_gauss_markov_bounces_off_the_four_walls_and_stays_in():
    # Arrange: 400 m a round in a 50 m square
    start = np.random.default_rng(3).uniform(0, SIDE, (200, 2))
    walk = Trajectories(
        "gauss_markov",
        5,
        range(200),
        area=Square(SIDE),
        start=start,
        round_s=10.0,
        stream="d2d_mobility",
        memory=0.8,
        speed_mean_mps=40.0,
        speed_std_mps=2.0,
        direction_std_rad=0.4,
    )
    # Act
    path = np.stack([walk.positions(t) for t in range(8)])
    moved = np.stack([walk.moved_m(t) for t in range(1, 8)])
    # Assert: in the square; each round's path (≈ 400 m) is longer than the
    # square's diagonal, so every node bounced, and no shorter than its
    # straight displacement
    assert ((path >= 0) & (path <= SIDE)).all()
    assert moved.min() > np.sqrt(2) * SIDE
    step = np.hypot(*np.moveaxis(np.diff(path, axis=0), -1, 0))
    assert (step <= moved + 1e-9).all()
    assert step.max() > 1.0


def test_static_in_the_square_keeps_the_start_exactly():
    start = np.random.default_rng(4).uniform(0, SIDE, (7, 2))
    walk = Trajectories(
        "static", 0, range(7), area=Square(SIDE), start=start, round_s=1.0
    )
    np.testing.assert_array_equal(walk.positions(5), start)
    np.testing.assert_array_equal(walk.moved_m(5), np.zeros(7))
