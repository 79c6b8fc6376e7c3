"""The edge engine without Ray: exact aggregation and its noise."""

import numpy as np
import pytest

from rayfl.hierarchy.edge import EdgeHost
from rayfl.hierarchy.round import segments
from rayfl.learning.aggregate import partial_sum


def test_edge_sum_equals_the_flat_partial_sum_bit_for_bit():
    rng = np.random.default_rng(0)
    model = rng.normal(size=300).astype(np.float32)
    rows = rng.normal(scale=1e-2, size=(5, 300)).astype(np.float32)
    weights = [3.0, 1.0, 4.0, 1.0, 5.0]
    flat = (model + partial_sum(rows, weights).mean()).astype(np.float32)
    # two client actors pre-reduce their own devices
    a, b = partial_sum(rows[:2], weights[:2]), partial_sum(rows[2:], weights[2:])
    new, record = EdgeHost(0, seed=1, trusted=False).aggregate(7, model, 0.0, 0.0, a, b)
    assert np.array_equal(new, flat)
    assert record["uploads"] == 5 and record["edge_noise_std"] == 0


def test_trusted_edge_noise_has_the_configured_std_and_is_seeded():
    model = np.zeros(200_000, np.float32)
    edge = EdgeHost(3, seed=5, trusted=True)
    one, rec = edge.aggregate(11, model, 0.25, 0.0)
    two, _ = edge.aggregate(11, model, 0.25, 0.0)
    other, _ = edge.aggregate(12, model, 0.25, 0.0)
    assert np.std(one) == pytest.approx(0.25, rel=0.01)
    assert np.array_equal(one, two) and not np.array_equal(one, other)
    assert rec["edge_noise_norm"] == pytest.approx(0.25 * np.sqrt(200_000), rel=0.01)


def test_segments_follow_spec_a3():
    # τ = 20, m = 5: local at +5, +10, +15, global at +20 (K_ℓ = 3)
    assert segments(20, 5) == [5, 5, 5, 5]
    assert segments(20, 20) == [20]  # PEDPFL: global only
    assert segments(9, 2, num_local=3) == [2, 2, 2, 3]
    assert sum(segments(37, 4)) == 37
