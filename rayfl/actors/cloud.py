"""The cloud server actor: receives uploads, applies the channel, aggregates.

Server side of the uplink (STYLE.md rule 8), in this order:
    1. channel effects on each received payload (bit flips on quantized codes,
       or the packet is lost), drawn from (seed, "effects", round, client);
    2. rejection of non-finite updates (a diverged client must not poison ω),
       recorded with its reason (``REJECT_NON_FINITE``) for the metrics'
       ``rejected`` column;
    3. the algorithm's aggregation over what arrived, in client-id order;
    4. server-side Gaussian noise when privacy placement is ``cloud``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import ray

from rayfl.actors.messages import Uploads
from rayfl.actors.quiet_exit import quiet_exit
from rayfl.actors.setup import ActorSetup
from rayfl.actors.shared_data import HoldsData
from rayfl.algorithms.registry import make_algorithm
from rayfl.learning.aggregate import partial_sum
from rayfl.seeding import rng_for
from rayfl.wireless.effects import flip_bits

__all__ = [
    "REJECT_ACTOR_LOST",
    "REJECT_NON_FINITE",
    "CloudServer",
    "LinkOutcome",
    "ServerHost",
]

REJECT_NON_FINITE = "non_finite"
"""``rejected`` reason: the update held NaN or ±inf (refused, not aggregated)."""
REJECT_ACTOR_LOST = "actor_lost"
"""``rejected`` reason: the client's actor died before its update was returned."""


@dataclass(frozen=True)
class LinkOutcome:
    """The channel realisation of the scheduled clients' uplinks this round.

    Attributes:
        clients: Scheduled client ids, int64 (m,).
        bit_error_rate: Uplink BER per client (m,); used by ``bit_flip`` effects.
        delivered: Whether each packet arrived (m,) bool; False = lost.
    """

    clients: npt.NDArray[np.int64]
    bit_error_rate: npt.NDArray[np.float64]
    delivered: npt.NDArray[np.bool_]


