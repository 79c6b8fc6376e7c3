"""Oracle tests for rayfl.wireless.units (hand values of the dB/dBm definitions)."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import rayfl.wireless.units as units_module
from rayfl.wireless.units import (
    db_to_linear,
    dbm_to_w,
    linear_to_db,
    power_levels_w,
    w_to_dbm,
)


@pytest.mark.parametrize(
    ("power_dbm", "power_w"),
    [(30.0, 1.0), (0.0, 1e-3), (-30.0, 1e-6), (23.0, 0.19952623149688797)],
    ids=["30dBm=1W", "0dBm=1mW", "-30dBm=1uW", "23dBm=0.1995W"],
)
def test_dbm_to_w_hand_values(power_dbm: float, power_w: float) -> None:
    # Act
    result = dbm_to_w(power_dbm)
    # Assert
    np.testing.assert_allclose(result, power_w, rtol=1e-12)


@pytest.mark.parametrize(
    "power_dbm",
    [np.array([-169.0, -109.0, 0.0, 23.0, 46.5])],
    ids=["mixed"],
)
def test_dbm_w_round_trip(power_dbm: np.ndarray) -> None:
    # Act
    back = w_to_dbm(dbm_to_w(power_dbm))
    # Assert
    np.testing.assert_allclose(back, power_dbm, rtol=0, atol=1e-9)


@pytest.mark.parametrize(
    ("value_db", "value_linear"),
    [(0.0, 1.0), (10.0, 10.0), (-30.0, 1e-3), (3.0, 1.9952623149688795)],
    ids=["0dB", "10dB", "-30dB", "3dB"],
)
def test_db_linear_hand_values_and_inverse(
    value_db: float, value_linear: float
) -> None:
    # Act
    linear = db_to_linear(value_db)
    back = linear_to_db(linear)
    # Assert
    np.testing.assert_allclose(linear, value_linear, rtol=1e-12)
    np.testing.assert_allclose(back, value_db, rtol=0, atol=1e-12)


def test_zero_watts_is_minus_infinity_dbm_without_warning() -> None:
    # Act
    with np.errstate(all="raise"):
        result = w_to_dbm(0.0)
    # Assert
    assert result == -np.inf


def test_power_levels_are_equal_fractions_of_max() -> None:
    # Act
    levels = power_levels_w(tx_power_dbm=23.0, power_levels=3)
    # Assert
    np.testing.assert_allclose(levels, 0.19952623149688797 * np.array([1, 2, 3]) / 3)


def test_power_levels_rejects_zero() -> None:
    with pytest.raises(ValueError, match="power_levels"):
        power_levels_w(tx_power_dbm=23.0, power_levels=0)


def test_docstring_examples() -> None:
    result = doctest.testmod(units_module)
    assert result.attempted > 0 and result.failed == 0
