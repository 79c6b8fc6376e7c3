"""Config sections of the algorithms, one model per algorithm.

Every algorithm's params subclass :class:`LocalTrainingConfig` and add only their
own fields (STYLE.md rule 19, after pfl's ``FedProxParams(NNAlgorithmParams)``).
``algorithm.kind`` selects the class; an unknown kind is an error listing the known
ones.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from rayfl.privacy.config import MAX_NOISE, MIN_NOISE_MULTIPLIER

__all__ = [
    "AlgorithmConfig",
    "APPLEConfig",
    "DittoConfig",
    "FedALAConfig",
    "FedAMPConfig",
    "FedAvgConfig",
    "FedProxConfig",
    "LocalTrainingConfig",
    "PFedMeConfig",
    "PerFedAvgConfig",
    "WpflConfig",
    "SparseDPConfig",
    "algorithm_names",
]


MAX_LR = 1e3
"""Largest learning rate accepted: beyond it SGD on these models only diverges."""
MAX_LOCAL_EPOCHS = 1000
"""Largest ``local_epochs``: a round's work is epochs × samples SGD steps."""
MAX_LOCAL_STEPS = 100_000
"""Largest ``local_steps`` (the vectorized trainer plans every step's batch)."""


class LocalTrainingConfig(BaseModel):
    """Local SGD settings shared by every algorithm."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    kind: str
    local_epochs: int = Field(
        1,
        ge=1,
        le=MAX_LOCAL_EPOCHS,
        description=f"Local epochs E per round, 1..{MAX_LOCAL_EPOCHS}.",
    )
    local_steps: int | None = Field(
        None,
        ge=1,
        le=MAX_LOCAL_STEPS,
        description=f"Local SGD steps S per round, 1..{MAX_LOCAL_STEPS}; overrides "
        "local_epochs.",
    )
    batch_size: int = Field(
        32, ge=1, le=1_000_000, description="Mini-batch size B, 1..1e6."
    )
    lr: float = Field(
        0.05,
        gt=0,
        le=MAX_LR,
        description=f"Local learning rate η, in (0, {MAX_LR:g}] (larger values only "
        "diverge: every upload becomes non-finite and is rejected).",
    )
    trainer: Literal["auto", "autograd", "fast", "vectorized"] = Field(
        "auto",
        description="How local SGD runs: `autograd` (torch autograd, any model); "
        "`fast` (hand-written MLR/MLP step, same results to ~1e-7, others fall back "
        "to autograd); `vectorized` (all clients of an actor at once, fastest for many "
        "small clients, but float rounding then depends on the packing, so results "
        "are reproducible for a fixed ray.clients_per_actor only); `auto`: FedAvg/FedProx "
        "on the built-in MLR/MLP with batch_size <= 64 train vectorized with the matmul "
        "kernel (bit-identical whatever the packing), everything else as `fast`.",
    )


class FedAvgConfig(LocalTrainingConfig):
    """FedAvg (McMahan et al. 2017): local SGD, sample-size weighted average."""

    kind: Literal["fedavg"] = "fedavg"


class FedProxConfig(LocalTrainingConfig):
    """FedProx (Li et al. 2020): FedAvg plus a proximal term (μ/2)‖w − w_t‖²."""

    kind: Literal["fedprox"] = "fedprox"
    mu: float = Field(0.01, ge=0, description="Proximal weight μ (eq. 2 of FedProx).")


class DittoConfig(LocalTrainingConfig):
    """Ditto / DP-Ditto (Li et al. 2021; the DP-Ditto paper, Zhao et al., arXiv:2506.14251).

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
        le=MAX_LR,
        description=f"PL learning rate η_L in (0, {MAX_LR:g}]; default: lr (η_G).",
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


class PFedMeConfig(LocalTrainingConfig):
    """pFedMe (Dinh et al., NeurIPS 2020): Moreau-envelope personalization.

    ``lr`` is η (local-model step), ``local_steps``/``local_epochs`` count the
    local rounds R (one mini-batch each); see :mod:`rayfl.algorithms.pfedme`.
    """

    kind: Literal["pfedme"] = "pfedme"
    lam: float = Field(
        15.0, ge=0.0, description="Moreau-envelope weight λ (pFedMe paper: 15)."
    )
    personal_lr: float = Field(
        0.01,
        gt=0.0,
        le=MAX_LR,
        description="Step of the K inner steps on θ (PFLlib: 0.01).",
    )
    inner_steps: int = Field(5, ge=1, description="K inner steps per mini-batch.")
    beta: float = Field(
        1.0,
        gt=0.0,
        description="Server mixing β: ω ← (1 − β)ω + β·mean(w_n); 1 = averaging.",
    )
    clip_target: Literal["model", "update"] = Field(
        "model",
        description="What is uploaded (and clipped): the local model w_n or w_n − ω.",
    )


