"""The ``model`` section of a run config: the model every client trains.

Re-exported by :mod:`rayfl.config`; read by :func:`rayfl.learning.models.build_model`
callers (the client actors and the driver's initial vector).

Example:
    >>> ModelConfig(kind="mlp", hidden=[200]).hidden
    (200,)
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ModelConfig"]


class ModelConfig(BaseModel):
    """The model trained by every client (the architectures of the WPFL paper's experiments)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    kind: Literal["mlr", "mlp", "cnn"] = Field(
        "mlp",
        description="Architecture: mlr (multinomial logistic regression), mlp "
        "(fully connected, widths in `hidden`), cnn (PFLlib FedAvgCNN, images only).",
    )
    hidden: tuple[Annotated[int, Field(ge=1, le=65_536)], ...] = Field(
        (100,),
        max_length=64,
        description="Hidden layer widths of the MLP (each 1..65536, at most 64 "
        "layers), e.g. [200] for 784-200-10.",
    )
