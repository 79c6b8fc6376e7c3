"""numpy's PCG64 exponential draws as columns (rayfl.pcg_columns) against numpy itself."""

import warnings

import numpy as np
import pytest

from rayfl import pcg_columns
from rayfl.hierarchy.config import CostConfig, HierSchedulingConfig
from rayfl.hierarchy.lanes_round import LaneScheduling, draw_tables
from rayfl.hierarchy.scheduling import EdgeScheduling
from rayfl.pcg_columns import exponential_rows
from rayfl.seeding import _key_rows, _state_words, rng_for

PURPOSE = "hier_subchannel_fading"


def _numpy_rows(seeds, rounds, clients, size):
    return np.array(
        [
            rng_for(int(s), PURPOSE, round=int(r), client=int(c)).exponential(1.0, size)
            for s, r, c in zip(seeds, rounds, clients, strict=True)
        ]
    ).reshape(len(seeds), size)


def test_random_and_edge_keys_draw_numpys_numbers():
    g = np.random.default_rng(5)
    m = 4000
    seeds, rounds, clients = (g.integers(0, 2**32, m) for _ in range(3))
    seeds[:8], rounds[8:16], clients[16:24] = 2**32 - 1, 0, 2**32 - 1
    got = exponential_rows(seeds, PURPOSE, rounds=rounds, clients=clients, size=3)
    assert got.shape == (m, 3)
    assert np.array_equal(got, _numpy_rows(seeds, rounds, clients, 3))


def test_the_fast_path_and_the_fallback_both_serve():
    """Keys whose draws leave the ziggurat's fast layer take numpy's generator."""
    g = np.random.default_rng(6)
    m = 3000
    seeds, rounds, clients = (g.integers(0, 2**20, m) for _ in range(3))
    keys = _key_rows(seeds, PURPOSE, rounds, clients)[1]
    fast, ok = pcg_columns._fast_rows(_state_words(keys), 2)
    assert 0 < (~ok).sum() < 0.1 * m  # ~2 % of draws leave the fast layer
    want = _numpy_rows(seeds, rounds, clients, 2)
    assert np.array_equal(fast[ok], want[ok])  # the columns alone, no fallback
    assert not np.array_equal(fast[~ok], want[~ok])
    got = exponential_rows(seeds, PURPOSE, rounds=rounds, clients=clients, size=2)
    assert np.array_equal(got, want)


def test_keys_beyond_32_bits_and_sizes():
    got = exponential_rows(2**40, PURPOSE, rounds=[1, 2], clients=3, size=2)
    assert np.array_equal(got, _numpy_rows([2**40] * 2, [1, 2], [3, 3], 2))
    assert exponential_rows(1, PURPOSE, rounds=[1, 2], size=0).shape == (2, 0)
    with pytest.raises(ValueError, match="size must be >= 0"):
        exponential_rows(1, PURPOSE, size=-1)
    with pytest.raises(KeyError, match="unknown rng purpose"):
        exponential_rows(1, "no_such_purpose")


def test_changed_tables_are_caught_and_numpy_draws_instead(monkeypatch):
    monkeypatch.setattr(pcg_columns, "_WE", pcg_columns._WE * (1 + 2**-40))
    pcg_columns._columns_agree.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = exponential_rows(9, PURPOSE, rounds=np.arange(50), clients=4, size=2)
        assert any("changed" in str(w.message) for w in caught)
        assert np.array_equal(got, _numpy_rows([9] * 50, range(50), [4] * 50, 2))
    finally:
        pcg_columns._columns_agree.cache_clear()


@pytest.mark.parametrize("selective", [True, False])
def test_lane_fading_tables_equal_edge_scheduling_fading(selective):
    cfg = HierSchedulingConfig(subchannels_per_edge=3, frequency_selective=selective)
    subnets = [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9, 10, 11], [12, 13]]
    args = dict(cost=CostConfig(), subnets=subnets, num_train=np.arange(14) + 10)
    lanes = [
        LaneScheduling(cfg, seed=s, distance_m=np.linspace(10, 90, 14), **args)
        for s in (0, 7, 2**33)
    ]
    alone = [
        EdgeScheduling(cfg, seed=s, distance_m=np.linspace(10, 90, 14), **args)
        for s in (0, 7, 2**33)
    ]
    for lane in lanes:
        lane.reset()
    draw_tables([(lane, key) for lane in lanes for key in (0, 5)])
    for lane, one in zip(lanes, alone, strict=True):
        for key in (0, 5, 9):  # 9: drawn on demand
            for c, members in enumerate(subnets):
                k_e = lane.num_subchannels[c]
                for i in members:
                    assert np.array_equal(lane.fading(key, i, k_e), one.fading(key, i, k_e))
                assert np.array_equal(lane.gains_db(c, key), one.gains_db(c, key))
