"""The small records and payload bundles that travel between actors."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rayfl.compression.payload import Payload

__all__ = ["Uploads"]


@dataclass(frozen=True)
class Uploads:
    """The uplink payloads of the clients one actor trained this round.

    Attributes:
        clients: Client ids, int64 (m,), ascending.
        payloads: One payload per client (already clipped/noised/compressed).
        weights: Aggregation weights (m,).
    """

    clients: npt.NDArray[np.int64]
    payloads: tuple[Payload, ...]
    weights: npt.NDArray[np.float64]
