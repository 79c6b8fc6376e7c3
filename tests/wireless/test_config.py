"""Tests for WirelessConfig: Table I defaults (seed_000 §6.1) and clear errors."""

from __future__ import annotations

import doctest

import pytest
from pydantic import ValidationError

import rayfl.wireless.config as config_module
from rayfl.wireless.config import WirelessConfig


def test_defaults_match_seed_000_table_1() -> None:
    # Act
    config = WirelessConfig()
    # Assert: every number printed in seed_000 §6.1 / §2.1.
    assert config.num_subchannels == 10
    assert config.bandwidth_hz == 1e6
    assert config.noise_psd_dbm_hz == -169.0
    assert config.tx_power_dbm == 23.0
    assert config.bs_tx_power_dbm == 30.0
    assert (config.distance_min_m, config.distance_max_m) == (10.0, 100.0)
    assert (config.path_loss_ref_db, config.path_loss_exponent) == (30.0, 2.8)
    assert config.fading == "rayleigh"
    assert config.qam_order == 256


def test_every_field_has_a_description() -> None:
    # Act
    missing = [
        name
        for name, field in WirelessConfig.model_fields.items()
        if not field.description
    ]
    # Assert
    assert missing == []


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("fading", "rayleig", ["rayleigh", "rician", "none"]),
        ("effects", "flip", ["none", "bit_flip", "packet_loss"]),
        ("qam_order", 8, ["4", "16", "64", "256", "1024"]),
    ],
    ids=["fading", "effects", "qam_order"],
)
def test_bad_literal_names_field_and_allowed_values(
    field: str, value: object, allowed: list[str]
) -> None:
    # Act
    with pytest.raises(ValidationError) as info:
        WirelessConfig(**{field: value})
    # Assert
    message = str(info.value)
    assert field in message
    for option in allowed:
        assert option in message


def test_distance_min_not_below_max_names_both_fields() -> None:
    # Act
    with pytest.raises(ValidationError) as info:
        WirelessConfig(distance_min_m=600, distance_max_m=500)
    # Assert
    assert "wireless.distance_min_m must be < distance_max_m, got 600 >= 500" in str(
        info.value
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("bandwidth_hz", -1.0),
        ("num_subchannels", 0),
        ("power_levels", 0),
        ("shadowing_std_db", -1.0),
        ("max_latency_s", 0.0),
    ],
    ids=["bandwidth", "subchannels", "power_levels", "shadowing", "latency"],
)
def test_out_of_range_value_names_the_field(field: str, value: float) -> None:
    with pytest.raises(ValidationError, match=field):
        WirelessConfig(**{field: value})


def test_unknown_field_is_rejected() -> None:
    with pytest.raises(ValidationError, match="bandwith_hz"):
        WirelessConfig(bandwith_hz=1e6)


def test_config_is_frozen() -> None:
    # Arrange
    config = WirelessConfig()
    # Act / Assert
    with pytest.raises(ValidationError):
        config.num_subchannels = 3  # type: ignore[misc]


def test_docstring_examples() -> None:
    result = doctest.testmod(config_module)
    assert result.attempted > 0 and result.failed == 0
