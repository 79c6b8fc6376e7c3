from __future__ import annotations

import math

import numpy as np
import pytest

from rayfl.compression.sparsify import random_sparsify, topk_count, topk_sparsify


@pytest.mark.parametrize("keep_fraction", [0.1, 0.5, 0.9], ids=lambda p: f"p={p}")
def test_random_sparsify_is_unbiased_with_rescale(keep_fraction: float) -> None:
    # Arrange
    rng = np.random.default_rng(2)
    vector = rng.normal(size=50).astype(np.float32)
    draws = 20_000
    # Act
    total = np.zeros(vector.size)
    for _ in range(draws):
        total += random_sparsify(
            vector, keep_fraction=keep_fraction, rng=rng
        ).to_dense()
    mean = total / draws
    # Assert: each coordinate is x/p w.p. p, else 0: var = x^2 (1-p)/p; 5-sigma CLT
    bound = (
        5.0 * np.abs(vector) * math.sqrt((1 - keep_fraction) / keep_fraction / draws)
    )
    assert np.all(np.abs(mean - vector) <= bound + 1e-6)


def test_random_sparsify_without_rescale_has_mean_p_times_x() -> None:
    # Arrange: seed 002 sums sparse updates as is, E = p x
    rng = np.random.default_rng(3)
    vector = np.ones(200_000, dtype=np.float32)
    # Act
    payload = random_sparsify(vector, keep_fraction=0.3, rng=rng, rescale=False)
    # Assert
    assert payload.scale == 1.0
    np.testing.assert_allclose(
        payload.to_dense().mean(), 0.3, atol=5 * math.sqrt(0.21 / 2e5)
    )


@pytest.mark.parametrize("keep_fraction", [0.01, 0.25, 0.75], ids=lambda p: f"p={p}")
def test_random_sparsify_kept_fraction_is_binomial(keep_fraction: float) -> None:
    # Arrange
    dim = 100_000
    vector = np.ones(dim, dtype=np.float32)
    # Act
    payload = random_sparsify(
        vector, keep_fraction=keep_fraction, rng=np.random.default_rng(4)
    )
    # Assert: Binomial(d, p) count, 5-sigma
    assert payload.indices is not None
    kept = payload.indices.size / dim
    tol = 5 * math.sqrt(keep_fraction * (1 - keep_fraction) / dim)
    np.testing.assert_allclose(kept, keep_fraction, rtol=0, atol=tol)
    assert np.all(np.diff(payload.indices) > 0)
    assert payload.indices.dtype == np.int32


@pytest.mark.parametrize(
    ("dim", "keep_fraction", "expected"),
    [(10, 0.25, 3), (10, 0.3, 3), (7, 1.0, 7), (1000, 0.001, 1), (1000, 1e-6, 1)],
    ids=["ceil", "float-noise", "all", "exact", "at-least-one"],
)
def test_topk_count_is_ceil_p_d(dim: int, keep_fraction: float, expected: int) -> None:
    assert topk_count(dim, keep_fraction) == expected


def test_topk_keeps_largest_magnitudes_without_rescale() -> None:
    # Arrange
    rng = np.random.default_rng(5)
    vector = rng.normal(size=1000).astype(np.float32)
    # Act
    payload = topk_sparsify(vector, keep_fraction=0.05)
    # Assert: oracle via a full sort
    expected = np.sort(np.argsort(-np.abs(vector))[:50])
    assert payload.indices is not None
    np.testing.assert_array_equal(payload.indices, expected)
    assert payload.scale == 1.0
    np.testing.assert_array_equal(payload.to_dense()[expected], vector[expected])


def test_invalid_fraction_raises() -> None:
    with pytest.raises(ValueError, match=r"keep_fraction must be in \(0, 1\], got 0.0"):
        random_sparsify(np.ones(3), keep_fraction=0.0, rng=np.random.default_rng(0))
