"""The driver's model of the uplink: noise calibration, channel, privacy ledger.

The driver owns what is global to a run and small: the calibrated noise std
(one number), the wireless channel's realisation of each round (N × K gains),
the per-client privacy ledger. Client actors do the per-client work (clip, noise,
compress); the cloud applies the channel to payloads. This class turns a round's
schedule and payload sizes into the :class:`LinkOutcome` the cloud applies and
the per-client rows (SNR, latency, energy) the log keeps. What it reports about
privacy (ε per client, the ledger's rule, the ``summary.json`` block) is
:class:`rayfl.privacy.report.LedgerReport`. It reads the config sections of
:class:`UplinkSections`, not the whole run config.

| paper symbol | code name |
|--------------|-----------|
| σ_DP | ``noise_std`` |
| z = σ/(2C) | ``noise_multiplier`` |
| T0 | ``privacy.max_uploads`` |
| e_{n,k} (BER), PER | ``bit_error_rate``, ``packet_error_rate`` |

Implementation details:
    1. The ledger follows ``rayfl.privacy.sensitivity``: a whole update
       clipped to C has L2 sensitivity 2C between any two datasets of the
       client, so each release is recorded at z = σ/(2C) (DP-Ditto: z_n =
       σ_n/(2C) per client) and q = 1 — no record is sampled inside the
       release, and client scheduling is no sample of records. DP-SparFL's
       local DP-SGD is accounted per step (``LocalDPSGD``); the WPFL paper's
       Dithering baseline by its Laplace scale (pure ε, L1 sensitivity 2C√d).
    2. With central DP (placement ``cloud``) the server adds noise of std
       σ·max_n w_n/Σ w_n to the weighted mean. Client n moves the mean by at
       most 2C·w_n/Σ w ≤ 2C·max w/Σ w, so z = σ/(2C) holds for every client;
       nothing in the code enforces a smaller bound.
    3. A lost packet (``packet_loss`` effects, SNR below the outage threshold,
       or transmission time above ``wireless.max_latency_s``) still counts as a
       release: the update was transmitted.
    4. ``bit_flip`` effects flip bits of *quantized* payloads (seed 000 eq. 14). An
       unquantized float32 payload is instead treated as a packet with a CRC: any
       bit error drops it, with probability PER = 1 − (1 − BER)^bits — flipping
       exponent bits of raw floats would model no real receiver.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.actors.cloud import LinkOutcome
from rayfl.algorithms.config import LocalTrainingConfig, WpflConfig
from rayfl.compression.config import CompressionConfig
from rayfl.privacy.accountant import PrivacyLedger
from rayfl.privacy.calibration import calibrate_noise_std
from rayfl.privacy.config import PrivacyConfig
from rayfl.privacy.participation import (
    LocalDPSGD,
    draw_epsilon_budgets,
    participation_targets,
)
from rayfl.privacy.report import LedgerReport
from rayfl.privacy.sensitivity import (
    dp_sgd_rule,
    whole_update_sensitivity,
)
from rayfl.schedule import Schedule
from rayfl.seeding import rng_for
from rayfl.wireless.channel import ChannelState, WirelessChannel, shannon_rate_bps
from rayfl.wireless.compute import deadline_misses
from rayfl.wireless.config import WirelessConfig
from rayfl.wireless.cost import transmission_time_s
from rayfl.wireless.effects import uplink_round
from rayfl.wireless.world import LastSeen, MovingWorld

__all__ = ["UplinkModel", "UplinkSections"]


@dataclass(frozen=True)
class UplinkSections:
    """The config sections the uplink model reads: a narrow view of a run.

    Attributes:
        privacy: The ``privacy`` section (calibration, ledger, T0, ε budget).
        compression: The ``compression`` section (quantizer bits, sparsity).
        algorithm: The ``algorithm`` section (local steps, batch size; the
            algorithm's own calibration and DP-SGD settings).
        wireless: The ``wireless`` section, or None for ideal links.
        seed: The run's seed.
        rounds: The run's communication rounds T (the planned releases when
            ``privacy.max_uploads`` is unset).
    """

    privacy: PrivacyConfig
    compression: CompressionConfig
    algorithm: LocalTrainingConfig
    wireless: WirelessConfig | None
    seed: int
    rounds: int

    @classmethod
    def of(cls, config: Any) -> UplinkSections:
        """Return the sections of ``config`` (a run config, or any object with them).

        Example:
            >>> from rayfl.config import load_config
            >>> run = load_config({"rounds": 5, "seed": 3})
            >>> sections = UplinkSections.of(run)
            >>> (sections.rounds, sections.seed, sections.wireless)
            (5, 3, None)
        """
        return cls(**{f.name: getattr(config, f.name) for f in fields(cls)})


def downlink_time_s(
    state: ChannelState, clients: npt.ArrayLike, *, model_bits: float
) -> npt.NDArray[np.float64]:
    """Return d^do_i = Z/(B·log2(1 + SNR_do,i)), the broadcast time (seed 002 §2.6)."""
    snr = np.power(10.0, state.downlink_snr_db[np.asarray(clients, np.int64)] / 10.0)
    bandwidth_hz = state.downlink_bandwidth_hz or state.bandwidth_hz
    rate = shannon_rate_bps(bandwidth_hz=bandwidth_hz, snr_linear=snr)
    return transmission_time_s(payload_bits=model_bits, rate_bps=rate)


def _stragglers(
    wireless: WirelessConfig, latency_s: npt.NDArray[np.float64]
) -> npt.NDArray[np.bool_] | None:
    """Return which uploads miss ``wireless.round_deadline_s`` (None: no deadline).

    ``latency_s`` is each client's computation + transmission time (issue 48).
    """
    deadline_s = wireless.round_deadline_s
    return None if deadline_s is None else deadline_misses(latency_s, 0.0, deadline_s)


def _local_dp_sgd(
    config: UplinkSections, num_train: npt.NDArray[np.int64]
) -> LocalDPSGD | None:
    """Return the per-client DP-SGD accounting of a ``sparse_dp`` run, else None."""
    algo = config.algorithm
    if algo.kind != "sparse_dp":
        return None
    n = len(num_train)
    budgets = draw_epsilon_budgets(
        n,
        low=algo.epsilon_min,  # type: ignore[attr-defined]
        high=algo.epsilon_max,  # type: ignore[attr-defined]
        rng=rng_for(config.seed, "epsilon_budget"),
    )
    rule = dp_sgd_rule(
        noise_multiplier=float(algo.noise_multiplier),  # type: ignore[attr-defined]
        sampling=str(algo.sampling),  # type: ignore[attr-defined]
        batch_size=int(algo.batch_size),
        num_train=num_train,
    )
    return LocalDPSGD(
        noise_multiplier=float(rule.noise_multiplier),
        sample_rate=np.broadcast_to(
            np.asarray(rule.sample_rate, dtype=np.float64), (n,)
        ).copy(),
        steps=int(algo.local_steps or 1),
        sensitivity=rule.sensitivity,
        adjacency=rule.adjacency,
        budgets=budgets,
        delta=config.privacy.delta,
        accountant=config.privacy.accountant,
    )


def _dither_scale(config: UplinkSections, num_train: npt.NDArray[np.int64]) -> float:
    """Return the Laplace scale b of the WPFL paper's Dithering baseline, else 0."""
    algo = config.algorithm
    if not isinstance(algo, WpflConfig) or algo.dp_mechanism != "dithering":
        return 0.0
    from rayfl.algorithms.wpfl import _dither_noise

    return float(_dither_noise(config.privacy, algo, num_train))