class PerFedAvgConfig(LocalTrainingConfig):
    """Per-FedAvg (Fallah et al., NeurIPS 2020), first-order MAML.

    ``lr`` is α (inner step, also the evaluation-time adaptation step), ``beta``
    the outer step β; see :mod:`rayfl.algorithms.perfedavg`.
    """

    kind: Literal["perfedavg"] = "perfedavg"
    beta: float = Field(
        0.001, gt=0.0, description="Outer (meta) step β (PFLlib example: 0.001)."
    )
    eval_steps: int = Field(
        1,
        ge=0,
        description="SGD steps (step α, batch B) from ω on the client's train data "
        "before its personalized test; 0 = test ω itself.",
    )


class FedAMPConfig(LocalTrainingConfig):
    """FedAMP (Huang et al., AAAI 2021): attentive message passing.

    Defaults are PFLlib's example configuration; see
    :mod:`rayfl.algorithms.fedamp`.
    """

    kind: Literal["fedamp"] = "fedamp"
    alpha_k: float = Field(
        5e-3, gt=0.0, description="α_K: step of the server's attention message."
    )
    lam: float = Field(
        5e-7,
        ge=0.0,
        description="λ: the local objective adds (λ/(2α_K))‖w − U_n‖²; 0 = local "
        "training only.",
    )
    sigma: float = Field(
        0.1, gt=0.0, description="σ of the attention A'(d²) = exp(−d²/σ)/σ."
    )


class FedALAConfig(LocalTrainingConfig):
    """FedALA (Zhang et al., AAAI 2023): adaptive local aggregation.

    Defaults are the paper's / PFLlib's; see :mod:`rayfl.algorithms.fedala`.
    """

    kind: Literal["fedala"] = "fedala"
    layer_idx: int = Field(
        2,
        ge=0,
        description="p: number of top parameter tensors (weights and biases count "
        "separately) aggregated adaptively; lower ones take the global values. "
        "0 = plain FedAvg (unlike PFLlib, where 0 means all).",
    )
    rand_percent: int = Field(
        80, ge=0, le=100, description="s: percent of the train split used to learn W."
    )
    eta: float = Field(1.0, gt=0.0, description="η: step of the ALA weights W.")
    threshold: float = Field(
        0.1,
        ge=0.0,
        description="First ALA: learn W until the std of the last losses is below this.",
    )
    num_pre_loss: int = Field(
        10, ge=1, description="How many recent losses the threshold's std uses."
    )
    max_start_epochs: int = Field(
        50, ge=1, description="Cap on the first ALA's epochs (PFLlib has none)."
    )
    clip_target: Literal["model", "update"] = Field(
        "model",
        description="What is uploaded (and clipped): the local model θ_n or θ_n − Θ.",
    )


class APPLEConfig(LocalTrainingConfig):
    """APPLE (Luo & Wu, IJCAI 2022): core models and learned relationship vectors.

    Defaults: PFLlib's, with a non-zero ``dr_lr``; see
    :mod:`rayfl.algorithms.apple`.
    """

    kind: Literal["apple"] = "apple"
    dr_lr: float = Field(
        0.01,
        ge=0.0,
        description="η₂: step of the directed relationship vector p_n; 0 = fixed p.",
    )
    mu: float = Field(0.01, ge=0.0, description="μ of the proximal term on p_n.")
    decay_fraction: float = Field(
        1.0,
        gt=0.0,
        description="L: the proximal weight λ(t) decays by a cosine to 0 over "
        "L·rounds rounds.",
    )
    p_grad: Literal["layer_mean", "exact"] = Field(
        "layer_mean",
        description="∂/∂p_j: 'layer_mean' = mean over parameter tensors of "
        "mean(∇θ ⊙ c_j) (PFLlib); 'exact' = the chain rule ⟨∇θ, c_j⟩.",
    )


