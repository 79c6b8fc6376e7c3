"""Models, local training and aggregation on flat parameter vectors.

The names below are imported on first use (they import torch), so reading
``rayfl.learning.config`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rayfl.learning.aggregate import weighted_mean
    from rayfl.learning.models import (
        FlatModel,
        ModelSpec,
        build_model,
        init_parameters,
    )
    from rayfl.learning.train import (
        LocalTrainResult,
        batch_indices,
        evaluate,
        local_sgd,
    )
    from rayfl.learning.vectorized import choose_path, fast_local_sgd, local_sgd_many

__all__ = [
    "FlatModel",
    "LocalTrainResult",
    "ModelSpec",
    "batch_indices",
    "build_model",
    "choose_path",
    "fast_local_sgd",
    "local_sgd_many",
    "evaluate",
    "init_parameters",
    "local_sgd",
    "weighted_mean",
]


def __getattr__(name: str) -> Any:
    if name == "weighted_mean":
        from rayfl.learning import aggregate

        return aggregate.weighted_mean
    if name in ("FlatModel", "ModelSpec", "build_model", "init_parameters"):
        from rayfl.learning import models

        return getattr(models, name)
    if name in ("LocalTrainResult", "batch_indices", "evaluate", "local_sgd"):
        from rayfl.learning import train

        return getattr(train, name)
    if name in ("choose_path", "fast_local_sgd", "local_sgd_many"):
        from rayfl.learning import vectorized

        return getattr(vectorized, name)
    raise AttributeError(f"module 'rayfl.learning' has no attribute {name!r}")
