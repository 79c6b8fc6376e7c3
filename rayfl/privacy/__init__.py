"""Differential privacy: clipping, Gaussian mechanisms, calibration, the ledger."""

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
from rayfl.privacy.quantized_gaussian import quantized_gaussian_delta, wpfl_noise_std
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
