"""Seed 000's DP-mechanism baselines: each σ against an independent value."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from rayfl.config import load_config
from rayfl.privacy.wpfl_mechanisms import (
    ma_noise_std,
    mechanism_noise,
    nbafl_noise_std,
)
from rayfl.uplink import UplinkModel


def test_nbafl_matches_the_spec_example() -> None:
    # Spec [AMBIG-11]: DNN, C = 7, m ≈ 2,625, ε = 1, δ = 1e-3, T0 = 20 → σ ≈ 0.40.
    sigma = nbafl_noise_std(
        epsilon=1.0, delta=1e-3, max_uploads=20, sensitivity=2 * 7 / 2625
    )
    np.testing.assert_allclose(sigma, 0.40, rtol=0.01)


def test_nbafl_is_linear_in_t0_and_inverse_in_epsilon() -> None:
    base = nbafl_noise_std(epsilon=1.0, delta=1e-3, max_uploads=10, sensitivity=0.01)
    np.testing.assert_allclose(
        nbafl_noise_std(epsilon=0.5, delta=1e-3, max_uploads=30, sensitivity=0.01),
        6 * base,
        rtol=1e-12,
    )
    # closed form c = sqrt(2 ln(1.25/δ)) by hand: sqrt(2 ln 1250) = 3.7767
    np.testing.assert_allclose(base, 3.7767 * 10 * 0.01, rtol=1e-4)


def test_ma_matches_opacus_accountant() -> None:
    epsilon, delta, t0 = 1.0, 5e-3, 20  # CNN setting of Table I
    opacus_utils = pytest.importorskip("opacus.accountants.utils")
    sensitivity = 2 * 20 / 2625
    ours = ma_noise_std(
        epsilon=epsilon,
        delta=delta,
        max_uploads=t0,
        sample_rate=0.01,
        sensitivity=sensitivity,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = opacus_utils.get_noise_multiplier(
            target_epsilon=epsilon,
            target_delta=delta,
            sample_rate=0.01,
            steps=t0,
            accountant="rdp",
        )
    np.testing.assert_allclose(ours, z * sensitivity, rtol=0.03)


def test_mechanism_noise_cases() -> None:
    kw = dict(
        epsilon=1.0,
        delta=1e-3,
        max_uploads=20,
        clip_norm=7.0,
        num_train=[3000, 2625, 2800],
        sample_rate=0.01,
    )
    gauss = mechanism_noise("gaussian", **kw)
    assert gauss.sensitivity == pytest.approx(2 * 7 / 2625)  # smallest client
    assert mechanism_noise("perfect_gaussian", **kw) == gauss
    assert mechanism_noise("none", **kw).noise_std == 0.0
    clip = mechanism_noise("gaussian", **kw, sensitivity="clip")
    np.testing.assert_allclose(clip.noise_std / gauss.noise_std, 2625 / 2, rtol=1e-12)
    assert mechanism_noise("ma", **kw).noise_std < gauss.noise_std
    with pytest.raises(ValueError, match="mechanism must be one of"):
        mechanism_noise("laplace", **kw)


def _config(mechanism: str, **extra: object) -> object:
    tree = {
        "data": {"dataset": "digits", "num_clients": 4},
        "algorithm": {"kind": "wpfl", "dp_mechanism": mechanism},
        "wireless": {},
        "privacy": {
            "mechanism": "gaussian",
            "calibration": "wpfl",
            "epsilon": 1.0,
            "delta": 1e-3,
            "clip_norm": 7.0,
            "max_uploads": 20,
            "calibration_sample_rate": 0.01,
        },
        "compression": {"quantize_bits": 16},
    }
    return load_config(tree, extra)


@pytest.mark.parametrize("mechanism", ["proposed", "gaussian", "ma", "none"])
def test_uplink_model_uses_the_mechanism_sigma(mechanism: str) -> None:
    num_train = np.array([300, 250, 280, 310])
    uplink = UplinkModel(_config(mechanism), num_train=num_train)
    expected = {
        "proposed": 0.0172,  # Table II recomputation, DNN T0 = 20 (spec §6.3)
        "gaussian": nbafl_noise_std(
            epsilon=1.0, delta=1e-3, max_uploads=20, sensitivity=2 * 7 / 250
        ),
        "ma": ma_noise_std(
            epsilon=1.0,
            delta=1e-3,
            max_uploads=20,
            sample_rate=0.01,
            sensitivity=2 * 7 / 250,
        ),
        "none": 0.0,
    }[mechanism]
    np.testing.assert_allclose(uplink.noise_std, expected, rtol=2e-3, atol=1e-12)
    if mechanism in ("gaussian", "ma"):  # the ledger's z = σ/(2C), not σ/Δs
        np.testing.assert_allclose(uplink.noise_multiplier, expected / 14, rtol=1e-9)


def test_perfect_gaussian_needs_ideal_links() -> None:
    with pytest.raises(ValueError, match="perfect_gaussian"):
        UplinkModel(_config("perfect_gaussian"), num_train=[10, 10, 10, 10])
    ideal = _config(
        "perfect_gaussian",
        **{
            "compression.quantize_bits": None,
            "algorithm.downlink_bits": None,
            "wireless.effects": "none",
        },
    )
    uplink = UplinkModel(ideal, num_train=[10, 10, 10, 10])
    assert uplink.noise_std == pytest.approx(
        math.sqrt(2 * math.log(1.25e3)) * 20 * 2 * 7 / 10
    )
