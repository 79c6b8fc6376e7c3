"""Datasets (real, from local files, and FedProx synthetic), partitioners, layout."""

from rayfl.data.config import DataConfig
from rayfl.data.datasets import (
    DATASET_NAMES,
    ArrayDataset,
    DatasetError,
    available_datasets,
    cifar10,
    digits,
    fashion_mnist,
    load_dataset,
    mnist,
)
from rayfl.data.federated import PARTITION_PURPOSE, FederatedData, build_federated
from rayfl.data.partition import (
    dirichlet_partition,
    iid_partition,
    pathological_partition,
    shard_partition,
    size_skew_partition,
    train_test_split_per_client,
)
from rayfl.data.synthetic import make_synthetic

__all__ = [
    "DATASET_NAMES",
    "PARTITION_PURPOSE",
    "ArrayDataset",
    "DataConfig",
    "DatasetError",
    "FederatedData",
    "available_datasets",
    "build_federated",
    "cifar10",
    "digits",
    "dirichlet_partition",
    "fashion_mnist",
    "iid_partition",
    "load_dataset",
    "make_synthetic",
    "mnist",
    "pathological_partition",
    "shard_partition",
    "size_skew_partition",
    "train_test_split_per_client",
]
