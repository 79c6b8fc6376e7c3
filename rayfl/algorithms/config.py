"""Config sections of the algorithms, one model per algorithm.

Every algorithm's params subclass :class:`LocalTrainingConfig` and add only their
own fields (STYLE.md rule 19, after pfl's ``FedProxParams(NNAlgorithmParams)``).
``algorithm.kind`` selects the class; an unknown kind is an error listing the known
ones.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

__all__ = [
    "AlgorithmConfig",
    "FedAvgConfig",
    "FedProxConfig",
    "LocalTrainingConfig",
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


_CONFIGS: tuple[type[LocalTrainingConfig], ...] = (FedAvgConfig, FedProxConfig)


def algorithm_names() -> list[str]:
    """Return the known ``algorithm.kind`` values."""
    return [c.model_fields["kind"].default for c in _CONFIGS]


def _default_kind(value: Any) -> Any:
    if isinstance(value, dict) and "kind" not in value:
        return {**value, "kind": "fedavg"}
    return value


AlgorithmConfig = Annotated[
    FedAvgConfig | FedProxConfig,
    Field(discriminator="kind"),
    BeforeValidator(_default_kind),
]
"""The ``algorithm`` section: a discriminated union on ``kind`` (default fedavg)."""
