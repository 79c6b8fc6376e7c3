"""D2D nodes that move (rayfl.d2d.motion, issue 48): layouts, P^err, observations.

No Ray here (tests/d2d/test_d2d_mobile_runs.py runs the engine):

- static: every round's layout is the t = 0 layout object, the links keep the
  selection's P^err, and the observation equals the one without motion;
- moving: round 0 is the dropped layout; nodes stay in the square, and
  distances change over the rounds;
- round t's observation is an oracle's: ``distance_m`` the distance between the
  walked positions, ``error_probability`` the analytic P^err on path gains
  recomputed from those distances by the path-loss formula (eqs. 3–4);
- the bernoulli link draws of round t compare the keyed uniforms with round
  t's P^err;
- a node's path does not depend on the order the rounds are asked in.
"""

from __future__ import annotations

import numpy as np
import pytest

from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.layout import make_layout
from rayfl.d2d.links import deliveries
from rayfl.d2d.motion import D2DMotion
from rayfl.d2d.selection import (
    round_observation,
    select_neighbors,
    selection_observation,
)
from rayfl.observation import ObservationTracker
from rayfl.seeding import rng_for
from rayfl.wireless.areas import Square
from rayfl.wireless.d2d_error import error_probabilities_to_target
from rayfl.wireless.mobility import Trajectories

N, SEED = 9, 4
MOVES = {
    "random_waypoint": {
        "round_duration_s": 5.0,
        "mobility_speed_min_mps": 1.0,
        "mobility_speed_max_mps": 3.0,
    },
    "gauss_markov": {
        "round_duration_s": 5.0,
        "mobility_memory": 0.8,
        "mobility_speed_mean_mps": 2.0,
        "mobility_speed_std_mps": 0.5,
        "mobility_direction_std_rad": 0.5,
    },
}


def _topology(mobility="static", **extra):
    fields = MOVES.get(mobility, {})
    return D2DTopologyConfig(
        mobility=mobility, num_subchannels=3, link_model="bernoulli", **fields, **extra
    )


def _observation(layout, topology, round, motion=None):
    target = layout.targets[0]
    first = selection_observation(layout, target, topology, seed=SEED)[0]
    return round_observation(
        layout,
        first,
        ObservationTracker(N),
        None,
        topology,
        data_size=np.arange(N),
        seed=SEED,
        round=round,
        motion=motion,
    )


def test_static_motion_is_the_t0_layout_and_changes_no_observation():
    # Arrange
    topology = _topology()
    layout = make_layout(topology, N, seed=SEED)
    motion = D2DMotion(topology, layout, seed=SEED)
    target = layout.targets[0]
    # Act / Assert
    for t in (0, 1, 7):
        assert motion.layout(t) is layout
        assert motion.links(t, target) == (layout, None)
        with_motion = _observation(layout, topology, t, motion)
        without = _observation(layout, topology, t)
        assert with_motion.keys() == without.keys()
        for key, value in without.items():
            np.testing.assert_array_equal(with_motion[key], value, err_msg=key)


@pytest.mark.parametrize("kind", list(MOVES))
def test_moving_nodes_start_at_the_drop_stay_in_the_square_and_move(kind):
    # Arrange
    topology = _topology(kind)
    layout = make_layout(topology, N, seed=SEED)
    motion = D2DMotion(topology, layout, seed=SEED)
    # Act
    positions = np.stack([motion.layout(t).positions_m for t in range(25)])
    distances = np.stack([motion.layout(t).distances_m for t in range(25)])
    # Assert
    np.testing.assert_array_equal(positions[0], layout.positions_m)
    assert ((positions >= 0) & (positions <= topology.side_m)).all()
    assert (np.abs(np.diff(distances, axis=0)).sum(axis=0) > 0)[
        ~np.eye(N, dtype=bool)
    ].all()
    assert motion.layout(3).targets == layout.targets


def test_round_t_observation_follows_the_walked_positions():
    # Arrange: an independent walk of the same nodes, and eqs. 3–4 by hand
    topology = _topology("random_waypoint")
    layout = make_layout(topology, N, seed=SEED)
    motion = D2DMotion(topology, layout, seed=SEED)
    target = layout.targets[0]
    walk = Trajectories(
        "random_waypoint",
        SEED,
        range(N),
        area=Square(50.0),
        start=layout.positions_m,
        round_s=5.0,
        stream="d2d_mobility",
        speed_min_mps=1.0,
        speed_max_mps=3.0,
    )
    wavelength = 299_792_458.0 / 2.4e9
    for t in (1, 4, 9):
        x = walk.positions(t)
        d = np.hypot(*(x - x[target]).T)
        gain = (wavelength / (4 * np.pi)) ** 2 * np.maximum(d, 1.0) ** -3.0
        gain[target] = 0.0
        path_gain = np.zeros((N, N))
        path_gain[:, target] = gain
        want_error = error_probabilities_to_target(
            path_gain,
            target,
            tx_power_w=0.2,
            sinr_threshold=5.0,
            noise_power_w=layout.noise_power_w,
            fading_threshold=2.0,
            rayleigh_factor=2.0,
            num_subchannels=3,
        )
        # Act
        obs = _observation(layout, topology, t, motion)
        # Assert
        np.testing.assert_allclose(obs["distance_m"], d, rtol=1e-6)
        np.testing.assert_allclose(obs["error_probability"], want_error, rtol=1e-5)
        assert not np.allclose(obs["distance_m"], layout.distances_m[:, target])


def test_bernoulli_links_of_round_t_use_round_t_error_probabilities():
    # Arrange
    topology = _topology("gauss_markov", epsilon=0.3, target=2)
    layout = make_layout(topology, N, seed=SEED)
    motion = D2DMotion(topology, layout, seed=SEED)
    (selection,) = select_neighbors(layout, topology, seed=SEED)
    senders = [s for s in range(N) if s != 2]
    changed = 0
    for t in range(1, 15):
        moved, error = motion.links(t, 2)
        draws = rng_for(SEED, "d2d_link", round=t + 1, client=2).random(N)
        # Act
        got = deliveries(
            topology, moved, selection, senders, round=t, seed=SEED, error=error
        )
        # Assert
        assert got == {s: bool(draws[s] >= error[s]) for s in senders}
        frozen = {s: bool(draws[s] >= selection.error_probability[s]) for s in senders}
        changed += got != frozen
    assert changed > 0, "moving nodes should change some round's deliveries"


def test_rounds_asked_in_any_order_give_the_same_layouts():
    topology = _topology("gauss_markov")
    layout = make_layout(topology, N, seed=SEED)
    forward = D2DMotion(topology, layout, seed=SEED)
    backward = D2DMotion(topology, layout, seed=SEED)
    want = {t: forward.layout(t).positions_m.copy() for t in range(8)}
    for t in reversed(range(8)):
        np.testing.assert_array_equal(backward.layout(t).positions_m, want[t])
        np.testing.assert_array_equal(backward.error(t, 0), forward.error(t, 0))
