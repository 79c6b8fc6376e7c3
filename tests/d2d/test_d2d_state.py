"""D2D state pieces: π updates (EMState) and models packed for checkpoints."""

import numpy as np
import pytest
import ray

from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.em import EMState
from rayfl.d2d.snapshot import pack_sources, pull_distinct, unpack_sources

# All tests here use the shared Ray session (tests/conftest.py): the module then runs
# with the other Ray modules instead of starting Ray again at its first Ray test.
pytestmark = pytest.mark.usefixtures("ray_session")


def test_em_update_keeps_the_mass_of_the_neighbors_that_did_not_arrive():
    state = EMState((1, 2, 3, 4))
    topo = D2DTopologyConfig(em_tol=1e-9, em_max_rounds=10)
    # neighbors at positions 0 and 2 arrived; their new π (normalised) is 0.9/0.1
    state.apply([0, 2], np.log([0.9, 0.1]), -1.5, round=0, topology=topo)
    pi = np.exp(state.log_pi)
    np.testing.assert_allclose(pi, [0.45, 0.25, 0.05, 0.25])
    assert state.history[-1] == pytest.approx(pi.tolist())
    assert state.loglik == [-1.5] and not state.frozen


def test_em_freezes_after_max_rounds_without_convergence():
    state = EMState((1, 2))
    topo = D2DTopologyConfig(em_tol=1e-12, em_max_rounds=2)
    state.apply([0, 1], np.log([0.7, 0.3]), -1.0, round=0, topology=topo)
    assert not state.frozen
    state.apply([0, 1], np.log([0.2, 0.8]), -0.9, round=1, topology=topo)
    assert state.frozen and state.converged_round is None


def test_reselect_keeps_pi_of_staying_neighbors_and_restarts_em():
    state = EMState((1, 2))
    state.log_pi = np.log([0.8, 0.2])
    state.frozen = True
    fresh = state.reselect((1, 2), (1, 5))
    # 1 keeps 0.8, 5 enters with 1/2; renormalised over {1, 5}
    np.testing.assert_allclose(np.exp(fresh.log_pi), [0.8 / 1.3, 0.5 / 1.3])
    assert not fresh.frozen and len(fresh.history) == len(state.history) + 1


def test_em_state_round_trips_exactly():
    state = EMState((3, 4, 5))
    topo = D2DTopologyConfig()
    state.apply([0, 1, 2], np.log([0.5, 0.3, 0.2]), -2.0, round=0, topology=topo)
    back = EMState.from_state(state.state_dict())
    assert np.array_equal(back.log_pi, state.log_pi)
    assert vars(back) | {"log_pi": None} == vars(state) | {"log_pi": None}


def test_shared_refs_are_pulled_and_stored_once(ray_session):
    bundle = ray.put({1: np.full(3, 1, np.float32), 2: np.full(3, 2, np.float32)})
    other = ray.put({1: np.full(3, 7, np.float32)})
    sources = {(0, 1): bundle, (5, 1): bundle, (0, 2): bundle, (4, 1): other}
    values, index = pull_distinct([bundle, other, bundle])
    assert index == [0, 1, 0] and len(values) == 2
    packed = pack_sources(sources, dim=3)
    # three distinct (ref, neighbor) models for four pairs
    assert packed["models"].shape == (3, 3) and len(packed["pairs"]) == 4
    back = unpack_sources(packed)
    assert set(back) == set(sources)
    for (t, m), ref in back.items():
        np.testing.assert_array_equal(ray.get(ref)[m], ray.get(sources[(t, m)])[m])
    assert back[(0, 1)] is back[(5, 1)] is back[(0, 2)]  # one dict per bundle
    assert back[(4, 1)] is not back[(0, 1)]
    assert pack_sources({}, dim=3)["models"].shape == (0, 3)