class ServerHost:
    """The engine behind :class:`CloudServer`, usable without Ray in tests."""

    def __init__(self, setup: ActorSetup) -> None:
        quiet_exit()
        self.setup = setup
        self.algorithm = make_algorithm(setup.algorithm)
        self.algorithm.bind(privacy=setup.privacy, seed=setup.seed)
        wireless = setup.wireless
        self.bit_flips = wireless is not None and wireless.effects == "bit_flip"
        #: What ``personalized_downloads`` algorithms keep between rounds (uploads).
        self.store: dict[str, Any] = {}

    def reset(self, setup: ActorSetup) -> None:
        """Start a new run: new setup (seed)."""
        self.setup = setup
        self.store = {}
        self.algorithm.bind(privacy=setup.privacy, seed=setup.seed)

    def downloads(
        self,
        round: int,
        global_vector: npt.NDArray[np.float32],
        clients: list[int],
        num_clients: int,
    ) -> dict[int, Any]:
        """Return each scheduled client's :class:`~rayfl.algorithms.base.Download`."""
        return self.algorithm.server_downloads(
            round, global_vector, self.store, [int(c) for c in clients], num_clients
        )

    def download_refs(
        self,
        round: int,
        global_vector: npt.NDArray[np.float32],
        clients: list[int],
        num_clients: int,
    ) -> tuple[dict[int, Any], dict[int, float]]:
        """Put the downloads in the object store: client → ref, and client → bits.

        A data object shared by several clients (APPLE's core models) is put once.
        """
        out = self.downloads(round, global_vector, clients, num_clients)
        refs: dict[int, Any] = {}
        put: dict[int, Any] = {}
        for c, d in out.items():
            key = id(d.data)
            if key not in put:
                put[key] = ray.put(d.data)
            refs[c] = put[key]
        return refs, {c: 32.0 * d.num_elements for c, d in out.items()}

    def get_state(self) -> dict[str, Any]:
        """Return the server's store (for checkpoints)."""
        return self.store

    def set_state(self, store: dict[str, Any]) -> None:
        """Restore a store saved by :meth:`get_state`."""
        self.store = dict(store)

    def ping(self) -> str:
        """Return the node id this actor runs on (placement reports)."""
        return ray.get_runtime_context().get_node_id()

    def aggregate(
        self,
        round: int,
        global_vector: npt.NDArray[np.float32],
        link: LinkOutcome | None,
        *uploads: Uploads,
    ) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        """Return ω^{t+1} and a record of delivered / rejected clients.

        Args:
            round: Round index t.
            global_vector: ω^t, float32 (dim,).
            link: The round's channel outcome, or None for ideal links.
            *uploads: One bundle per client actor that trained clients.

        Returns:
            The new global vector and ``{"delivered": [...], "rejected": [...],
            "reasons": {client: reason}}`` (every rejection is non-finite).
        """
        seed = self.setup.seed
        lookup = _link_lookup(link)
        items = sorted(
            (int(c), p, float(w))
            for u in uploads
            if u.partial is None
            for c, p, w in zip(u.clients, u.payloads, u.weights, strict=True)
        )
        rows, weights, delivered = [], [], []
        rejected = [c for u in uploads for c in u.rejected]
        for client, payload, weight in items:
            ber, ok = lookup.get(client, (0.0, True))
            if not ok:
                continue
            if self.bit_flips:
                payload = _flipped(payload, ber, seed=seed, round=round, client=client)
            dense = payload.to_dense()
            if not np.all(np.isfinite(dense)):
                rejected.append(client)
                continue
            rows.append(dense)
            weights.append(weight)
            delivered.append(client)
        dim = len(global_vector)
        stack = np.stack(rows) if rows else np.zeros((0, dim), np.float32)
        summed = partial_sum(stack, weights)
        if self.algorithm.personalized_downloads:  # never pre-reduced (system.py)
            for client, row in zip(delivered, rows, strict=True):
                self.algorithm.server_receive(self.store, client, row)
        for u in uploads:
            if u.partial is not None:  # pre-reduced in the actor: add exactly
                summed = summed + u.partial
                weights += [
                    w
                    for c, w in zip(u.clients, u.weights, strict=True)
                    if int(c) not in u.rejected
                ]
                delivered += [int(c) for c in u.clients if int(c) not in u.rejected]
        new = self.algorithm.combine(global_vector, summed)
        # Central DP: the weighted mean moves by at most C·max w/Σw per client.
        std = self.setup.server_noise_std * (
            max(weights) / sum(weights) if weights else 0.0
        )
        if std > 0:
            rng = rng_for(seed, "server_noise", round=round)
            new = (new + rng.normal(0.0, std, size=dim)).astype(np.float32)
        return new, {
            "delivered": sorted(delivered),
            "rejected": sorted(rejected),
            "reasons": {int(c): REJECT_NON_FINITE for c in rejected},
        }


def _link_lookup(link: LinkOutcome | None) -> dict[int, tuple[float, bool]]:
    """Return client → (uplink BER, delivered) of the round (empty: ideal links)."""
    lookup = {}
    if link is not None:
        for c, ber, ok in zip(
            link.clients, link.bit_error_rate, link.delivered, strict=False
        ):
            lookup[int(c)] = (float(ber), bool(ok))
    return lookup


def _flipped(payload: Any, ber: float, *, seed: int, round: int, client: int) -> Any:
    """Return ``payload`` after the channel's bit flips (quantized codes only)."""
    if payload.codes is None or not ber > 0:
        return payload
    rng = rng_for(seed, "effects", round=round, client=client)
    return payload.with_codes(
        flip_bits(
            payload.codes,
            bits_per_element=payload.bits_per_element,
            bit_error_rate=ber,
            rng=rng,
        )
    )


class _CloudHost(ServerHost, HoldsData):
    """``ServerHost`` that also keeps the run's dataset ref (``shared_data``).

    Args:
        setup: Run-level values.
        held: What the client hosts fetch the dataset through
            (:func:`rayfl.actors.shared_data.hold_data`); empty: nothing.
    """

    def __init__(self, setup: ActorSetup, held: Sequence[Any] = ()) -> None:
        super().__init__(setup)
        self.hold(list(held))


# Any: Ray's stubs give the handle's methods no .remote
CloudServer: Any = ray.remote(_CloudHost)
"""``ServerHost`` as a Ray actor class; it can hold the run's dataset ref."""
