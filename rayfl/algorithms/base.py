"""The interface every FL algorithm implements: a client half and a server half.

The client half runs inside a client actor for each scheduled client and returns
the vector that enters the uplink pipeline (clip → noise → sparsify → quantize);
the server half runs inside the server actor on what arrived. Algorithms hold no
per-client state themselves: the actor keeps one ``state`` dict per virtual client
(personal models, counters) and passes it in, so packing never changes results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from rayfl.algorithms.config import LocalTrainingConfig
from rayfl.learning.aggregate import PartialSum, partial_sum
from rayfl.learning.models import FlatModel

__all__ = ["Algorithm", "ClientContext", "ClientUpdate"]


@dataclass
class ClientContext:
    """Everything one client's local step may read.

    Attributes:
        client: Client id n.
        round: Round index t (0-based).
        global_vector: The global model ω^t, float32 (dim,), read-only.
        x_train: The client's train inputs (a zero-copy view, read-only).
        y_train: The client's train labels.
        model: The actor's flat torch model (scratch space).
        state: The client's persistent state (personal model, counters...).
        controls: Per-client knobs set by the scheduler this round (e.g. ``lr``).
        rng: The client's batch-order generator for this round.
    """

    client: int
    round: int
    global_vector: npt.NDArray[np.float32]
    x_train: npt.NDArray[np.float32]
    y_train: npt.NDArray[np.int64]
    model: FlatModel
    state: dict[str, Any]
    controls: dict[str, float]
    rng: np.random.Generator


@dataclass(frozen=True)
class ClientUpdate:
    """What the client half returns.

    Attributes:
        vector: The vector that enters the uplink pipeline, float32 (dim,).
        weight: Its aggregation weight (e.g. the number of train samples).
        metrics: Small scalar metrics (``train_loss``, ``steps``...).
        support: Optional int32 positions of the coordinates the upload carries
            (a sparse upload: only ``vector[support]`` plus a keep-bitmap are
            sent, seed 002 §2.3); None = dense.
        scale: Multiplier the receiver applies to the carried values (1/s for an
            unbiased sparsifier); used only with ``support``.
    """

    vector: npt.NDArray[np.float32]
    weight: float
    metrics: dict[str, float] = field(default_factory=dict)
    support: npt.NDArray[np.int32] | None = None
    scale: float = 1.0


class Algorithm:
    """Base class: FedAvg-style uploads of model deltas, weighted averaging.

    Args:
        config: The ``algorithm`` config section.
    """

    #: True when the uplink carries the delta u − ω (so clipping bounds the update).
    uploads_delta: bool = True
    #: Per-client knobs a scheduler may set each round: name → (low, high). The
    #: name is also the config field holding the default value.
    controls: ClassVar[dict[str, tuple[float, float]]] = {}

    def __init__(self, config: LocalTrainingConfig) -> None:
        self.config = config

    def client_update(self, ctx: ClientContext) -> ClientUpdate:
        """Train one client and return its upload (override in subclasses)."""
        raise NotImplementedError

    def client_update_many(self, contexts: list[ClientContext]) -> list[ClientUpdate]:
        """Train several clients of one actor (default: one after another)."""
        return [self.client_update(ctx) for ctx in contexts]

    def server_update(
        self,
        global_vector: npt.NDArray[np.float32],
        received: npt.NDArray[np.float32],
        weights: npt.NDArray[np.float64],
    ) -> npt.NDArray[np.float32]:
        """Return ω^{t+1} from the received uploads (rows in client-id order).

        Args:
            global_vector: ω^t, float32 (dim,).
            received: The uploads that arrived, float32 (m, dim); m may be 0.
            weights: Their aggregation weights (m,).

        Returns:
            ω^{t+1}; ω^t unchanged when nothing arrived.
        """
        return self.combine(global_vector, partial_sum(received, weights))

    def combine(
        self, global_vector: npt.NDArray[np.float32], summed: PartialSum
    ) -> npt.NDArray[np.float32]:
        """Return ω^{t+1} from the (fixed-point) weighted sum of what arrived.

        Args:
            global_vector: ω^t, float32 (dim,).
            summed: Σ w_n u_n and Σ w_n over the arrived uploads (possibly
                pre-reduced inside the client actors).

        Returns:
            ω^{t+1}; ω^t unchanged when nothing arrived.
        """
        if summed.count == 0:
            return np.array(global_vector, dtype=np.float32)
        mean = summed.mean()
        if self.uploads_delta:
            return (global_vector + mean).astype(np.float32)
        return mean

    def eval_vectors(
        self, global_vector: npt.NDArray[np.float32], state: dict[str, Any]
    ) -> dict[str, npt.NDArray[np.float32]]:
        """Return the models to evaluate for a client: ``global`` and maybe ``personal``."""
        out = {"global": global_vector}
        if "personal" in state:
            out["personal"] = state["personal"]
        return out
