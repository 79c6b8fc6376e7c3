"""StarColumns: the star's lockstep lanes as columns of (lane × client) arrays.

:class:`rayfl.star.lanes.StarLanes` runs E lanes over shared client hosts but
concludes each lane's round in Python on the driver (its uplink model, its
cloud, its tracker). For the configs :func:`columns_refusal` accepts, one
lockstep round here is a few array operations over every lane at once:

1. the channel of round t of every lane: one fading draw per lane from its
   own (seed, "channel", t) generator, the rest (gain, SNR, dB) on (E, N, K)
   arrays (:meth:`StarColumns.channel`);
2. the link of every scheduled (lane, subchannel): SNR, rate, BER, packet
   error rate, latency, energy and the packet-loss draw of (seed,
   "packet_loss", t), as :meth:`rayfl.uplink.UplinkModel.link` computes them,
   element by element (:func:`link_columns`);
3. training: one ``train_columns`` call per host with the rows (lane, round,
   client) it hosts; the updates come back stacked, since these configs have
   no uplink stage (no clipping, noise or compression);
4. aggregation: FedAvg's exact weighted sum (:mod:`rayfl.exactsum`) of every
   lane at once: the float64 running sum with its TwoSum check on an
   (E, K, dim) array, a lane whose sum is not exact that way summed by
   :func:`rayfl.exactsum.exact_sum` (the same bits either way);
5. the ledger's uploads, the tracker's losses and staleness, and one
   ``evaluate_columns`` call per host for every client's test split.

Each lane's numbers are those of its :class:`StarLanes` run (so of an engine
run with its seed): the same generators, the same element-wise formulas, the
same trainer, the same exact sum. The test losses after a round come from a
test-split-only forward pass: equal to the lanes' to float32 rounding
(:mod:`rayfl.learning.segment_eval`, Implementation details 1).
tests/envs/test_columns.py compares the vector env on both paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import ray

from rayfl.exactsum import exact_sum, group_running_sums, plain_divisions
from rayfl.privacy.pipeline import build_client_stages
from rayfl.seeding import rng_for_many
from rayfl.star.lanes import StarLanes
from rayfl.uplink import UplinkModel
from rayfl.wireless.channel import fading_power_gain, shannon_rate_bps, snr_linear
from rayfl.wireless.config import moving_world_fields
from rayfl.wireless.effects import _latency_and_energy
from rayfl.wireless.modulation import outage, packet_error_rate, qam_bit_error_rate
from rayfl.wireless.units import linear_to_db, power_levels_w

__all__ = ["ColumnRound", "StarColumns", "columns_refusal", "link_columns"]


def columns_refusal(config: Any) -> str | None:
    """Return why ``config``'s lanes cannot run as columns (None: they can).

    The columns need what :func:`rayfl.star.lanes.check_lanes` needs, a
    ``wireless`` section without the broadcast downlink time nor a moving
    world (``wireless`` fields of issue 48: the lanes run those), and uploads that
    leave the client as trained: no privacy mechanism, no clipping, no
    compression (no client uplink stage), an algorithm that averages updates
    (FedAvg, FedProx).
    """
    from rayfl.algorithms.registry import algorithm_class

    if config.wireless is None:
        return "columns need a wireless section"
    if config.wireless.downlink_latency:
        return "columns do not model wireless.downlink_latency"
    moving = moving_world_fields(config.wireless)
    if moving:  # the lanes (rayfl.star.lanes) run them through each UplinkModel
        return f"columns do not model a moving world yet: {', '.join(moving)}"
    privacy, compression = config.privacy, config.compression
    if privacy.mechanism != "none" or privacy.clip_norm:
        return "columns need privacy.mechanism none and no clip_norm"
    if build_client_stages(privacy, compression, noise_std=0.0):
        return "columns need no compression (uploads leave the client as trained)"
    algorithm = algorithm_class(config.algorithm)
    if config.algorithm.kind not in ("fedavg", "fedprox"):
        return f"columns need algorithm.kind fedavg or fedprox, got {config.algorithm.kind}"
    if algorithm.quantizes_uploads(config):
        return "columns need uploads that are not coded by the algorithm"
    return None


@dataclass
class ColumnRound:
    """One lockstep round of P lanes (rows in the order of ``lanes``).

    Attributes:
        lanes: (P,) the lanes.
        clients: (P, K) the client on each subchannel, -1 where idle.
        delivered: (P, K) whether its update arrived.
        latency_s, energy_j, bits: (P, N) per client (0 when not scheduled).
        test_loss, test_acc: (P, N) every client's evaluation after the round.
    """

    lanes: npt.NDArray[np.int64]
    clients: npt.NDArray[np.int64]
    delivered: npt.NDArray[np.bool_]
    latency_s: npt.NDArray[np.float64]
    energy_j: npt.NDArray[np.float64]
    bits: npt.NDArray[np.float64]
    test_loss: npt.NDArray[np.float64]
    test_acc: npt.NDArray[np.float64]


def link_columns(
    config: Any,
    gain: npt.NDArray[np.float64],
    noise_power_w: float,
    num_samples: npt.NDArray[np.float64],
    payload_bits: float,
) -> dict[str, npt.NDArray[Any]]:
    """Return the link of each scheduled entry (any shape), as ``UplinkModel.link``.

    Args:
        config: The run config (its ``wireless`` and ``compression`` sections).
        gain: Linear gain of each entry's client on its subchannel.
        noise_power_w: σ_0² per subchannel.
        num_samples: Samples each entry's client trains on.
        payload_bits: The payload size (the same for every upload here).
    """
    wireless = config.wireless
    # the maximum of the env's power levels (its action has no power part here)
    top = power_levels_w(
        tx_power_dbm=wireless.tx_power_dbm, power_levels=wireless.power_levels
    )[-1]
    power = np.full(gain.shape, float(top))
    snr = snr_linear(tx_power_w=power, gain_linear=gain, noise_power_w=noise_power_w)
    snr_db = linear_to_db(snr)
    rate = shannon_rate_bps(bandwidth_hz=wireless.bandwidth_hz, snr_linear=snr)
    ber = qam_bit_error_rate(snr, qam_order=wireless.qam_order)
    bits = np.full(gain.shape, float(payload_bits))
    with np.errstate(divide="ignore", invalid="ignore"):
        transmit_s = np.where(bits == 0, 0.0, bits / rate)
    latency, energy = _latency_and_energy(
        wireless, power, bits, rate, transmit_s, num_samples, None
    )
    deadline = np.inf if wireless.max_latency_s is None else wireless.max_latency_s
    return {
        "latency_s": np.broadcast_to(latency, gain.shape).astype(np.float64),
        "energy_j": np.broadcast_to(energy, gain.shape).astype(np.float64),
        "packet_error_rate": packet_error_rate(ber, payload_bits=bits),
        "lost": outage(snr_db, threshold_db=wireless.snr_threshold_db)
        | (transmit_s > deadline),
    }


class StarColumns(StarLanes):
    """E star runs of one config as columns (see the module docstring).

    Args:
        config: The run config shared by the lanes.
        num_lanes: E.

    Raises:
        ValueError: If :func:`rayfl.star.lanes.check_lanes` or
            :func:`columns_refusal` refuses ``config``.
    """

    def __init__(self, config: Any, num_lanes: int) -> None:
        refusal = columns_refusal(config)
        if refusal is not None:
            raise ValueError(refusal)
        super().__init__(config, num_lanes)
        e, n = self.num_lanes, self.num_clients
        k = config.wireless.num_subchannels
        self.num_subchannels = k
        self.seeds = np.zeros(e, np.int64)
        self.vectors = np.zeros((e, self.dim), np.float32)
        self.large = np.ones((e, n))
        self.releases = np.zeros((e, n), np.int64)
        self.loss = np.zeros((e, n))
        self.staleness = np.zeros((e, n))
        self.tracking = np.zeros(e, bool)
        self.gain = np.zeros((e, n, k))
        self.gain_round = np.full(e, -1, np.int64)
        #: Each lane's evaluation at its restart (the first observation's).
        self.first_loss, self.first_acc = np.zeros((e, n)), np.zeros((e, n))
        self.evaluated = np.zeros(e, bool)
        assert self.pool is not None
        self._hosted = [np.asarray(list(g), np.int64) for g in self.pool.groups]
        self.payload_bits = 32.0 * self.dim
        algo = config.algorithm
        self.samples = (
            np.full(n, float(algo.local_steps * algo.batch_size))
            if algo.local_steps
            else self.num_train.astype(np.float64) * algo.local_epochs
        )
        self.noise_power_w = 0.0

    # ------------------------------------------------------------------ runs
    def restart(self, lane: int, seed: int) -> None:
        """Start a new run with ``seed`` in ``lane`` (see :meth:`StarLanes.restart`)."""
        super().restart(lane, seed)
        run = self._lane(lane)
        channel = run.uplink.channel
        assert channel is not None
        self.noise_power_w = channel.noise_power_w
        self.seeds[lane] = seed
        self.vectors[lane] = run.vector
        self.large[lane] = channel.large_scale_gain_linear
        self.releases[lane] = 0
        self.staleness[lane] = 0
        self.tracking[lane] = False
        self.gain_round[lane] = -1
        self.evaluated[lane] = False

    def _vectors(self) -> npt.NDArray[np.float32]:
        return self.vectors

    def uplink(self, lane: int) -> UplinkModel:
        """Return ``lane``'s uplink model, its ledger brought up to the columns' uploads.

        The columns count uploads in ``releases``; a caller that reads the
        lane's model (a policy's eligibility, ``action_masks``) gets the
        ledger the lane path would hold: one release (z = 0, q = 1) per upload.
        """
        uplink = super().uplink(lane)
        behind = self.releases[lane] - uplink.ledger.upload_count
        if behind.any():
            uplink.record_releases(np.repeat(np.arange(self.num_clients), behind))
        return uplink

    def eligible(self, lanes: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """(P, N) which clients may upload (T0 cap; no ε budget without privacy)."""
        cap = self.config.privacy.max_uploads
        out = np.ones((len(lanes), self.num_clients), bool)
        return out if cap is None else self.releases[lanes] < cap

    def channel(
        self, lanes: npt.NDArray[np.int64], rounds: npt.NDArray[np.int64]
    ) -> None:
        """Draw round ``rounds[i]``'s channel of each lane (kept in ``gain``)."""
        wireless = self.config.wireless
        shape = (self.num_clients, self.num_subchannels)
        todo = np.flatnonzero(self.gain_round[lanes] != rounds)
        if len(todo) == 0:
            return
        pick = lanes[todo]
        fading = np.empty((len(todo), *shape))
        rngs = rng_for_many(self.seeds[pick], "channel", rounds=rounds[todo])
        for j, rng in enumerate(rngs):
            fading[j] = fading_power_gain(
                shape, kind=wireless.fading, rician_k_db=wireless.rician_k_db, rng=rng
            )
        self.gain[pick] = self.large[pick][:, :, None] * fading
        self.gain_round[pick] = rounds[todo]

    def initial_evaluation(self, lanes: list[int]) -> None:
        """Evaluate the lanes restarted and not evaluated yet (their first losses)."""
        self._get(self._send_restarts())
        todo = np.array([e for e in lanes if not self.evaluated[e]], np.int64)
        if len(todo) == 0:
            return
        assert self.pool is not None
        refs = [
            a.evaluate_columns.remote(self.vectors, todo.tolist(), train_split=True)
            for a in self.pool.actors
        ]
        loss, acc, train = self._gather(refs, len(todo), 3)
        self.loss[todo] = train
        self.first_loss[todo], self.first_acc[todo] = loss, acc
        self.evaluated[todo] = True

    def _gather(self, refs: list[Any], rows: int, parts: int) -> list[np.ndarray]:
        """Assemble the hosts' (rows, hosted) arrays into (rows, N) ones."""
        out = [np.zeros((rows, self.num_clients)) for _ in range(parts)]
        for hosted, reply in zip(self._hosted, ray.get(refs), strict=True):
            for j in range(parts):
                out[j][:, hosted] = reply[j]
        return out

    # ------------------------------------------------------------------ round
    def play(
        self,
        lanes: npt.NDArray[np.int64],
        rounds: npt.NDArray[np.int64],
        clients: npt.NDArray[np.int64],
    ) -> ColumnRound:
        """Run one round of each lane: ``clients[i, k]`` on subchannel k (-1: idle).

        Args:
            lanes: (P,) distinct lanes.
            rounds: (P,) each lane's round index t.
            clients: (P, K) the scheduled client of each subchannel, -1 idle;
                scheduled clients eligible and distinct within a row.
        """
        assert self.pool is not None
        self._get(self._send_restarts())
        self.channel(lanes, rounds)
        p, n = len(lanes), self.num_clients
        row, sub = np.nonzero(clients >= 0)
        client = clients[row, sub]
        lane = lanes[row]
        # two halves, so the driver sums one while the hosts train the other:
        # hosts: train A | train B | evaluate A | evaluate B
        vectors = ray.put(self.vectors)
        halves = [h for h in np.array_split(np.arange(p), 2) if len(h)]
        trained = []
        for half in halves:
            mine = np.flatnonzero((row >= half[0]) & (row <= half[-1]))
            trained.append(
                (
                    half,
                    mine,
                    self._submit_columns(vectors, lane, rounds[row], client, mine),
                )
            )
        link = link_columns(
            self.config,
            self.gain[lane, client, sub],
            self.noise_power_w,
            self.samples[client],
            self.payload_bits,
        )
        delivered = self._delivered(lanes[row], rounds[row], client, link)
        arrived = np.zeros(len(row), bool)
        evaluations = []
        for half, mine, refs in trained:
            arrived[mine] = self._conclude_columns(
                lanes[half], row[mine] - half[0], client[mine], refs, delivered[mine]
            )
            ref = ray.put(self.vectors[lanes[half]])  # only the half's models
            rows = list(range(len(half)))
            evaluations.append(
                [
                    a.evaluate_columns.remote(ref, rows, train_split=False)
                    for a in self.pool.actors
                ]
            )
        per_client = {
            key: np.zeros((p, n)) for key in ("latency_s", "energy_j", "bits")
        }
        per_client["latency_s"][row, client] = link["latency_s"]
        per_client["energy_j"][row, client] = link["energy_j"]
        per_client["bits"][row, client] = self.payload_bits
        full = np.full(clients.shape, False)
        full[row, sub] = arrived
        test_loss, test_acc = np.zeros((p, n)), np.zeros((p, n))
        for (half, _, _), refs in zip(trained, evaluations, strict=True):
            test_loss[half], test_acc[half] = self._gather(refs, len(half), 2)
        return ColumnRound(
            lanes, clients, full, **per_client, test_loss=test_loss, test_acc=test_acc
        )

    def _delivered(
        self,
        lane: npt.NDArray[np.int64],
        rounds: npt.NDArray[np.int64],
        client: npt.NDArray[np.int64],
        link: dict[str, npt.NDArray[Any]],
    ) -> npt.NDArray[np.bool_]:
        """Which uploads (one per entry) arrive: not lost, and not dropped by packet loss.

        Packet loss draws one uniform per client and round, indexed by client
        (``UplinkModel.link``), from each lane's (seed, "packet_loss", t).
        """
        delivered: npt.NDArray[np.bool_] = ~link["lost"]
        if self.config.wireless.effects not in ("packet_loss", "bit_flip"):
            return delivered
        keys, at = np.unique(np.stack([lane, rounds]), axis=1, return_inverse=True)
        rngs = rng_for_many(self.seeds[keys[0]], "packet_loss", rounds=keys[1])
        draws = np.array([rng.random(self.num_clients) for rng in rngs])
        return delivered & (draws[at.reshape(-1), client] >= link["packet_error_rate"])

    def _conclude_columns(
        self,
        lanes: npt.NDArray[np.int64],
        row: npt.NDArray[np.int64],
        client: npt.NDArray[np.int64],
        refs: list[tuple[npt.NDArray[np.int64], Any]],
        delivered: npt.NDArray[np.bool_],
    ) -> npt.NDArray[np.bool_]:
        """Aggregate, record and track ``lanes``' round; return which updates arrived.

        ``row`` indexes ``lanes`` (one entry per trained client).
        """
        updates, weights, train_loss = self._collect(refs, len(row))
        arrived = delivered & np.isfinite(updates).all(axis=1)
        self._aggregate(lanes, row, client, updates, weights, arrived)
        lane = lanes[row]
        self.releases[lane, client] += 1
        self.staleness[lanes] += 1
        self.staleness[lane[arrived], client[arrived]] = 0
        keep = arrived & np.isfinite(train_loss)
        self.loss[lane[keep], client[keep]] = train_loss[keep]
        return arrived

    def _submit_columns(
        self,
        vectors: Any,
        lane: npt.NDArray[np.int64],
        rounds: npt.NDArray[np.int64],
        client: npt.NDArray[np.int64],
        mine: npt.NDArray[np.int64],
    ) -> list[tuple[npt.NDArray[np.int64], Any]]:
        """Submit the rows ``mine`` to their hosts; (positions in ``mine``, ref) per host."""
        assert self.pool is not None
        host = self.pool.actor_of[client[mine]]
        out = []
        for a, actor in enumerate(self.pool.actors):
            at = np.flatnonzero(host == a)
            if len(at):
                rows = mine[at]
                ref = actor.train_columns.remote(
                    vectors, lane[rows], rounds[rows], client[rows]
                )
                out.append((at, ref))
        return out

    def _collect(
        self, refs: list[tuple[npt.NDArray[np.int64], Any]], m: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The hosts' updates, weights and train losses of ``m`` rows, in row order."""
        updates = np.zeros((m, self.dim), np.float32)
        weights, losses = np.zeros(m), np.zeros(m)
        replies = ray.get([ref for _, ref in refs])
        for (at, _), (u, w, loss) in zip(refs, replies, strict=True):
            updates[at], weights[at], losses[at] = u, w, loss
        return updates, weights, losses

    def _aggregate(
        self,
        lanes: npt.NDArray[np.int64],
        row: npt.NDArray[np.int64],
        client: npt.NDArray[np.int64],
        updates: npt.NDArray[np.float32],
        weights: npt.NDArray[np.float64],
        ok: npt.NDArray[np.bool_],
    ) -> None:
        """ω ← ω + Σ w u / Σ w over each lane's arrived updates (exact sum)."""
        p = len(lanes)
        count = np.bincount(row[ok], minlength=p)
        if not count.any():
            return
        # rows of a lane in client order (the cloud's)
        sel = np.flatnonzero(ok)[np.lexsort((client[ok], row[ok]))]
        s, exact = group_running_sums(row[sel], count, updates[sel], weights[sel])
        total = np.zeros(p)
        np.add.at(total, row[sel], weights[sel])
        plain = plain_divisions(s, total)
        fast = (count > 0) & exact & plain
        mine = lanes[fast]
        mean = (s[fast] / total[fast, None]).astype(np.float32)
        self.vectors[mine] = (self.vectors[mine] + mean).astype(np.float32)
        for i in np.flatnonzero((count > 0) & ~fast).tolist():
            rows = sel[row[sel] == i]
            e = int(lanes[i])
            mean = exact_sum(updates[rows], weights[rows]).mean()
            self.vectors[e] = (self.vectors[e] + mean).astype(np.float32)
