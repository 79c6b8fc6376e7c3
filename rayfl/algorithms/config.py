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
    "SparseDPConfig",
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


class SparseDPConfig(LocalTrainingConfig):
    """DP-SparFL (Wei et al. 2023, spec seed_002): masked local DP-SGD.

    ``batch_size`` is the expected Poisson batch abs(b) (q_i = abs(b)/abs(D_i));
    ``local_steps`` is τ (required). The DP noise is added inside local training,
    so ``privacy.mechanism`` stays ``none``; ε_i is accounted per client from
    these fields (``rayfl.privacy.participation``).
    """

    kind: Literal["sparse_dp"] = "sparse_dp"
    local_steps: int | None = Field(
        60, ge=1, description="τ: local DP-SGD steps per round (seed_002 §5.3: 60)."
    )
    clip_norm: float = Field(
        1.0, gt=0, description="C: base per-sample L2 clip (seed_002 [AMBIG-9])."
    )
    noise_multiplier: float = Field(
        0.5, gt=0, description="σ̂: noise multiplier of DP-SGD (FMNIST 0.5, §5.3)."
    )
    sparsity: float = Field(
        1.0,
        gt=0,
        le=1,
        description="s: fraction of coordinates kept when the scheduler sets none "
        "(control `sparsity`); 1 = dense (baselines, [AMBIG-17]).",
    )
    clip_mode: Literal["adjusted", "original"] = Field(
        "adjusted",
        description="'adjusted': clip at √s·C and noise σ̂·√s·C/abs(b) (Lemma 1); "
        "'original': clip at C, noise σ̂·C/abs(b) (Fig. 2 ablation).",
    )
    rescale: bool = Field(
        False,
        description="Decode kept values times 1/s (unbiased sparsifier); the paper "
        "sums sparse updates as is (§2.2), so default false.",
    )
    sampling: Literal["poisson", "fixed"] = Field(
        "poisson",
        description="Mini-batches by Poisson sampling at q_i (matches the accountant, "
        "[AMBIG-19]) or fixed-size uniform batches.",
    )
    epsilon_min: float = Field(
        2.0, gt=0, description="ε_i ~ U[epsilon_min, epsilon_max] per client (§5.3)."
    )
    epsilon_max: float = Field(
        10.0, gt=0, description="Upper end of the per-client budget range."
    )

    @model_validator(mode="after")
    def _check_budget_range(self) -> SparseDPConfig:
        if self.local_steps is None:
            raise ValueError("algorithm.local_steps (τ) is required for sparse_dp")
        if self.epsilon_min > self.epsilon_max:
            raise ValueError(
                "algorithm.epsilon_min must be <= epsilon_max, got "
                f"{self.epsilon_min} > {self.epsilon_max}"
            )
        return self


_CONFIGS: tuple[type[LocalTrainingConfig], ...] = (
    FedAvgConfig,
    FedProxConfig,
    DittoConfig,
    SparseDPConfig,
)


def algorithm_names() -> list[str]:
    """Return the known ``algorithm.kind`` values."""
    return [c.model_fields["kind"].default for c in _CONFIGS]


def _default_kind(value: Any) -> Any:
    if isinstance(value, dict) and "kind" not in value:
        return {**value, "kind": "fedavg"}
    return value


AlgorithmConfig = Annotated[
    FedAvgConfig | FedProxConfig | DittoConfig | SparseDPConfig,
    Field(discriminator="kind"),
    BeforeValidator(_default_kind),
]
"""The ``algorithm`` section: a discriminated union on ``kind`` (default fedavg)."""