class WpflConfig(DittoConfig):
    """WPFL (the WPFL paper, Zhao et al., arXiv:2506.02422): DP-Ditto over a noisy channel.

    Adds to Ditto the R-bit downlink (quantized global model, per-client bit
    errors), the personal update of every client in every round (the paper's
    Algorithm 2; its Algorithm 1 updates scheduled clients only) and the choice
    of DP mechanism (the paper's baselines); the uplink (clip → noise → R-bit
    quantization over ±(C + 3σ) → bit errors) comes from the ``privacy``,
    ``compression`` and ``wireless`` sections. Defaults are Table I's
    (η_F = η_P = 0.01, λ = 0.5). See ``rayfl.algorithms.wpfl``.
    """

    kind: Literal["wpfl"] = "wpfl"  # type: ignore[assignment]
    lr: float = Field(
        0.01, gt=0, le=MAX_LR, description="FL learning rate η_F (Table I)."
    )
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
        description="How the initial model ω⁰ reaches the clients (the paper does "
        "not say): unquantized and error-free ('error_free') or through the "
        "quantized, noisy downlink ('downlink').",
    )
    personal_all_clients: bool = Field(
        True,
        description="Every client updates its personalized model every round from "
        "the broadcast (the paper's Sec. III-A and Algorithm 2); False = only the "
        "scheduled clients do (its Algorithm 1; the paper has both).",
    )
    dp_mechanism: Literal[
        "proposed", "gaussian", "ma", "perfect_gaussian", "none", "dithering"
    ] = Field(
        "proposed",
        description="Noise calibration, the WPFL paper's method or one of its "
        "baselines: 'proposed' = Theorem 1 "
        "(privacy.calibration wpfl or privacy.noise_std, e.g. Table II); 'gaussian' "
        "= NbAFL σ = c·T0·Δs/ε; 'ma' = RDP accountant z(q, T0, ε, δ)·Δs; "
        "'perfect_gaussian' = NbAFL σ with no quantization and no channel errors; "
        "'none' = no noise (quantization over ±C and errors stay); 'dithering' = "
        "P2CEFL as reconstructed here from its description: subtractive dithered "
        "quantization "
        "with gamma steps, a Laplace(Δs·T0/ε) mechanism with variable-width "
        "indices (needs compression.quantize_bits=null; "
        "rayfl.compression.dithering).",
    )
    sensitivity: Literal["clip", "sample_level"] = Field(
        "sample_level",
        description="Δs of the baselines' calibration (the paper does not state "
        "it): 'sample_level' = "
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


class SparseDPConfig(LocalTrainingConfig):
    """DP-SparFL (the DP-SparFL paper, Wei et al., arXiv:2304.04164): masked local DP-SGD.

    ``batch_size`` is the expected Poisson batch abs(b) (q_i = abs(b)/abs(D_i));
    ``local_steps`` is τ (required). The DP noise is added inside local training,
    so ``privacy.mechanism`` stays ``none``; ε_i is accounted per client from
    these fields (``rayfl.privacy.participation``).
    """

    kind: Literal["sparse_dp"] = "sparse_dp"
    local_steps: int | None = Field(
        60, ge=1, description="τ: local DP-SGD steps per round (the paper uses 60)."
    )
    clip_norm: float = Field(
        1.0,
        gt=0,
        le=MAX_NOISE,
        description="C: base per-sample L2 clip, in (0, 1e9] (the paper takes the "
        "median of unclipped norms from pre-training; no value is printed).",
    )
    noise_multiplier: float = Field(
        0.5,
        ge=MIN_NOISE_MULTIPLIER,
        le=MAX_NOISE,
        description="σ̂: noise multiplier of DP-SGD (the paper: 0.5 on FMNIST), in "
        "[1e-9, 1e9]: below, the accountant's ε is ∞ or meaningless; above, the "
        "noise overflows the float32 models (rayfl.privacy.config's bounds).",
    )
    sparsity: float = Field(
        1.0,
        gt=0,
        le=1,
        description="s: fraction of coordinates kept when the scheduler sets none "
        "(control `sparsity`); 1 = dense (the baselines: the paper does not say "
        "whether they sparsify).",
    )
    clip_mode: Literal["adjusted", "original"] = Field(
        "adjusted",
        description="'adjusted': clip at √s·C and noise σ̂·√s·C/abs(b) (Lemma 1); "
        "'original': clip at C, noise σ̂·C/abs(b) (Fig. 2 ablation).",
    )
    rescale: bool = Field(
        False,
        description="Decode kept values times 1/s (unbiased sparsifier); the paper "
        "sums sparse updates as is (its Sec. 2.2), so default false.",
    )
    sampling: Literal["poisson", "fixed"] = Field(
        "poisson",
        description="Mini-batches by Poisson sampling at q_i (the ledger claims "
        "amplification at q_i; the paper does not say which) or fixed-size uniform "
        "batches (accounted "
        "without amplification: q = 1, replace-one, z = σ̂/2).",
    )
    epsilon_min: float = Field(
        2.0,
        gt=0,
        description="ε_i ~ U[epsilon_min, epsilon_max] per client (the paper's "
        "setting).",
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
    PFedMeConfig,
    PerFedAvgConfig,
    FedAMPConfig,
    FedALAConfig,
    APPLEConfig,
    WpflConfig,
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
    FedAvgConfig
    | FedProxConfig
    | DittoConfig
    | PFedMeConfig
    | PerFedAvgConfig
    | FedAMPConfig
    | FedALAConfig
    | APPLEConfig
    | WpflConfig
    | SparseDPConfig,
    Field(discriminator="kind"),
    BeforeValidator(_default_kind),
]
"""The ``algorithm`` section: a discriminated union on ``kind`` (default fedavg)."""
