"""Uplink compression configuration (quantization and sparsification).

Symbol table (WPFL: the WPFL paper, Zhao et al., arXiv:2506.02422; DP-SparFL:
Wei et al., arXiv:2304.04164):

| paper symbol | code name | meaning |
|---|---|---|
| R (WPFL) | ``quantize_bits`` | bits per transmitted element |
| A_L = C + 3σ_DP (WPFL eq. 6) | ``quantize_range="clip"`` | range ±A_L |
| s_i^t (DP-SparFL) | ``sparsify_fraction`` | fraction of coordinates kept |
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class CompressionConfig(BaseModel):
    """Uplink compression: optional sparsification, then optional quantization.

    The client applies sparsify → quantize after the DP stages (see
    ``rayfl.privacy.pipeline``). Cross-section rules that need the privacy config
    (``quantize_range="clip"`` needs ``privacy.clip_norm``) are checked where both
    are known, in ``build_client_stages``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    quantize_bits: int | None = Field(
        default=None,
        description=(
            "Bits per element R of the uniform quantizer, integer in [1, 32]; null = "
            "no quantization (float32 values, 32 bits each). The WPFL paper uses R = 16."
        ),
    )
    stochastic: bool = Field(
        default=False,
        description=(
            "Stochastic (unbiased) rounding instead of deterministic round-to-nearest. "
            "The WPFL paper uses deterministic rounding (its eq. 6-8)."
        ),
    )
    quantize_range: Literal["clip", "minmax"] = Field(
        default="clip",
        description=(
            "How the quantizer range [lo, hi] is set: 'clip' = ±(C + 3σ_DP) with C "
            "the clip norm and σ_DP the client-side noise std (the WPFL paper's A_L, eq. 6); "
            "'minmax' = [min, max] of the values sent (lo and hi travel with the "
            "payload)."
        ),
    )
    sparsify_fraction: float = Field(
        default=1.0,
        description=(
            "Fraction p of coordinates kept, in (0, 1]; 1 = dense. Random "
            "sparsification keeps each coordinate independently with probability p "
            "(the DP-SparFL paper's s_i^t); top-k keeps ceil(p·d) coordinates."
        ),
    )
    topk: bool = Field(
        default=False,
        description=(
            "Keep the ceil(p·d) largest-magnitude coordinates (deterministic, biased, "
            "no rescaling) instead of a random Bernoulli(p) mask."
        ),
    )
    sparsify_rescale: bool = Field(
        default=True,
        description=(
            "Scale kept values by 1/p so random sparsification is unbiased. The "
            "DP-SparFL paper sums sparse updates as is: set false to reproduce it. "
            "Ignored for top-k."
        ),
    )

    @model_validator(mode="after")
    def _check_ranges(self) -> CompressionConfig:
        bits = self.quantize_bits
        if bits is not None and not 1 <= bits <= 32:
            raise ValueError(
                f"compression.quantize_bits must be an integer in [1, 32] or null, "
                f"got {bits}"
            )
        fraction = self.sparsify_fraction
        if not 0.0 < fraction <= 1.0:
            raise ValueError(
                f"compression.sparsify_fraction must be in (0, 1], got {fraction}"
            )
        return self
