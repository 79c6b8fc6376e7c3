from __future__ import annotations

import numpy as np
import pytest

from rayfl.privacy.clip import clip_by_l2_norm, clip_scale


@pytest.mark.parametrize("scale", [0.1, 1.0, 10.0, 1e4], ids=lambda s: f"norm~{s}")
def test_clip_bounds_norm_and_keeps_direction(scale: float) -> None:
    # Arrange
    rng = np.random.default_rng(0)
    vector = (rng.normal(size=1000) * scale).astype(np.float32)
    clip_norm = 3.0
    # Act
    clipped, norm = clip_by_l2_norm(vector, clip_norm=clip_norm)
    # Assert: oracle norm from numpy; scale = min(1, C/||u||) (seed 000 eq. 2)
    expected_norm = float(np.linalg.norm(vector.astype(np.float64)))
    np.testing.assert_allclose(norm, expected_norm, rtol=1e-12)
    np.testing.assert_allclose(
        clipped, vector * min(1.0, clip_norm / expected_norm), rtol=1e-6, atol=1e-12
    )
    assert np.linalg.norm(clipped.astype(np.float64)) <= clip_norm * (1 + 1e-6)


def test_zero_vector_is_returned_unchanged() -> None:
    clipped, norm = clip_by_l2_norm(np.zeros(4), clip_norm=1.0)
    assert norm == 0.0
    assert clipped.tolist() == [0.0] * 4
    assert clip_scale(0.0, clip_norm=1.0) == 1.0


def test_per_layer_clip_bounds_each_layer_and_total() -> None:
    # Arrange: three layers, one empty-free split of 10 coordinates
    rng = np.random.default_rng(1)
    vector = rng.normal(size=10) * 5
    offsets = [0, 2, 7, 10]
    # Act
    clipped, norm = clip_by_l2_norm(vector, clip_norm=1.0, offsets=offsets)
    # Assert: each layer <= C/sqrt(3); the total <= C
    for start, stop in zip(offsets[:-1], offsets[1:], strict=True):
        assert np.linalg.norm(clipped[start:stop]) <= (1 / np.sqrt(3)) * (1 + 1e-6)
    assert np.linalg.norm(clipped) <= 1 + 1e-6
    np.testing.assert_allclose(norm, np.linalg.norm(vector), rtol=1e-12)


@pytest.mark.parametrize(
    "offsets",
    [[1, 10], [0, 5], [0, 6, 4, 10], [0]],
    ids=["no-zero", "short", "decreasing", "single"],
)
def test_bad_offsets_raise(offsets: list[int]) -> None:
    with pytest.raises(ValueError, match="offsets must increase from 0 to len"):
        clip_by_l2_norm(np.ones(10), clip_norm=1.0, offsets=offsets)


def test_non_positive_clip_norm_raises() -> None:
    with pytest.raises(ValueError, match="clip_norm must be > 0, got 0.0"):
        clip_by_l2_norm(np.ones(3), clip_norm=0.0)


def test_per_layer_clip_of_a_diverged_model_clips_every_layer() -> None:
    # a huge first layer must not hide the second one's norm (cumsum cancellation)
    x = np.array([1e35, 1e35, 1e18, 1e18], np.float32)
    clipped, _ = clip_by_l2_norm(x, clip_norm=20.0, offsets=[0, 2, 4])
    assert np.linalg.norm(clipped.astype(np.float64)) <= 20.0 * (1 + 1e-6)
