"""Differential-privacy configuration of the uplink (mechanism, budget, placement).

Symbol table (the papers: WPFL, arXiv:2506.02422; DP-Ditto, arXiv:2506.14251;
DP-SparFL, arXiv:2304.04164; H2FDP, arXiv:2401.11592):

| paper symbol | code name | meaning |
|---|---|---|
| ε, ε_Q (WPFL), ε (DP-Ditto, H2FDP) | ``epsilon`` | target budget over a run |
| δ, δ_Q | ``delta`` | target failure probability |
| C (WPFL, DP-Ditto), G (H2FDP) | ``clip_norm`` | L2 clipping threshold |
| z, σ̂ (DP-SparFL) | ``noise_multiplier`` | noise std / sensitivity |
| σ_DP, σ_u | ``noise_std`` | absolute per-coordinate noise std |
| T0 (WPFL) | ``max_uploads`` | cap on a client's uploads |
| ε_i (DP-SparFL) | ``epsilon_budget`` | per-client accountant budget |
| q (in a paper's noise formula) | ``calibration_sample_rate`` | sets σ only |

The ledger's sample rate is never a config field: it comes from the code path
(``rayfl.privacy.sensitivity``). Whole-update DP samples no record, so its
ledger uses q = 1; DP-SparFL's q_i = algorithm.batch_size/abs(D_i) with
``algorithm.sampling: poisson``.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_NOISE_FIELDS = (
    "noise_std",
    "noise_multiplier",
    "epsilon",
    "epsilon_budget",
    "calibration",
    "calibration_sample_rate",
    "placement",
)
"""Fields read only when a mechanism adds noise (``mechanism: none`` refuses them).

``clip_norm`` and ``max_uploads`` act without noise; ``delta`` and
``accountant`` also serve DP-SparFL's ledger (its noise is the algorithm's)."""


MIN_NOISE_MULTIPLIER = 1e-9
"""Smallest noise multiplier z = σ/(2C) (or σ̂) accepted. A Gaussian release at z
costs ε ≈ 1/(2z²) in RDP: 5e17 per release at 1e-9, so below it no guarantee is
left; at z ≈ 1e-154 z² underflows and the accountant reports ε = ∞."""

MAX_NOISE = 1e9
"""Largest noise_std, noise_multiplier and clip_norm: noise beyond it overflows
the squared norms of the float32 models it is added to (max 3.4e38), and so does
the quantizer's range ±(C + 3σ); a larger C clips nothing anyway."""

MAX_EPSILON = 1e6
"""Largest target ε: the paper formulas' σ scales as 1/ε, so beyond it σ falls
below MIN_NOISE_MULTIPLIER's scale and the ledger's ε is meaningless."""


