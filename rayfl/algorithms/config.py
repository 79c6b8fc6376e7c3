"""Config sections of the algorithms, one model per algorithm.

Every algorithm's params subclass :class:`LocalTrainingConfig` and add only their
own fields (STYLE.md rule 19, after pfl's ``FedProxParams(NNAlgorithmParams)``).
``algorithm.kind`` selects the class; an unknown kind is an error listing the known
ones.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

__all__ = [
    "AlgorithmConfig",
    "DittoConfig",
    "FedAvgConfig",
    "FedProxConfig",
    "LocalTrainingConfig",
    "WpflConfig",
    "algorithm_names",
]


class LocalTrainingConfig(BaseModel):
    """Local SGD settings shared by every algorithm."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    local_epochs: int = Field(1, ge=1, description="Local epochs E per round.")
    local_steps: int | None = Field(
        None, ge=1, description="Local SGD steps S per round; overrides local_epochs."
    )
    batch_size: int = Field(32, ge=1, description="Mini-batch size B.")
    lr: float = Field(0.05, gt=0, description="Local learning rate η.")
    trainer: Literal["auto", "autograd", "fast", "vectorized"] = Field(
        "auto",
        description="How local SGD runs: `autograd` (torch autograd, any model); "
        "`fast` (hand-written MLR/MLP step, same results to ~1e-7, others fall back "
        "to autograd); `vectorized` (all clients of an actor at once, fastest for many "
        "small clients, but float rounding then depends on the packing, so results "
        "are reproducible for a fixed ray.clients_per_actor only); `auto` = fast.",
    )


class FedAvgConfig(LocalTrainingConfig):
    """FedAvg (McMahan et al. 2017): local SGD, sample-size weighted average."""

    kind: Literal["fedavg"] = "fedavg"


class FedProxConfig(LocalTrainingConfig):
    """FedProx (Li et al. 2020): FedAvg plus a proximal term (μ/2)‖w − w_t‖²."""

    kind: Literal["fedprox"] = "fedprox"
    mu: float = Field(0.01, ge=0, description="Proximal weight μ (eq. 2 of FedProx).")


