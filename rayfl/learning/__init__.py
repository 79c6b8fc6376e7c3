"""Models, local training and aggregation on flat parameter vectors."""

from rayfl.learning.aggregate import weighted_mean
from rayfl.learning.models import FlatModel, ModelSpec, build_model, init_parameters
from rayfl.learning.train import LocalTrainResult, batch_indices, evaluate, local_sgd
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
