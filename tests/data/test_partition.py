from __future__ import annotations

import numpy as np
import pytest

from rayfl.data import (
    dirichlet_partition,
    iid_partition,
    pathological_partition,
    shard_partition,
    size_skew_partition,
    train_test_split_per_client,
)

NUM_CLASSES = 10
LABELS = np.repeat(np.arange(NUM_CLASSES), 200)  # 2000 samples, 200 per class


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def mean_tv_to_global(labels: np.ndarray, parts: list[np.ndarray]) -> float:
    """Mean total-variation distance of client label distributions to the pool's."""
    pooled = np.bincount(labels, minlength=NUM_CLASSES) / labels.size
    local = np.array([np.bincount(labels[p], minlength=NUM_CLASSES) for p in parts])
    local = local / local.sum(axis=1, keepdims=True)
    return float(0.5 * np.abs(local - pooled).sum(axis=1).mean())


PARTITIONERS = {
    "iid": lambda r: iid_partition(LABELS.size, num_clients=20, rng=r),
    "dirichlet": lambda r: dirichlet_partition(
        LABELS, num_clients=20, alpha=0.5, rng=r
    ),
    "dirichlet-balanced": lambda r: dirichlet_partition(
        LABELS, num_clients=20, alpha=0.5, self_balancing=True, rng=r
    ),
    "shards": lambda r: shard_partition(
        LABELS, num_clients=20, num_shards_per_partition=2, shard_size=40, rng=r
    ),
    "pathological": lambda r: pathological_partition(
        LABELS, num_clients=20, classes_per_client=2, rng=r
    ),
    "size-lognormal": lambda r: size_skew_partition(
        LABELS.size, num_clients=20, rng=r, distribution="lognormal"
    ),
    "size-linear": lambda r: size_skew_partition(
        LABELS.size, num_clients=20, rng=r, distribution="linear"
    ),
}
COVERING = {
    "iid",
    "dirichlet",
    "dirichlet-balanced",
    "pathological",
    "size-lognormal",
    "size-linear",
}


@pytest.mark.parametrize("name", list(PARTITIONERS), ids=list(PARTITIONERS))
def test_partitions_are_disjoint_int64_and_deterministic(name):
    # Act
    parts = PARTITIONERS[name](rng(1))
    again = PARTITIONERS[name](rng(1))
    other = PARTITIONERS[name](rng(2))
    # Assert
    assert len(parts) == 20
    assert all(p.dtype == np.int64 and p.ndim == 1 for p in parts)
    merged = np.concatenate(parts)
    assert np.unique(merged).size == merged.size  # disjoint
    assert merged.min() >= 0 and merged.max() < LABELS.size
    if name in COVERING:
        np.testing.assert_array_equal(np.sort(merged), np.arange(LABELS.size))
    for a, b in zip(parts, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(parts, other, strict=True))


@pytest.mark.parametrize(
    ("num_samples", "num_clients"),
    [(2000, 20), (2003, 20), (7, 7), (10, 3)],
    ids=["even", "remainder", "one-each", "small"],
)
def test_iid_sizes_differ_by_at_most_one(num_samples, num_clients):
    # Act
    parts = iid_partition(num_samples, num_clients=num_clients, rng=rng())
    # Assert
    sizes = np.array([p.size for p in parts])
    assert sizes.sum() == num_samples and sizes.max() - sizes.min() <= 1


def test_iid_label_histograms_near_global():
    # Act
    parts = iid_partition(LABELS.size, num_clients=10, rng=rng())
    # Assert: 200 samples per client, each class ~20 ± sampling noise
    assert mean_tv_to_global(LABELS, parts) < 0.15


def test_iid_rejects_more_clients_than_samples():
    with pytest.raises(ValueError, match="num_clients"):
        iid_partition(3, num_clients=4, rng=rng())


def test_dirichlet_small_alpha_is_far_more_heterogeneous():
    # Act
    skewed = dirichlet_partition(
        LABELS, num_clients=20, alpha=0.1, min_partition_size=5, rng=rng()
    )
    near_iid = dirichlet_partition(LABELS, num_clients=20, alpha=100.0, rng=rng())
    # Assert
    tv_skewed = mean_tv_to_global(LABELS, skewed)
    tv_near_iid = mean_tv_to_global(LABELS, near_iid)
    assert tv_skewed > 0.5
    assert tv_near_iid < 0.15
    assert tv_skewed > 4 * tv_near_iid


@pytest.mark.parametrize("min_size", [10, 40, 60], ids=["min10", "min40", "min60"])
def test_dirichlet_respects_min_partition_size(min_size):
    # Act
    parts = dirichlet_partition(
        LABELS, num_clients=20, alpha=5.0, min_partition_size=min_size, rng=rng()
    )
    # Assert
    assert min(p.size for p in parts) >= min_size


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alpha": 0.01, "min_partition_size": 99}, "smaller min_partition_size"),
        ({"alpha": 1.0, "min_partition_size": 101}, "lower min_partition_size"),
        ({"alpha": 0.0}, "alpha must be > 0"),
    ],
    ids=["unlucky-draws", "too-few-samples", "bad-alpha"],
)
def test_dirichlet_impossible_raises_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        dirichlet_partition(LABELS, num_clients=20, rng=rng(), max_retries=3, **kwargs)