class DittoConfig(LocalTrainingConfig):
    """Ditto / DP-Ditto (Li et al. 2021; Zhao et al., spec seed_001).

    ``lr``/``local_epochs``/``local_steps`` drive the FL local model (η_G); the
    ``personal_*`` fields drive the PL model. DP comes from the ``privacy``
    section (``mechanism: gaussian``, ``calibration: dp_ditto``).
    """

    kind: Literal["ditto"] = "ditto"
    lam: float = Field(
        0.1,
        ge=0.0,
        le=2.0,
        description="Ditto weight λ in [0, 2] (eq. 3a): 0 = local training only, "
        "2 = no personalization.",
    )
    personal_lr: float = Field(
        None,  # type: ignore[assignment]  # filled from lr by the validator
        gt=0.0,
        description="PL learning rate η_L > 0; default: lr (η_G).",
    )
    personal_epochs: int = Field(
        1, ge=1, description="Local epochs of the PL model per round."
    )
    personal_steps: int | None = Field(
        None,
        ge=1,
        description="Local SGD steps of the PL model; overrides personal_epochs.",
    )
    local_mode: Literal["epochs", "paper_gd_step"] = Field(
        "epochs",
        description="'epochs': mini-batch SGD for E epochs (PFLlib); "
        "'paper_gd_step': one full-batch gradient step per model (Alg. 1).",
    )
    clip_target: Literal["model", "update"] = Field(
        "model",
        description="What is uploaded (and clipped): the FL local model u (eq. 5) "
        "or the update u − ω.",
    )
    aggregation: Literal["uniform", "data_weighted"] = Field(
        "uniform",
        description="Server weights: 'uniform' p_n = 1/N (paper) or |D_n|.",
    )

    @model_validator(mode="before")
    @classmethod
    def _default_personal_lr(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("personal_lr") is None:
            lr = data.get("lr", cls.model_fields["lr"].default)
            return {**data, "personal_lr": lr}
        return data


class WpflConfig(DittoConfig):
    """WPFL (Zhao et al. 2025, spec seed_000): DP-Ditto over a quantized, noisy channel.

    Adds to Ditto the R-bit downlink (quantized global model, per-client bit
    errors), the personal update of every client in every round [AMBIG-5] and the
    choice of DP mechanism (seed 000 §5.2); the uplink (clip → noise → R-bit
    quantization over ±(C + 3σ) → bit errors) comes from the ``privacy``,
    ``compression`` and ``wireless`` sections. Defaults are Table I's
    (η_F = η_P = 0.01, λ = 0.5). See ``rayfl.algorithms.wpfl``.
    """

    kind: Literal["wpfl"] = "wpfl"  # type: ignore[assignment]
    lr: float = Field(0.01, gt=0, description="FL learning rate η_F (Table I).")
    lam: float = Field(
        0.5, ge=0.0, le=2.0, description="PL-FL weight λ in [0, 2] (Table I: 0.5)."
    )
    downlink_bits: int | None = Field(
        16,
        ge=1,
        le=32,
        description="R of the downlink quantizer Q_G over ±C (eq. 7); null = the "
        "global model is broadcast unquantized and error-free (Perfect Gaussian).",
    )
    downlink_errors: bool = Field(
        True,
        description="Corrupt each client's copy of the quantized global model with "
        "bit flips at its downlink 256-QAM BER (eq. 18; needs wireless.effects="
        "bit_flip). False = error-free downlink (the 'error-free' baseline).",
    )
    first_broadcast: Literal["error_free", "downlink"] = Field(
        "error_free",
        description="[AMBIG-10] ω⁰ reaches the clients unquantized and error-free "
        "('error_free') or through the quantized, noisy downlink ('downlink').",
    )
    personal_all_clients: bool = Field(
        True,
        description="[AMBIG-5] Every client updates its PL model every round from the "
        "broadcast (Sec. III-A, Alg. 2); False = only scheduled clients (Alg. 1).",
    )
    dp_mechanism: Literal["proposed", "gaussian", "ma", "perfect_gaussian", "none"] = (
        Field(
            "proposed",
            description="Seed 000 §5.2 noise calibration: 'proposed' = Theorem 1 "
            "(privacy.calibration wpfl or privacy.noise_std, e.g. Table II); 'gaussian' "
            "= NbAFL σ = c·T0·Δs/ε; 'ma' = RDP accountant z(q, T0, ε, δ)·Δs; "
            "'perfect_gaussian' = NbAFL σ with no quantization and no channel errors; "
            "'none' = no noise (quantization over ±C and errors stay). Dithering "
            "(P2CEFL) is not implemented.",
        )
    )
    sensitivity: Literal["clip", "sample_level"] = Field(
        "sample_level",
        description="Δs of the baselines' calibration [AMBIG-11]: 'sample_level' = "
        "2C/min_n abs(D_n) (one sample changes the clipped model by at most 2C/m); "
        "'clip' = C.",
    )

    @model_validator(mode="after")
    def _check_wpfl(self) -> WpflConfig:
        if self.clip_target != "model":
            raise ValueError(
                "algorithm.clip_target must be 'model' for wpfl (the clipped FL "
                f"local model is uploaded, eq. 2), got {self.clip_target!r}"
            )
        return self


_CONFIGS: tuple[type[LocalTrainingConfig], ...] = (
    FedAvgConfig,
    FedProxConfig,
    DittoConfig,
    WpflConfig,
)


def algorithm_names() -> list[str]:
    """Return the known ``algorithm.kind`` values."""
    return [c.model_fields["kind"].default for c in _CONFIGS]


def _default_kind(value: Any) -> Any:
    if isinstance(value, dict) and "kind" not in value:
        return {**value, "kind": "fedavg"}
    return value


AlgorithmConfig = Annotated[
    FedAvgConfig | FedProxConfig | DittoConfig | WpflConfig,
    Field(discriminator="kind"),
    BeforeValidator(_default_kind),
]
"""The ``algorithm`` section: a discriminated union on ``kind`` (default fedavg)."""
