"""The interface every FL algorithm implements: a client half and a server half.

The client half runs inside a client actor for each scheduled client and returns
the vector that enters the uplink pipeline (clip → noise → sparsify → quantize);
the server half runs inside the server actor on what arrived. Algorithms hold no
per-client state themselves: the actor keeps one ``state`` dict per virtual client
(personal models, counters) and passes it in, so packing never changes results.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from rayfl.algorithms.config import LocalTrainingConfig
from rayfl.learning.aggregate import PartialSum, partial_sum
from rayfl.privacy.config import PrivacyConfig

if TYPE_CHECKING:  # the server half of an algorithm needs no torch
    from rayfl.learning.models import FlatModel

__all__ = ["Algorithm", "ClientContext", "ClientUpdate", "Download"]


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
        state: The client's persistent state (personal model, counters...), a
            mapping backed by the actor's compact store (rayfl.actors.state).
        controls: Per-client knobs set by the scheduler this round (e.g. ``lr``).
        rng: The client's batch-order generator for this round.
        max_train_size: The largest train split of any client of the run (a
            run-level constant for packing-independent vectorized training).
        download: The client's own download this round (a :class:`Download`'s
            ``data``) when the algorithm has ``personalized_downloads``, else None.
        num_rounds: The run's planned number of rounds T (schedules such as
            APPLE's cosine decay); 0 when unknown.
        num_train_all: Train-split sizes of all N clients (public metadata, e.g.
            APPLE's prior p⁰), or None.
        downlink_bit_error_rate: BER of the client's copy of the broadcast this
            round (0 = error-free; used by algorithms with ``uses_downlink``).
    """

    client: int
    round: int
    global_vector: npt.NDArray[np.float32]
    x_train: npt.NDArray[np.float32]
    y_train: npt.NDArray[np.int64]
    model: FlatModel
    state: MutableMapping[str, Any]
    controls: dict[str, float]
    rng: np.random.Generator
    max_train_size: int | None = None
    download: Any = None
    num_rounds: int = 0
    num_train_all: npt.NDArray[np.int64] | None = None
    downlink_bit_error_rate: float = 0.0


