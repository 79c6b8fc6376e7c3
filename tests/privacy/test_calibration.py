from __future__ import annotations

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp

from rayfl.privacy.calibration import calibrate_noise_std, nominal_epsilon
from rayfl.privacy.config import PrivacyConfig


def _config(**fields: object) -> PrivacyConfig:
    base: dict[str, object] = {
        "mechanism": "gaussian",
        "clip_norm": 20.0,
        "epsilon": 1.0,
    }
    base.update(fields)
    return PrivacyConfig(**base)


@pytest.mark.parametrize(
    "config",
    [PrivacyConfig(), _config(epsilon=None)],
    ids=["mechanism-none", "epsilon-inf"],
)
def test_no_noise_cases_give_zero(config: PrivacyConfig) -> None:
    assert calibrate_noise_std(config, releases=10) == 0.0


def test_overrides_take_precedence() -> None:
    # noise_std wins over everything; noise_multiplier scales Δ = 2C (C = 20)
    assert calibrate_noise_std(_config(noise_std=0.006, noise_multiplier=3.0)) == 0.006
    assert calibrate_noise_std(_config(noise_multiplier=0.5)) == 20.0
    assert calibrate_noise_std(_config(noise_multiplier=0.5), sensitivity=2.0) == 1.0


def test_dp_ditto_calibration_gives_spec_hand_value() -> None:
    # seed 001 §5: C=20, eps=1, T=10, |D_n|=2625, N=20, delta=0.01 -> 3.27e-2
    config = _config(calibration="dp_ditto", delta=0.01)
    value = calibrate_noise_std(config, releases=10, dataset_size=2625, num_clients=20)
    np.testing.assert_allclose(value, 3.27e-2, rtol=6e-3)


def test_wpfl_calibration_uses_max_uploads_and_bits() -> None:
    # seed 000 Table II, DNN, T0 = 20: spec recomputation 0.0172
    config = _config(
        mechanism="quantized_gaussian",
        clip_norm=7.0,
        calibration="wpfl",
        delta=1e-3,
        calibration_sample_rate=0.01,
        max_uploads=20,
    )
    np.testing.assert_allclose(
        calibrate_noise_std(config, quantize_bits=16), 0.0172, rtol=0.01
    )


def test_sparse_calibration_uses_sigma_hat() -> None:
    config = _config(calibration="sparse", noise_multiplier=0.6, clip_norm=1.0)
    value = calibrate_noise_std(config, keep_fraction=0.25, batch_size=8)
    np.testing.assert_allclose(value, 0.6 * 0.5 * 1.0 / 8, rtol=1e-12)


def test_accountant_calibration_meets_target_epsilon() -> None:
    # Arrange
    config = _config(epsilon=4.0, clip_norm=2.0)
    # Act
    sigma = calibrate_noise_std(config, releases=200)
    # Assert: an independent dp-accounting run at z = sigma / (2C), q = 1
    # (no record is sampled in a whole-update release) gives eps = 4
    accountant = rdp.RdpAccountant()
    accountant.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.GaussianDpEvent(sigma / 4.0), 200
        )
    )
    np.testing.assert_allclose(accountant.get_epsilon(1e-5), 4.0, rtol=1e-3)


@pytest.mark.parametrize(
    ("fields", "kwargs", "message"),
    [
        ({}, {}, "needs the planned number of releases"),
        (
            {"calibration": "dp_ditto"},
            {"releases": 5},
            "needs dataset_size and num_clients",
        ),
        ({"calibration": "wpfl"}, {"releases": 5}, r"needs quantize_bits \(R\)"),
    ],
    ids=["no-releases", "ditto-missing", "wpfl-missing"],
)
def test_missing_inputs_raise(
    fields: dict[str, object], kwargs: dict[str, int], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        calibrate_noise_std(_config(**fields), **kwargs)


@pytest.mark.parametrize(
    ("calibration", "expected"),
    [("wpfl", [0.0, 0.25, 0.5, 1.0]), ("dp_ditto", [0.0, 0.5, 2**-0.5, 1.0])],
    ids=["wpfl-linear", "ditto-sqrt"],
)
def test_nominal_epsilon_hand_values(calibration: str, expected: list[float]) -> None:
    value = nominal_epsilon(
        [0, 5, 10, 20],
        calibration=calibration,
        epsilon=1.0,
        planned_uploads=20,  # type: ignore[arg-type]
    )
    np.testing.assert_allclose(value, expected, rtol=1e-12)


def test_nominal_epsilon_rejects_accountant_calibration() -> None:
    with pytest.raises(ValueError, match="no closed-form nominal epsilon"):
        nominal_epsilon([1], calibration="accountant", epsilon=1.0, planned_uploads=1)  # type: ignore[arg-type]
