"""Differential privacy: clipping, Gaussian mechanisms, calibration, the ledger.

The names are imported lazily (on first access): ``rayfl.privacy.config`` is
read by config validation, which must stay light (no scipy, torch or Ray;
tests/test_startup_imports.py).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rayfl.privacy.accountant import PrivacyLedger, make_accountant, release_event
    from rayfl.privacy.calibration import calibrate_noise_std, nominal_epsilon
    from rayfl.privacy.clip import clip_by_l2_norm, clip_scale
    from rayfl.privacy.config import PrivacyConfig
    from rayfl.privacy.gaussian import (
        accountant_noise_multiplier,
        add_gaussian_noise,
        dp_ditto_noise_std,
        h2fdp_noise_std,
        h2fdp_sensitivity,
        sparse_dp_noise_std,
    )
    from rayfl.privacy.pipeline import (
        ClipStage,
        NoiseStage,
        QuantizeStage,
        ServerNoise,
        SparsifyStage,
        Stage,
        add_server_noise,
        build_client_stages,
        run_stages,
    )
    from rayfl.privacy.quantized_gaussian import (
        quantized_gaussian_delta,
        wpfl_noise_std,
    )
    from rayfl.privacy.sensitivity import (
        LedgerRule,
        dp_sgd_rule,
        h2fdp_release_sensitivity,
        laplace_vector_epsilon,
        whole_update_sensitivity,
    )

__all__ = [
    "ClipStage",
    "LedgerRule",
    "NoiseStage",
    "PrivacyConfig",
    "PrivacyLedger",
    "QuantizeStage",
    "ServerNoise",
    "SparsifyStage",
    "Stage",
    "accountant_noise_multiplier",
    "add_gaussian_noise",
    "add_server_noise",
    "build_client_stages",
    "calibrate_noise_std",
    "clip_by_l2_norm",
    "clip_scale",
    "dp_ditto_noise_std",
    "dp_sgd_rule",
    "h2fdp_noise_std",
    "h2fdp_release_sensitivity",
    "h2fdp_sensitivity",
    "laplace_vector_epsilon",
    "make_accountant",
    "nominal_epsilon",
    "quantized_gaussian_delta",
    "release_event",
    "run_stages",
    "sparse_dp_noise_std",
    "whole_update_sensitivity",
    "wpfl_noise_std",
]

_LAZY = {
    "ClipStage": "rayfl.privacy.pipeline",
    "LedgerRule": "rayfl.privacy.sensitivity",
    "NoiseStage": "rayfl.privacy.pipeline",
    "PrivacyConfig": "rayfl.privacy.config",
    "PrivacyLedger": "rayfl.privacy.accountant",
    "QuantizeStage": "rayfl.privacy.pipeline",
    "ServerNoise": "rayfl.privacy.pipeline",
    "SparsifyStage": "rayfl.privacy.pipeline",
    "Stage": "rayfl.privacy.pipeline",
    "accountant_noise_multiplier": "rayfl.privacy.gaussian",
    "add_gaussian_noise": "rayfl.privacy.gaussian",
    "add_server_noise": "rayfl.privacy.pipeline",
    "build_client_stages": "rayfl.privacy.pipeline",
    "calibrate_noise_std": "rayfl.privacy.calibration",
    "clip_by_l2_norm": "rayfl.privacy.clip",
    "clip_scale": "rayfl.privacy.clip",
    "dp_ditto_noise_std": "rayfl.privacy.gaussian",
    "dp_sgd_rule": "rayfl.privacy.sensitivity",
    "h2fdp_noise_std": "rayfl.privacy.gaussian",
    "h2fdp_release_sensitivity": "rayfl.privacy.sensitivity",
    "h2fdp_sensitivity": "rayfl.privacy.gaussian",
    "laplace_vector_epsilon": "rayfl.privacy.sensitivity",
    "make_accountant": "rayfl.privacy.accountant",
    "nominal_epsilon": "rayfl.privacy.calibration",
    "quantized_gaussian_delta": "rayfl.privacy.quantized_gaussian",
    "release_event": "rayfl.privacy.accountant",
    "run_stages": "rayfl.privacy.pipeline",
    "sparse_dp_noise_std": "rayfl.privacy.gaussian",
    "whole_update_sensitivity": "rayfl.privacy.sensitivity",
    "wpfl_noise_std": "rayfl.privacy.quantized_gaussian",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rayfl.privacy' has no attribute {name!r}")