@dataclass(frozen=True)
class Download:
    """One client's personalized download (FedAMP's cloud model, APPLE's cores).

    Attributes:
        data: What the client receives (arrays, possibly shared between clients:
            the server puts each distinct object in the object store once).
        num_elements: Number of float32 values actually sent to this client; the
            downlink carries 32·``num_elements`` bits.
    """

    data: Any
    num_elements: int


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

    #: True when the uplink carries the delta u − ω (so clipping bounds the update);
    #: ``clip_target="update"`` where the config has that field.
    uploads_delta: bool = True
    #: Per-client knobs a scheduler may set each round: name → (low, high). The
    #: name is also the config field holding the default value (here η, ``lr``).
    controls: ClassVar[dict[str, tuple[float, float]]] = {"lr": (0.0, 1.0)}
    #: True when the server sends each scheduled client its own download (computed
    #: by :meth:`server_downloads` from the uploads it kept) besides ω.
    personalized_downloads: ClassVar[bool] = False
    #: True when clients receive the global model over a noisy downlink: the
    #: driver then passes each client's downlink BER in ``ClientContext``.
    uses_downlink: ClassVar[bool] = False
    #: True when unscheduled clients also update (``personal_update``) each round.
    updates_unscheduled: bool = False
    #: True when every client has a personal model ``state["personal"]`` to
    #: evaluate; before the client's first round it is the global model.
    keeps_personal: ClassVar[bool] = False
    #: Record keys (e.g. from :meth:`payload_metrics`) the runner copies into
    #: metrics.parquet, NaN where a client has none.
    logged_metrics: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: LocalTrainingConfig) -> None:
        self.config = config
        clip_target = getattr(config, "clip_target", None)
        if clip_target is not None:
            self.uploads_delta = clip_target == "update"

    def bind(self, *, privacy: PrivacyConfig, seed: int) -> None:
        """Read run-level settings beyond the algorithm section (default: none).

        Args:
            privacy: The run's ``privacy`` section.
            seed: The run's seed.
        """

    @classmethod
    def calibrate_noise(
        cls, config: Any, *, num_train: npt.ArrayLike
    ) -> tuple[float, float] | None:
        """Return (σ, Δs) overriding the privacy calibration, or None.

        Args:
            config: The run's sections (``rayfl.uplink.UplinkSections``: privacy,
                compression, algorithm, wireless, seed, rounds).
            num_train: Train-set size per client (N,).
        """
        return None

    def personal_update(self, ctx: ClientContext) -> dict[str, float]:
        """Update an unscheduled client's own state (``updates_unscheduled``)."""
        raise NotImplementedError

    def payload_metrics(self, payload: Any) -> dict[str, float]:
        """Return extra metrics of an upload's payload (default: none)."""
        return {}

    def encode_upload(self, payload: Any, ctx: ClientContext) -> Any:
        """Re-encode a client's upload after its uplink stages (default: as is).

        Seed 000's Dithering baseline replaces the R-bit quantizer here.
        """
        return payload

    @classmethod
    def quantizes_uploads(cls, config: Any) -> bool:
        """Whether ``encode_upload`` turns uploads into codes (bit flips, no CRC).

        Args:
            config: The run's sections (``rayfl.uplink.UplinkSections``).
        """
        return False

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
        """Return ω^{t+1} from the exact weighted sum of what arrived.

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
        self, global_vector: npt.NDArray[np.float32], state: Mapping[str, Any]
    ) -> dict[str, npt.NDArray[np.float32]]:
        """Return the models to evaluate for a client: ``global`` and maybe ``personal``."""
        out = {"global": global_vector}
        if self.keeps_personal or "personal" in state:
            out["personal"] = state.get("personal", global_vector)
        return out

    def eval_train_objectives(
        self, train_loss: float, state: Mapping[str, Any]
    ) -> dict[str, float]:
        """Return extra per-client train metrics built on the evaluated model's loss.

        Called by the client actor after it has measured ``train_loss`` (the
        evaluated model's mean cross-entropy on the train split). Default: none.
        Ditto adds its regularised PL training losses.
        """
        return {}

    def eval_vectors_for(
        self, ctx: ClientContext
    ) -> dict[str, npt.NDArray[np.float32]]:
        """Return the models to evaluate when the algorithm needs the client's data.

        Called by the client actor at evaluation time with the latest global model,
        the client's train split and state, and an evaluation-only generator.
        Default: :meth:`eval_vectors` (no data needed). Per-FedAvg overrides it to
        adapt ω with one local step before testing.
        """
        return self.eval_vectors(ctx.global_vector, ctx.state)

    # ------------------------------------------------------------ server side
    def server_receive(
        self, store: dict[str, Any], client: int, vector: npt.NDArray[np.float32]
    ) -> None:
        """Keep an arrived upload in the server's store (``personalized_downloads``).

        Args:
            store: The server's persistent store (a plain dict, checkpointed).
            client: The uploading client n.
            vector: Its upload as received (after channel and DP noise).
        """
        store.setdefault("uploads", {})[int(client)] = np.array(vector, np.float32)

    def server_downloads(
        self,
        round: int,
        global_vector: npt.NDArray[np.float32],
        store: dict[str, Any],
        clients: list[int],
        num_clients: int,
    ) -> dict[int, Download]:
        """Return each scheduled client's download (``personalized_downloads`` only).

        Args:
            round: Round index t.
            global_vector: ω^t.
            store: The server's store (uploads kept by :meth:`server_receive`).
            clients: The scheduled clients, ascending.
            num_clients: N, the number of clients of the run.

        Returns:
            client → :class:`Download`.
        """
        raise NotImplementedError(
            f"{type(self).__name__} has no personalized downloads"
        )