def _noise_std(
    config: UplinkSections, num_train: npt.NDArray[np.int64], planned: int
) -> tuple[float, bool]:
    """Return σ and whether the algorithm calibrated it (seed 000's DP baselines)."""
    from rayfl.algorithms.registry import algorithm_class

    custom = algorithm_class(config.algorithm).calibrate_noise(
        config, num_train=num_train
    )
    if custom is not None:
        return custom[0], True
    sigma = calibrate_noise_std(
        config.privacy,
        releases=planned,
        dataset_size=int(num_train.mean()),
        num_clients=len(num_train),
        quantize_bits=config.compression.quantize_bits,
        keep_fraction=config.compression.sparsify_fraction,
        batch_size=config.algorithm.batch_size,
    )
    return sigma, False


class UplinkModel(LedgerReport):
    """Noise calibration, channel realisations and the privacy ledger of a run.

    Args:
        sections: The config sections it reads. A whole run config is accepted
            too and narrowed with :meth:`UplinkSections.of`.
        num_train: Train-split size of each client (N,).
        model_dim: Model size d (the downlink time and the Dithering ε need it).
    """

    def __init__(
        self,
        sections: UplinkSections | Any,
        *,
        num_train: npt.ArrayLike,
        model_dim: int | None = None,
    ) -> None:
        if not isinstance(sections, UplinkSections):
            sections = UplinkSections.of(sections)
        self.sections = config = sections
        self.model_dim = model_dim
        self.num_train = np.asarray(num_train, dtype=np.int64)
        n = len(self.num_train)
        self.num_clients = n
        privacy = config.privacy
        if privacy.placement == "edge":
            raise ValueError(
                "privacy.placement=edge needs a hierarchical topology with edge "
                "servers, which this run does not have; use client or cloud"
            )
        planned = privacy.max_uploads or config.rounds
        sigma, custom = _noise_std(config, self.num_train, planned)
        from rayfl.algorithms.registry import algorithm_class

        #: The algorithm codes its own uploads (seed 000's Dithering): bit flips.
        self.coded_uploads = algorithm_class(config.algorithm).quantizes_uploads(config)
        self.planned_uploads = planned
        central = privacy.placement == "cloud"
        self.noise_std = 0.0 if central else float(sigma)
        self.server_noise_std = float(sigma) if central else 0.0
        clip = privacy.clip_norm
        #: Per-client σ_n when it depends on abs(D_n) (seed 001 eqs. 6-8:
        #: Δs_n = 2C/abs(D_n), the paper's noise), else None (one σ for all).
        self.client_noise_std: npt.NDArray[np.float64] | None = None
        if clip and privacy.calibration == "dp_ditto":
            formula = privacy.noise_std is None and privacy.noise_multiplier is None
            if not custom and formula and not central and sigma > 0:
                size = int(self.num_train.mean())
                self.client_noise_std = sigma * size / self.num_train.astype(float)
        #: The Dithering baseline's Laplace scale b (0 for the Gaussian ones).
        self.laplace_scale = _dither_scale(config, self.num_train)
        # The ledger's rule (rayfl.privacy.sensitivity): Δ = 2C, q = 1.
        self.sensitivity = whole_update_sensitivity(clip) if clip else 0.0
        self.noise_multiplier = (
            float(sigma / self.sensitivity) if self.sensitivity and sigma > 0 else 0.0
        )
        #: z per client (DP-Ditto's σ_n/(2C)), else None.
        self.client_noise_multiplier: npt.NDArray[np.float64] | None = (
            None
            if self.client_noise_std is None
            else self.client_noise_std / self.sensitivity
        )
        self.ledger = PrivacyLedger(n, accountant=privacy.accountant)
        #: Local DP-SGD inside training (seed 002's sparse_dp): accounted here.
        self.local_dp = _local_dp_sgd(config, self.num_train)
        self.accounted = privacy.mechanism != "none" or self.local_dp is not None
        self.channel = (
            WirelessChannel(config.wireless, n, rng_for(config.seed, "geometry"))
            if config.wireless is not None
            else None
        )
        self._states: dict[int, ChannelState] = {}
        #: The base station's memory of unreachable clients' channels
        #: (:mod:`rayfl.star.moving`); started by the first observation.
        self.last_seen: LastSeen | None = None
        wireless = config.wireless
        #: Correlated fading, availability, CPU speeds (issue 48); None: ideal links.
        self.world = (
            MovingWorld(wireless, config.seed, n) if wireless is not None else None
        )
        #: Whether the channel acts on single uploads (bit flips, losses, outage).
        self.per_client_effects = wireless is not None and (
            wireless.effects != "none" or wireless.snr_threshold_db is not None
        )

    # ---------------------------------------------------------------- channel
    def channel_state(self, round: int) -> ChannelState | None:
        """Return round ``round``'s channel realisation (None with ideal links)."""
        if self.channel is None:
            return None
        if round not in self._states:
            # the round's distances and shadowing when devices move (issue 48)
            geometry = self.world.geometry(round) if self.world is not None else {}
            if self.world is not None and self.world.correlated:
                fading = self.world.fading(round)
                state = self.channel.state_of(*fading, **geometry)
            else:
                rng = rng_for(self.sections.seed, "channel", round=round)
                state = self.channel.realize(rng, **geometry)
            self._states = {round: state}
        return self._states[round]

    def num_samples(self, clients: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Return the samples each of ``clients`` trains on in a round (τ·abs(D_i))."""
        algo = self.sections.algorithm
        ids = np.asarray(clients, dtype=np.int64)
        if algo.local_steps:
            return np.full(len(ids), float(algo.local_steps * algo.batch_size))
        return (self.num_train[ids] * algo.local_epochs).astype(np.float64)

    def cpu_frequency_hz(
        self, clients: npt.ArrayLike
    ) -> npt.NDArray[np.float64] | None:
        """Return f_i of ``clients`` (None: ``wireless.cpu_frequency_hz`` for all)."""
        if self.world is None or self.world.cpu_frequency_hz is None:
            return None
        return self.world.cpu_frequency_hz[np.asarray(clients, dtype=np.int64)]

    def link(
        self, round: int, schedule: Schedule, payload_bits: npt.NDArray[np.float64]
    ) -> tuple[dict[int, dict[str, float]], LinkOutcome | None]:
        """Return per-client link rows and the outcome the cloud applies.

        Args:
            round: Round index t.
            schedule: The round's schedule.
            payload_bits: Payload size of each scheduled client, in schedule order.

        Returns:
            ``{client: {subchannel, tx_power_w, snr_db, rate_bps, bit_error_rate,
            packet_error_rate, latency_s, energy_j}}`` and the link outcome.
        """
        state = self.channel_state(round)
        wireless = self.sections.wireless
        if state is None or wireless is None or len(schedule.clients) == 0:
            return {}, None
        if np.any(schedule.subchannel < 0):
            raise ValueError(
                "with a wireless model every scheduled client needs a subchannel"
            )
        power = np.where(
            np.isnan(schedule.tx_power_w), state.tx_power_w, schedule.tx_power_w
        )
        algo = self.sections.algorithm
        samples = (
            algo.local_steps * algo.batch_size
            if algo.local_steps
            else self.num_train[schedule.clients] * algo.local_epochs
        )
        out = uplink_round(
            state,
            client=schedule.clients,
            subchannel=schedule.subchannel,
            tx_power_w=power,
            payload_bits=payload_bits,
            num_samples=samples,
            bits_per_element=self.sections.compression.quantize_bits or 32,
            config=wireless,
            cpu_frequency_hz=self.cpu_frequency_hz(schedule.clients),
        )
        latency_s = out.latency_s
        if wireless.downlink_latency and self.model_dim:
            latency_s = latency_s + downlink_time_s(
                state, schedule.clients, model_bits=32.0 * self.model_dim
            )
        delivered = ~out.outage & ~out.deadline_missed  # τ_max: late = lost
        straggler = _stragglers(wireless, latency_s)
        if straggler is not None:
            delivered &= ~straggler  # D: a straggler's upload is lost
        quantized = (
            self.sections.compression.quantize_bits is not None or self.coded_uploads
        )
        if wireless.effects == "packet_loss" or (
            wireless.effects == "bit_flip" and not quantized
        ):
            # One uniform per client per round, indexed by client id: the same
            # draw whatever else is scheduled.
            rng = rng_for(self.sections.seed, "packet_loss", round=round)
            u = rng.random(self.num_clients)[schedule.clients]
            delivered &= u >= out.packet_error_rate
        rows = {
            int(c): {
                "subchannel": int(out.subchannel[i]),
                "tx_power_w": float(power[i]),
                "snr_db": float(out.snr_db[i]),
                "rate_bps": float(out.rate_bps[i]),
                "bit_error_rate": float(out.bit_error_rate[i]),
                "packet_error_rate": float(out.packet_error_rate[i]),
                "latency_s": float(latency_s[i]),
                "energy_j": float(out.energy_j[i]),
            }
            for i, c in enumerate(schedule.clients)
        }
        if straggler is not None:
            for i, c in enumerate(schedule.clients):
                rows[int(c)]["straggler"] = bool(straggler[i])
        return rows, LinkOutcome(schedule.clients, out.bit_error_rate, delivered)

    # ---------------------------------------------------------------- privacy
    def record_releases(self, clients: npt.ArrayLike) -> None:
        """Record one release for each client that transmitted this round."""
        if self.local_dp is not None:
            self.local_dp.record(self.ledger, clients)
            return
        ids = np.asarray(clients, dtype=np.int64).reshape(-1)
        z = (
            self.noise_multiplier
            if self.client_noise_multiplier is None
            else self.client_noise_multiplier[ids]
        )
        self.ledger.record(ids, noise_multiplier=z, sample_rate=1.0)

    def eligible(self, round: int | None = None) -> npt.NDArray[np.bool_]:
        """Return which clients may upload (T0 cap, ε budget; reachable in ``round``).

        Args:
            round: The round whose reachability also counts
                (``wireless.availability``); None: the budgets only (whether
                a client may ever upload again, the end of a run).
        """
        budgets = self._budget_eligible()
        if round is None or self.world is None or self.world.availability is None:
            return budgets
        return budgets & self.world.available(round)

    def available(self, round: int) -> npt.NDArray[np.bool_]:
        """Return (N,) bool: which clients the base station reaches in ``round``."""
        if self.world is None:
            return np.ones(self.num_clients, dtype=bool)
        return self.world.available(round)

    def _budget_eligible(self) -> npt.NDArray[np.bool_]:
        """Which clients may still upload (T0 cap and ε budget)."""
        privacy = self.sections.privacy
        if self.local_dp is not None:
            return self.local_dp.eligible(self.ledger) & self.ledger.eligible(
                privacy.max_uploads
            )
        budget = privacy.epsilon_budget if self.accounted else None
        return self.ledger.eligible(
            privacy.max_uploads,
            budget,
            privacy.delta,
            next_noise_multiplier=(
                None
                if budget is None
                else (
                    self.noise_multiplier
                    if self.client_noise_multiplier is None
                    else self.client_noise_multiplier
                )
            ),
            next_sample_rate=1.0,
        )

    def participation_target(self) -> npt.NDArray[np.float64] | None:
        """Return β_i (seed 002 eq. 12) under local DP-SGD, else None."""
        if self.local_dp is None:
            return None
        wireless = self.sections.wireless
        return participation_targets(
            self.local_dp.max_participations(),
            num_subchannels=wireless.num_subchannels if wireless else self.num_clients,
        )

    def upload_count(self) -> npt.NDArray[np.int64]:
        """Return uploads so far per client (Υ_n)."""
        return self.ledger.upload_count