def test_shards_exact_sizes_and_few_classes():
    # Act: 200 per class / shard_size 50 ⇒ no shard straddles two classes
    parts = shard_partition(
        LABELS, num_clients=20, num_shards_per_partition=2, shard_size=50, rng=rng()
    )
    # Assert
    assert all(p.size == 2 * 50 for p in parts)
    assert all(np.unique(LABELS[p]).size <= 2 for p in parts)
    class_counts = [np.bincount(LABELS[p], minlength=NUM_CLASSES) for p in parts]
    assert all(set(np.unique(c)) <= {0, 50, 100} for c in class_counts)


def test_shards_auto_size_uses_pool():
    # Act
    parts = shard_partition(
        LABELS, num_clients=8, num_shards_per_partition=3, shard_size=None, rng=rng()
    )
    # Assert: 2000 // 24 = 83 per shard
    assert all(p.size == 3 * 83 for p in parts)


def test_shards_not_enough_samples_raises():
    with pytest.raises(ValueError, match="pool has 2000"):
        shard_partition(
            LABELS, num_clients=20, num_shards_per_partition=2, shard_size=51, rng=rng()
        )


@pytest.mark.parametrize(
    ("num_clients", "classes_per_client"),
    [(20, 2), (10, 3), (7, 10), (3, 1)],
    ids=["seed000-20x2", "10x3", "7x10", "3x1"],
)
def test_pathological_exact_classes_balanced(num_clients, classes_per_client):
    # Act
    parts = pathological_partition(
        LABELS,
        num_clients=num_clients,
        classes_per_client=classes_per_client,
        rng=rng(),
    )
    # Assert
    assert all(np.unique(LABELS[p]).size == classes_per_client for p in parts)
    for p in parts:  # balanced: each held class contributes an equal share (±1)
        counts = np.bincount(LABELS[p])
        counts = counts[counts > 0]
        assert counts.max() - counts.min() <= 1


def test_pathological_seed000_layout_gives_equal_clients():
    # Act: 20 clients × 2 of 10 classes ⇒ every class over 4 clients, 50 each
    parts = pathological_partition(
        LABELS, num_clients=20, classes_per_client=2, rng=rng()
    )
    # Assert
    np.testing.assert_array_equal([p.size for p in parts], 100)


def test_pathological_rejects_too_many_classes():
    with pytest.raises(ValueError, match=r"classes_per_client must be in \[1, 10\]"):
        pathological_partition(LABELS, num_clients=4, classes_per_client=11, rng=rng())


@pytest.mark.parametrize(
    ("num_samples", "num_clients"),
    [(2100, 20), (2000, 20), (55, 10)],
    ids=["exact", "rounded", "minimal"],
)
def test_size_skew_linear_proportional_to_index(num_samples, num_clients):
    # Act
    parts = size_skew_partition(
        num_samples, num_clients=num_clients, rng=rng(), distribution="linear"
    )
    # Assert
    sizes = np.array([p.size for p in parts])
    ideal = (
        num_samples
        * np.arange(1, num_clients + 1)
        / (num_clients * (num_clients + 1) / 2)
    )
    np.testing.assert_allclose(sizes, ideal, atol=1.0)
    assert sizes.sum() == num_samples


def test_size_skew_lognormal_varies_and_sums():
    # Act
    parts = size_skew_partition(
        LABELS.size, num_clients=50, rng=rng(), distribution="lognormal", sigma=1.0
    )
    # Assert
    sizes = np.array([p.size for p in parts])
    assert sizes.sum() == LABELS.size and sizes.min() >= 1
    assert sizes.std() / sizes.mean() > 0.3


def test_size_skew_every_client_gets_a_sample():
    # Act: σ = 4 makes most weights tiny
    parts = size_skew_partition(60, num_clients=50, rng=rng(), sigma=4.0)
    # Assert
    assert min(p.size for p in parts) >= 1 and sum(p.size for p in parts) == 60


@pytest.mark.parametrize(
    ("sizes", "fraction", "expected_test"),
    [
        ([100, 40, 8], 0.25, [25, 10, 2]),
        ([3500], 0.25, [875]),
        ([2, 3], 0.25, [1, 1]),
        ([10], 0.99, [9]),
        ([1, 0], 0.25, [0, 0]),
    ],
    ids=["papers-75-25", "seed001-3500", "tiny-clients", "clamped-high", "degenerate"],
)
def test_train_test_split_per_client(sizes, fraction, expected_test):
    # Arrange
    starts = np.cumsum([0, *sizes[:-1]])
    indices = [np.arange(s, s + n) for s, n in zip(starts, sizes, strict=True)]
    # Act
    train, test = train_test_split_per_client(
        indices, test_fraction=fraction, rng=rng()
    )
    # Assert
    np.testing.assert_array_equal([t.size for t in test], expected_test)
    for client, tr, te in zip(indices, train, test, strict=True):
        np.testing.assert_array_equal(np.sort(np.concatenate([tr, te])), client)
        assert tr.dtype == np.int64 and te.dtype == np.int64


def test_train_test_split_rejects_bad_fraction():
    with pytest.raises(ValueError, match=r"test_fraction must be in \(0, 1\), got 1.2"):
        train_test_split_per_client([np.arange(4)], test_fraction=1.2, rng=rng())
