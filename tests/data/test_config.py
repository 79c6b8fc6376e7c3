from __future__ import annotations

import pydantic
import pytest

from rayfl.data import DataConfig


def test_defaults_are_a_quick_offline_run():
    # Act
    config = DataConfig()
    # Assert
    assert (config.dataset, config.num_clients, config.partition) == (
        "digits",
        20,
        "iid",
    )
    assert (config.pool, config.test_fraction, config.alpha) == ("all", 0.25, 0.5)
    assert config.shard_size is None and config.max_samples_per_client is None


def test_every_field_has_a_description():
    missing = [n for n, f in DataConfig.model_fields.items() if not f.description]
    assert missing == []


def test_config_is_frozen_and_forbids_unknown_keys():
    config = DataConfig()
    with pytest.raises(pydantic.ValidationError):
        config.num_clients = 3
    with pytest.raises(pydantic.ValidationError, match="num_client"):
        DataConfig(num_client=3)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("test_fraction", 1.2, r"data.test_fraction must be in \(0, 1\), got 1.2"),
        ("test_fraction", 0.0, r"data.test_fraction must be in \(0, 1\), got 0.0"),
        ("num_clients", 0, "data.num_clients must be ≥ 1, got 0"),
        ("alpha", -0.1, "data.alpha must be > 0, got -0.1"),
        ("alpha", float("nan"), "alpha\n  Input should be a finite number"),
        ("min_partition_size", -1, "data.min_partition_size must be ≥ 0"),
        ("num_shards_per_partition", 0, "data.num_shards_per_partition must be ≥ 1"),
        ("shard_size", 0, "data.shard_size must be ≥ 1 or null, got 0"),
        ("classes_per_client", 0, "data.classes_per_client must be ≥ 1"),
        ("size_sigma", 0.0, "data.size_sigma must be > 0"),
        ("max_samples_per_client", 1, "data.max_samples_per_client must be ≥ 2"),
        ("synthetic_alpha", -1.0, "data.synthetic_alpha must be ≥ 0"),
        ("synthetic_beta", -1.0, "data.synthetic_beta must be ≥ 0"),
    ],
    ids=lambda v: str(v)[:24],
)
def test_out_of_range_values_name_the_field(field, value, message):
    with pytest.raises(pydantic.ValidationError, match=message):
        DataConfig(**{field: value})


@pytest.mark.parametrize(
    ("field", "value"),
    [("dataset", "imagenet"), ("partition", "label_skew"), ("pool", "test")],
    ids=["dataset", "partition", "pool"],
)
def test_bad_literal_lists_allowed_values(field, value):
    with pytest.raises(pydantic.ValidationError) as info:
        DataConfig(**{field: value})
    assert field in str(info.value) and "Input should be" in str(info.value)


def test_valid_non_default_config_round_trips():
    # Arrange
    values = {
        "dataset": "fashion_mnist",
        "partition": "dirichlet",
        "alpha": 0.1,
        "max_samples_per_client": 100,
        "shard_size": 30,
    }
    # Act
    config = DataConfig(**values)
    # Assert
    assert DataConfig(**config.model_dump()) == config
