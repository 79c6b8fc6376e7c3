"""The edge server actor: aggregates its subnet, adds trusted-edge noise.

Numpy only (no torch import), so ten edges cost almost nothing next to the
client actors; the driver places each edge on the node of its devices' client
actor (soft node affinity) and reserves no CPU for it.

One call is one aggregation of subnet c (spec §2.3–2.4, Alg. 2 lines 7–13):

    w̄_c ← w̄_c + Σ_j ρ_{j,c} δ_j + ñ_c,     δ_j = −u_j (+ n_j if untrusted)

where the device deltas arrive pre-summed exactly (the flat engine's
``PartialSum``, :class:`rayfl.exactsum.ExactSum`) and ñ_c ~ N(0, σ̄² I_M) is drawn here only for a
trusted edge (σ̄ = 0 otherwise), from (seed, "hier_edge_noise", period, edge).

Implementation details:
    1. The sum uses :mod:`rayfl.exactsum` (numpy only) and repeats
       ``Algorithm.combine`` without importing it: importing ``rayfl.learning``
       would pull torch into the edge process. With one edge and no noise the
       result equals the flat cloud's bit for bit (tested).
    2. Stateless: the driver threads each edge's model ref from call to call, so
       only ObjectRefs cross actors and a restarted edge loses nothing.
    3. ``extra_std`` is used only by ``local_at_global`` for an untrusted subnet:
       the devices' global noise on a zero update, averaged, is one draw of
       N(0, σ²/s_c) (same distribution; drawn at the edge).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import ray

from rayfl.actors.quiet_exit import quiet_exit
from rayfl.exactsum import ExactSum
from rayfl.seeding import rng_for

__all__ = ["EdgeHost", "EdgeServer", "apply_sums"]


def apply_sums(
    model: npt.NDArray[np.float32], sums: tuple[ExactSum | None, ...]
) -> tuple[npt.NDArray[np.float32], int]:
    """Return model + Σ w δ / Σ w (float32) and the number of uploads summed.

    Example:
        >>> from rayfl.exactsum import exact_sum
        >>> s = exact_sum(np.array([[1.0, 2.0]], np.float32), [2.0])
        >>> apply_sums(np.zeros(2, np.float32), (s,))[0].tolist()
        [1.0, 2.0]
    """
    parts = [s for s in sums if s is not None and s.count > 0]
    if not parts:
        return np.array(model, dtype=np.float32), 0
    total = sum(parts[1:], start=parts[0])
    return (model + total.mean()).astype(np.float32), total.count


def _arrived(sums: tuple[Any, ...]) -> tuple[ExactSum | None, ...]:
    """Fetch the uploads passed as ``[ref]``; a dead device actor's is None.

    The driver wraps each device actor's sum in a list so that Ray hands the
    edge the reference instead of failing the whole aggregation when that
    actor died, or was restarted by Ray and refused the call (``StateLost``):
    the lost sum is skipped like a lost packet.
    """
    out = []
    for s in sums:
        if isinstance(s, list):
            try:
                s = ray.get(s[0])
            except ray.exceptions.RayError as err:
                if not _lost(err):
                    raise
                s = None
        out.append(s)
    return tuple(out)


def _lost(err: Exception) -> bool:
    """Whether ``err`` means the device actor's upload is lost.

    ``rayfl.actors.restart.LOST_CALL`` is imported here, on the failure path
    only: importing ``rayfl.actors`` brings torch, which an edge never needs
    otherwise.
    """
    from rayfl.actors.restart import LOST_CALL

    return isinstance(err, LOST_CALL)


class EdgeHost:
    """The engine behind :class:`EdgeServer`, usable without Ray in tests.

    Args:
        edge: Edge id c.
        seed: Run seed.
        trusted: Whether the edge is trusted (adds the subnet noise).
    """

    def __init__(self, edge: int, seed: int, trusted: bool) -> None:
        quiet_exit()  # a SIGTERM at ray.kill ends it without a forwarded traceback
        self.edge = int(edge)
        self.seed = int(seed)
        self.trusted = bool(trusted)

    def reset(self, seed: int) -> None:
        """Start a new run (new seed)."""
        self.seed = int(seed)

    def aggregate(
        self,
        period: int,
        model: npt.NDArray[np.float32],
        noise_std: float,
        extra_std: float,
        *sums: ExactSum | None,
    ) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        """Aggregate one period's uploads of the subnet.

        Args:
            period: Global index of the aggregation (keys the noise).
            model: w̄_c at the subnet's last sync, float32 (dim,).
            noise_std: σ̄ of the trusted-edge noise (0: none).
            extra_std: See implementation detail 3 (0 otherwise).
            *sums: Pre-reduced device uploads, one per client-actor call, each
                an ``ExactSum`` or ``[ref]`` of one (fetched here; a dead
                device actor's is skipped).

        Returns:
            The new w̄_c (or v_c at a global aggregation) and a small record.
        """
        new, count = apply_sums(model, _arrived(sums))
        std = float(np.hypot(noise_std, extra_std))
        noise_norm = 0.0
        if std > 0:
            rng = rng_for(self.seed, "hier_edge_noise", round=period, client=self.edge)
            noise = rng.normal(0.0, std, size=new.shape)
            noise_norm = float(np.linalg.norm(noise))
            new = (new + noise).astype(np.float32)
        return new, {
            "edge": self.edge,
            "period": int(period),
            "uploads": count,
            "edge_noise_std": std,
            "edge_noise_norm": noise_norm,
        }

    def ping(self) -> str:
        """Return the node id this actor runs on (placement reports)."""
        return ray.get_runtime_context().get_node_id()


# Any: Ray's stubs give the handle's methods no .remote
EdgeServer: Any = ray.remote(EdgeHost)
"""``EdgeHost`` as a Ray actor class."""
