"""FedProx (Li et al. 2020, "Federated Optimization in Heterogeneous Networks").

FedAvg whose local objective adds the proximal term (μ/2)‖w − ω^t‖² (eq. 2).

| paper symbol | code name |
|--------------|-----------|
| μ | ``mu`` |
"""

from __future__ import annotations

from rayfl.algorithms.config import FedProxConfig
from rayfl.algorithms.fedavg import FedAvg

__all__ = ["FedProx"]


class FedProx(FedAvg):
    """FedAvg plus the proximal term towards the round's global model."""

    def __init__(self, config: FedProxConfig) -> None:
        super().__init__(config)
        self.prox_weight = config.mu
