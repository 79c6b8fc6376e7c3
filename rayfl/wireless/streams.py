"""Per-client uniform streams drawn in blocks of steps, for models that move.

A model that moves (:mod:`rayfl.wireless.mobility`,
:mod:`rayfl.wireless.shadowing`) needs a few uniforms per client per step
(a round, or a leg of a trip). One generator per (client, step) costs ~25 µs
to seed, far more than its draws, so a :class:`BlockStream` seeds one per
(client, block of :data:`BLOCK_STEPS` steps) and hands out its rows:

| symbol | code | meaning |
|---|---|---|
| u_{i,k} ∈ [0, 1)^W | :meth:`BlockStream.draw` | the W uniforms of client i at step k |
| b = ⌊k / B⌋ | ``block`` | the block holding step k, B = :data:`BLOCK_STEPS` |
| (seed, purpose, b, i) | :func:`rayfl.seeding.rng_for` | the key of block b: ``round`` holds b |

Block b of client i is ``rng_for(seed, purpose, round=b, client=i).random((B,
W))`` and step k reads its row k − bB. So u_{i,k} depends on (seed, purpose,
i, k) only: never on which clients share an actor or on the order they are
asked in (packing-independent).

Implementation details:
    1. B = 64 is part of every stream's reproducibility contract, like the
       purpose ids of :data:`rayfl.seeding.PURPOSES`: never change it.
    2. Each client keeps its last block, so walking steps in increasing order
       seeds one generator per client every B steps.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy.special import ndtri

from rayfl.seeding import rng_for_many

__all__ = [
    "BLOCK_STEPS",
    "BlockStream",
    "ClientIds",
    "check_clients",
    "standard_normal",
]

#: Client ids: a sequence of ints or an integer array.
ClientIds = Sequence[int] | npt.NDArray[np.int64]

#: B, the steps per seeded block. Never change (Implementation details 1).
BLOCK_STEPS = 64


def check_clients(clients: ClientIds) -> npt.NDArray[np.int64]:
    """Return ``clients`` as distinct non-negative int64 ids, or raise ValueError.

    Example:
        >>> check_clients(range(3)).tolist()
        [0, 1, 2]
    """
    ids = np.asarray(clients, dtype=np.int64)
    if ids.ndim != 1 or len(np.unique(ids)) != len(ids) or (ids < 0).any():
        raise ValueError("clients must be distinct non-negative ids")
    return ids


def standard_normal(uniform: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Map uniforms in [0, 1) to N(0, 1) draws by the inverse normal CDF.

    The uniform is moved to the middle of its 2^-53 cell first, so neither 0
    nor 1 − 2^-53 maps to an infinite value (the upper half is read from 1 − u,
    which is exact there).

    Example:
        >>> float(standard_normal(0.5 - 2.0**-54))
        0.0
    """
    u = np.asarray(uniform, dtype=np.float64)
    half = 2.0**-54
    lower = np.minimum(u, 0.5 - half) + half  # for u < 0.5
    upper = (1.0 - u) - half  # 1 − u is exact for u >= 0.5
    return np.asarray(np.where(u < 0.5, ndtri(lower), -ndtri(upper)), np.float64)


class BlockStream:
    """The uniforms u_{i,k} of ``clients``, W per step, seeded a block at a time.

    Args:
        seed: The run's seed.
        purpose: One of :data:`rayfl.seeding.PURPOSES`.
        clients: The client ids followed; row r of every draw is ``clients[r]``.
        width: W, uniforms per step.

    Example:
        >>> stream = BlockStream(0, "mobility", [4, 9], width=3)
        >>> stream.draw(np.array([0, 1]), np.array([5, 70])).shape
        (2, 3)
    """

    def __init__(
        self, seed: int, purpose: str, clients: ClientIds, *, width: int
    ) -> None:
        if width < 1:
            raise ValueError(f"width must be >= 1, got {width}")
        self.seed, self.purpose, self.width = int(seed), purpose, int(width)
        self.clients = check_clients(clients)
        n = len(self.clients)
        self._block = np.full(n, -1, dtype=np.int64)  # the block cached per row
        self._values = np.empty((n, BLOCK_STEPS, self.width))

    def draw(
        self, rows: npt.NDArray[np.int64], steps: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """Return u_{i,k} for each (row, step) pair, shape (len(rows), W).

        Args:
            rows: Indices into ``clients``, distinct.
            steps: The step k ≥ 0 of each row.
        """
        rows = np.asarray(rows, dtype=np.int64)
        steps = np.asarray(steps, dtype=np.int64)
        if (steps < 0).any():
            raise ValueError("steps must be >= 0")
        block = steps // BLOCK_STEPS
        stale = rows[self._block[rows] != block]
        if len(stale):
            stale_block = block[self._block[rows] != block]
            streams = rng_for_many(
                self.seed,
                self.purpose,
                rounds=stale_block,
                clients=self.clients[stale],
            )
            shape = (BLOCK_STEPS, self.width)
            self._values[stale] = np.stack([g.random(shape) for g in streams])
            self._block[stale] = stale_block
        return self._values[rows, steps % BLOCK_STEPS].copy()

    def reset(self) -> None:
        """Forget the cached blocks (the draws stay the same)."""
        self._block[:] = -1
