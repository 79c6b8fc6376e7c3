from __future__ import annotations

import pydantic
import pytest
from pydantic import BaseModel

from rayfl.privacy.config import PrivacyConfig


class _Root(BaseModel):
    privacy: PrivacyConfig


def test_defaults_are_no_dp() -> None:
    config = PrivacyConfig()
    assert config.mechanism == "none"
    assert config.epsilon is None and config.delta == 1e-5
    assert config.calibration == "accountant" and config.accountant == "rdp"
    assert config.placement == "client" and config.sample_rate == 1.0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"epsilon": 0.0}, r"privacy.epsilon must be > 0 \(or null for ∞\), got 0.0"),
        ({"epsilon": -1.0}, r"privacy.epsilon must be > 0 \(or null for ∞\), got -1.0"),
        ({"delta": 1.5}, r"privacy.delta must be in \(0, 1\), got 1.5"),
        ({"delta": 0.0}, r"privacy.delta must be in \(0, 1\), got 0.0"),
        ({"clip_norm": -1.0}, r"privacy.clip_norm must be > 0, got -1.0"),
        (
            {"noise_multiplier": -0.5},
            r"privacy.noise_multiplier must be > 0 \(a Gaussian mechanism with no "
            r"noise is no DP; for none use privacy.mechanism: none\), got -0.5",
        ),
        ({"noise_std": -0.1}, r"privacy.noise_std must be > 0 .*, got -0.1"),
        (
            {"mechanism": "gaussian", "clip_norm": 1.0, "noise_multiplier": 0.0},
            r"privacy.noise_multiplier must be > 0 .*, got 0.0",
        ),
        (
            {"mechanism": "gaussian", "clip_norm": 1.0, "noise_std": 0.0},
            r"privacy.noise_std must be > 0 .*, got 0.0",
        ),
        (
            {"noise_std": 0.1},
            r"privacy.mechanism is 'none' \(no noise\) but the privacy section "
            r"sets noise_std=0.1: choose privacy.mechanism gaussian or "
            r"quantized_gaussian, or remove them",
        ),
        (
            {"noise_multiplier": 1.0, "epsilon": 4.0, "placement": "cloud"},
            r"sets noise_multiplier=1.0, epsilon=4.0, placement=cloud:",
        ),
        ({"calibration": "wpfl"}, r"'none' \(no noise\) .* calibration=wpfl:"),
        ({"epsilon_budget": 5.0}, r"'none' \(no noise\) .* epsilon_budget=5.0:"),
        ({"sample_rate": 0.1}, r"privacy.sample_rate=0.1 is not accepted"),
        (
            {"calibration_sample_rate": 0.0},
            r"privacy.calibration_sample_rate must be in \(0, 1\], got 0.0",
        ),
        ({"clip_norm": float("inf")}, r"privacy.clip_norm must be a finite number"),
        ({"max_uploads": 0}, r"privacy.max_uploads must be >= 1, got 0"),
        ({"epsilon_budget": 0.0}, r"privacy.epsilon_budget must be > 0, got 0.0"),
        (
            {"mechanism": "gaussian", "epsilon": 1.0},
            r"privacy.clip_norm is required when privacy.mechanism is 'gaussian'",
        ),
        (
            {"mechanism": "gaussian", "clip_norm": 1.0, "calibration": "sparse"},
            r"privacy.noise_multiplier \(σ̂\) is required when privacy.calibration "
            r"is 'sparse'",
        ),
    ],
    ids=[
        "epsilon-0",
        "epsilon-negative",
        "delta-1.5",
        "delta-0",
        "clip-negative",
        "multiplier-negative",
        "std-negative",
        "gaussian-multiplier-0",
        "gaussian-std-0",
        "none-with-noise-std",
        "none-with-three-noise-fields",
        "none-with-calibration",
        "none-with-budget",
        "sample-rate-set",
        "calibration-sample-rate-0",
        "clip-inf",
        "max-uploads-0",
        "budget-0",
        "gaussian-without-clip",
        "sparse-without-multiplier",
    ],
)
def test_bad_values_name_field_and_value(
    fields: dict[str, object], message: str
) -> None:
    # Act
    with pytest.raises(pydantic.ValidationError, match=message) as info:
        _Root(privacy=fields)
    # Assert: the error location is the privacy section
    assert info.value.errors()[0]["loc"][0] == "privacy"


def test_unknown_literal_lists_allowed_values() -> None:
    with pytest.raises(pydantic.ValidationError, match="'client', 'edge' or 'cloud'"):
        PrivacyConfig(placement="device")


def test_config_is_frozen_and_forbids_extra_fields() -> None:
    config = PrivacyConfig(mechanism="gaussian", clip_norm=1.0, epsilon=1.0)
    with pytest.raises(pydantic.ValidationError):
        config.epsilon = 2.0  # type: ignore[misc]
    with pytest.raises(
        pydantic.ValidationError, match="Extra inputs are not permitted"
    ):
        PrivacyConfig(eps=1.0)  # type: ignore[call-arg]


def test_every_field_has_a_description() -> None:
    missing = [
        name for name, f in PrivacyConfig.model_fields.items() if not f.description
    ]
    assert missing == []