class PrivacyConfig(BaseModel):
    """DP mechanism of the uplink and how its noise is calibrated and placed.

    ``mechanism="none"`` adds no noise (clipping still applies when ``clip_norm``
    is set) and refuses the fields only noise reads (``_NOISE_FIELDS``: a
    section that says no noise but sets ``noise_std`` is an error, not a
    silent drop). For the Gaussian mechanisms the noise std comes from, in order of
    precedence: ``noise_std``; ``noise_multiplier`` × 2C, the L2 sensitivity of a
    whole update clipped to C (for ``calibration="sparse"`` the multiplier is σ̂
    and enters the DP-SparFL paper's formula); else the ``calibration`` formula applied to
    (``epsilon``, ``delta``). See ``rayfl.privacy.calibration.calibrate_noise_std``.
    The ledger accounts every whole-update release at z = σ/(2C) with no
    subsampling, whatever the calibration (``rayfl.privacy.sensitivity``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    mechanism: Literal["none", "gaussian", "quantized_gaussian"] = Field(
        default="none",
        description=(
            "'none' = no noise; 'gaussian' = clip + i.i.d. Gaussian noise; "
            "'quantized_gaussian' = clip + noise + R-bit quantization analysed "
            "jointly (Theorem 1 of the WPFL paper, Zhao et al., arXiv:2506.02422)."
        ),
    )
    epsilon: float | None = Field(
        default=None,
        description="Target ε in (0, 1e6] over the planned releases (ε_Q, ε); "
        "null = ∞.",
    )
    delta: float = Field(
        default=1e-5, description="Target δ in (0, 1) (δ_Q in the WPFL paper)."
    )
    clip_norm: float | None = Field(
        default=None,
        description=(
            "L2 clipping threshold C in (0, 1e9] of the uploaded vector (same unit as the "
            "model parameters); null = no clipping. Required by the Gaussian "
            "mechanisms."
        ),
    )
    clip_per_layer: bool = Field(
        default=False,
        description=(
            "Clip each of the model's L layers to C/√L instead of the whole "
            "flattened vector to C (both bound the L2 sensitivity by C; the papers "
            "clip the whole vector). Early versions of rayfl clipped every "
            "client-side update per layer regardless (a bug, since fixed); set true "
            "to reproduce numbers measured with them."
        ),
    )
    noise_multiplier: float | None = Field(
        default=None,
        description=(
            "Noise multiplier z in [1e-9, 1e9] = std / L2 sensitivity, the sensitivity of a "
            "whole clipped update being 2C (σ = 2C·z). If set, overrides the "
            "ε-based calibration; with calibration='sparse' it is the DP-SparFL "
            "paper's σ̂."
        ),
    )
    noise_std: float | None = Field(
        default=None,
        description=(
            "Absolute per-coordinate noise std σ_DP in (0, 1e9], with σ/(2C) >= "
            "1e-9 (below it the accountant's ε is ∞ or meaningless), overriding everything else "
            "(e.g. the values of Table II of the WPFL paper)."
        ),
    )
    calibration: Literal["accountant", "dp_ditto", "wpfl", "h2fdp", "sparse"] = Field(
        default="accountant",
        description=(
            "Formula turning (ε, δ) into σ: 'accountant' = dp-accounting calibration "
            "for the planned releases (q = 1, Δ = 2C: the ledger then reports ε ≤ "
            "the target); the others are the papers' formulas, whose ε is the "
            "paper's nominal value, not a guarantee: 'dp_ditto' = eq. 8 of the "
            "DP-Ditto paper (arXiv:2506.14251); 'wpfl' = Theorem 1 (eq. 23-24) of "
            "the WPFL paper (arXiv:2506.02422); 'h2fdp' = eq. 15 of the H2FDP paper "
            "(arXiv:2401.11592); 'sparse' = eq. 9 of the DP-SparFL paper "
            "(arXiv:2304.04164), σ̂·√s·C/abs(b)."
        ),
    )
    accountant: Literal["rdp", "pld"] = Field(
        default="rdp",
        description="dp-accounting backend for calibration and the ledger: RDP or PLD.",
    )
    placement: Literal["client", "edge", "cloud"] = Field(
        default="client",
        description=(
            "Where the noise is added: on the client (local DP), at the edge server "
            "(a trusted edge, as in the H2FDP paper) or at the cloud (central DP)."
        ),
    )
    sample_rate: float = Field(
        default=1.0,
        description=(
            "Not settable (only 1 is accepted): the ledger's sample rate comes from "
            "the code path, never from the config. Whole-update DP samples no "
            "record (q = 1); DP-SparFL's q_i = algorithm.batch_size/abs(D_i) with "
            "algorithm.sampling=poisson. For the q a paper's noise formula takes "
            "as input, use calibration_sample_rate."
        ),
    )
    calibration_sample_rate: float = Field(
        default=1.0,
        description=(
            "q in the paper's noise formula only: sets σ, never the ledger. Read by "
            "calibration 'wpfl' (the WPFL paper's Theorem 1, eq. 23-24), 'h2fdp' "
            "(eq. 15) and the WPFL paper's DP baselines (algorithm.dp_mechanism "
            "gaussian/ma); in (0, 1]."
        ),
    )
    max_uploads: int | None = Field(
        default=None,
        le=1_000_000_000,
        description="Cap T0 ≥ 1 on each client's uploads (constraint C7 of the WPFL "
        "paper), at most 1e9 (the noise calibration plans for T0 releases); "
        "null = no cap.",
    )
    epsilon_budget: float | None = Field(
        default=None,
        description=(
            "Per-client budget ε > 0 on the accountant's ε; a client whose next "
            "upload would exceed it stops uploading (the DP-SparFL paper's rule); null = "
            "none."
        ),
    )

    @model_validator(mode="after")
    def _check(self) -> PrivacyConfig:
        floats = {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "clip_norm": self.clip_norm,
            "noise_multiplier": self.noise_multiplier,
            "noise_std": self.noise_std,
            "sample_rate": self.sample_rate,
            "calibration_sample_rate": self.calibration_sample_rate,
            "epsilon_budget": self.epsilon_budget,
        }
        for name, value in floats.items():
            if value is not None and not math.isfinite(value):
                raise ValueError(
                    f"privacy.{name} must be a finite number (use null for none/∞ "
                    f"where allowed), got {value}"
                )
        if self.sample_rate != 1.0:
            raise ValueError(
                f"privacy.sample_rate={self.sample_rate} is not accepted: the ledger "
                "claims amplification by subsampling only where records are "
                "Poisson-sampled inside the release, and takes that rate from the "
                "code path. Whole-update DP (gaussian, quantized_gaussian, DP-Ditto, "
                "WPFL) samples no record; DP-SparFL's q comes from "
                "algorithm.batch_size/|D_i| with algorithm.sampling=poisson. To feed "
                "a q to a paper's noise formula, set privacy.calibration_sample_rate "
                "(it sets sigma, never the ledger); remove privacy.sample_rate."
            )
        if not 0.0 < self.calibration_sample_rate <= 1.0:
            raise ValueError(
                "privacy.calibration_sample_rate must be in (0, 1], got "
                f"{self.calibration_sample_rate}"
            )
        if self.epsilon is not None and not self.epsilon > 0:
            raise ValueError(
                f"privacy.epsilon must be > 0 (or null for ∞), got {self.epsilon}"
            )
        if not 0.0 < self.delta < 1.0:
            raise ValueError(f"privacy.delta must be in (0, 1), got {self.delta}")
        positive = {"clip_norm": self.clip_norm, "epsilon_budget": self.epsilon_budget}
        for name, value in positive.items():
            if value is not None and not value > 0:
                raise ValueError(f"privacy.{name} must be > 0, got {value}")
        noise = {"noise_multiplier": self.noise_multiplier, "noise_std": self.noise_std}
        for name, value in noise.items():
            if value is not None and not value > 0:
                raise ValueError(
                    f"privacy.{name} must be > 0 (a Gaussian mechanism with no "
                    f"noise is no DP; for none use privacy.mechanism: none), got "
                    f"{value}"
                )
        if self.mechanism == "none":
            self._check_no_noise_fields()
        self._check_noise_range()
        if self.max_uploads is not None and self.max_uploads < 1:
            raise ValueError(
                f"privacy.max_uploads must be >= 1, got {self.max_uploads}"
            )
        if self.mechanism != "none" and self.clip_norm is None:
            raise ValueError(
                f"privacy.clip_norm is required when privacy.mechanism is "
                f"'{self.mechanism}' (the noise is calibrated to it), got None"
            )
        if (
            self.mechanism != "none"
            and self.calibration == "sparse"
            and self.noise_multiplier is None
            and self.noise_std is None
        ):
            raise ValueError(
                "privacy.noise_multiplier (σ̂) is required when privacy.calibration "
                "is 'sparse', got None"
            )
        return self

    def _check_noise_range(self) -> None:
        """Refuse a noise the accountant cannot account (ε = ∞) or floats overflow.

        Raises:
            ValueError: Naming the field, the bound and its reason.
        """
        for name in ("noise_std", "noise_multiplier", "clip_norm"):
            value = getattr(self, name)
            if value is not None and value > MAX_NOISE:
                raise ValueError(
                    f"privacy.{name} must be <= {MAX_NOISE:g} (larger values "
                    f"overflow the float32 models and the quantizer's range "
                    f"±(C + 3σ)), got {value:g}"
                )
        if self.epsilon is not None and self.epsilon > MAX_EPSILON:
            raise ValueError(
                f"privacy.epsilon must be <= {MAX_EPSILON:g} (or null for ∞: no "
                f"noise from ε), got {self.epsilon:g}"
            )
        z, name = self.noise_multiplier, "noise_multiplier"
        if self.noise_std is not None and self.clip_norm is not None:
            z, name = self.noise_std / (2 * self.clip_norm), "noise_std"
        if z is not None and z < MIN_NOISE_MULTIPLIER:
            raise ValueError(
                f"privacy.{name}: the noise multiplier z = σ/(2C) is {z:.3g}, below "
                f"{MIN_NOISE_MULTIPLIER:g}: the accountant's ε ≈ 1/(2z²) per release "
                "(∞ below about 1e-154) guarantees nothing; raise the noise or set "
                "privacy.mechanism: none"
            )

    def _check_no_noise_fields(self) -> None:
        """Refuse the noise fields under ``mechanism: none`` (they would be dropped).

        Raises:
            ValueError: Naming every noise field that is set.
        """
        defaults = {
            name: type(self).model_fields[name].default for name in _NOISE_FIELDS
        }
        found = [
            f"{name}={getattr(self, name)}"
            for name, default in defaults.items()
            if getattr(self, name) != default
        ]
        if found:
            raise ValueError(
                "privacy.mechanism is 'none' (no noise) but the privacy section "
                f"sets {', '.join(found)}: choose privacy.mechanism gaussian or "
                "quantized_gaussian, or remove them"
            )
