from __future__ import annotations

import pickle

import numpy as np
import pytest

from rayfl.data import (
    DataConfig,
    DatasetError,
    FederatedData,
    build_federated,
    load_dataset,
)

PARTITIONS = ["iid", "dirichlet", "shards", "pathological", "size_skew"]


def build(seed: int = 0, **overrides) -> FederatedData:
    return build_federated(DataConfig(**overrides), seed=seed)


@pytest.mark.parametrize("partition", PARTITIONS, ids=PARTITIONS)
def test_slices_tile_the_arrays(partition):
    # Act
    data = build(partition=partition)
    # Assert
    bounds = np.stack([data.train_slices, data.test_slices], axis=1).reshape(-1, 2)
    assert bounds[0, 0] == 0 and bounds[-1, 1] == len(data.y) == len(data.x)
    np.testing.assert_array_equal(bounds[1:, 0], bounds[:-1, 1])
    assert data.train_slices.dtype == np.int64 and data.test_slices.shape == (20, 2)
    assert data.x.dtype == np.float32 and data.y.dtype == np.int64
    assert data.input_shape == (1, 8, 8) and data.num_clients == 20
    assert (data.num_train > 0).all() and (data.num_test > 0).all()


@pytest.mark.parametrize("partition", PARTITIONS, ids=PARTITIONS)
def test_per_client_split_is_75_25(partition):
    # Act
    data = build(partition=partition)
    # Assert
    sizes = data.num_train + data.num_test
    np.testing.assert_allclose(data.num_test, 0.25 * sizes, atol=1.0)


def test_pool_all_uses_every_sample_once():
    # Arrange
    train, test = load_dataset("digits")
    pool = np.concatenate([train.x, test.x]).reshape(len(train) + len(test), -1)
    # Act
    data = build(partition="iid")
    # Assert: same multiset of samples (rows sorted lexicographically)
    rows = data.x.reshape(len(data.y), -1)
    np.testing.assert_allclose(
        rows[np.lexsort(rows.T)], pool[np.lexsort(pool.T)], rtol=0, atol=0
    )
    np.testing.assert_array_equal(
        np.bincount(data.y), np.bincount(np.concatenate([train.y, test.y]))
    )


def test_pool_train_uses_only_the_official_train_set():
    # Act
    data = build(pool="train")
    # Assert
    assert len(data.y) == len(load_dataset("digits")[0])


def test_same_seed_same_data_other_seed_differs():
    # Act
    first, again, other = (
        build(7, partition="dirichlet"),
        build(7, partition="dirichlet"),
        build(8, partition="dirichlet"),
    )
    # Assert
    np.testing.assert_array_equal(first.x, again.x)
    np.testing.assert_array_equal(first.train_slices, again.train_slices)
    assert not np.array_equal(first.y, other.y)


def test_views_share_memory_and_are_read_only():
    # Arrange
    data = build()
    # Act
    x_train, y_train = data.train(3)
    x_test, y_test = data.test(3)
    # Assert
    assert np.shares_memory(x_train, data.x) and np.shares_memory(y_test, data.y)
    start, stop = data.test_slices[3]
    np.testing.assert_array_equal(y_test, data.y[start:stop])
    assert len(x_train) == data.num_train[3] and len(x_test) == data.num_test[3]
    with pytest.raises(ValueError, match="read-only"):
        x_train[0] = 0.0


def test_pickle_round_trip_keeps_layout():
    # Arrange (Ray serializes dataclasses of numpy arrays with pickle 5)
    data = build()
    # Act
    copy = pickle.loads(pickle.dumps(data, protocol=5))
    # Assert
    np.testing.assert_array_equal(copy.test(5)[1], data.test(5)[1])
    assert copy.summary() == data.summary()


def test_label_counts_and_summary():
    # Arrange
    data = build(partition="pathological", classes_per_client=2)
    # Act
    train_counts = data.label_counts()
    all_counts = data.label_counts("all")
    summary = data.summary()
    # Assert
    np.testing.assert_array_equal(train_counts.sum(axis=1), data.num_train)
    np.testing.assert_array_equal(all_counts, train_counts + data.label_counts("test"))
    assert ((all_counts > 0).sum(axis=1) == 2).all()
    assert summary["num_clients"] == 20 and summary["total_samples"] == 1797
    np.testing.assert_allclose(summary["label_skew_tv"], 0.8, atol=0.05)


def test_max_samples_per_client_caps_before_split():
    # Act
    data = build(partition="size_skew", max_samples_per_client=40)
    # Assert
    sizes = data.num_train + data.num_test
    assert sizes.max() == 40
    np.testing.assert_array_equal(data.num_test[sizes == 40], 10)


def test_synthetic_layout():
    # Act
    data = build(dataset="synthetic", num_clients=10, max_samples_per_client=200)
    # Assert
    sizes = data.num_train + data.num_test
    assert data.input_shape == (60,) and data.num_classes == 10
    assert sizes.min() >= 50 and sizes.max() <= 200
    assert data.name == "synthetic(1,1)"


def test_client_without_test_sample_is_named():
    # Arrange: 1797 digits over 1000 iid clients ⇒ some clients hold 1 sample
    config = DataConfig(num_clients=1000)
    # Act / Assert
    with pytest.raises(DatasetError, match=r"client \d+ has 1 sample\(s\)") as info:
        build_federated(config, seed=0)
    assert "data.num_clients" in str(info.value)


def test_impossible_partition_names_the_config_field():
    # Arrange
    config = DataConfig(partition="shards", shard_size=1000)
    # Act / Assert
    with pytest.raises(DatasetError, match="data.partition=shards on digits"):
        build_federated(config, seed=0)


def test_missing_dataset_propagates_dataset_error(tmp_path):
    with pytest.raises(DatasetError, match="cifar-10-batches-py"):
        build_federated(DataConfig(dataset="cifar10", root=str(tmp_path)), seed=0)


def test_fashion_mnist_seed000_layout():
    # Arrange
    try:
        load_dataset("fashion_mnist")
    except DatasetError:
        pytest.skip("dataset-fashion-mnist not installed")
    # Act: spec seed_000 §6.2, pathological 2 classes, 20 clients, merged pool
    data = build(dataset="fashion_mnist", partition="pathological")
    # Assert: 70000 / 20 = 3500 per client, 2625 / 875
    np.testing.assert_array_equal(data.num_train, 2625)
    np.testing.assert_array_equal(data.num_test, 875)
