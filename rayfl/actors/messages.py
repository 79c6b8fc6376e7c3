"""The small records and payload bundles that travel between actors."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rayfl.compression.payload import Payload
from rayfl.learning.aggregate import PartialSum

__all__ = ["Uploads"]


@dataclass(frozen=True)
class Uploads:
    """The uplink payloads of the clients one actor trained this round.

    When nothing happens to uploads between client and server (no channel
    effects), the actor pre-reduces them: ``payloads`` is empty and ``partial``
    holds their exact weighted sum (exactly what the server would compute).

    Attributes:
        clients: Client ids, int64 (m,), ascending.
        payloads: One payload per client (already clipped/noised/compressed).
        weights: Aggregation weights (m,).
        partial: The pre-reduced sum of the accepted clients, or None.
        rejected: Clients whose update was not finite (dropped in the actor).
    """

    clients: npt.NDArray[np.int64]
    payloads: tuple[Payload, ...]
    weights: npt.NDArray[np.float64]
    partial: PartialSum | None = None
    rejected: tuple[int, ...] = ()
