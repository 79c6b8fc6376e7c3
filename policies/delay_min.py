"""Delay-minimisation scheduling: the bottleneck (min-max latency) assignment.

The delay-minimisation baseline of spec seed_002 §6.3 (Sec. VI-A of the DP-SparFL
paper, after its ref. [14]): schedule min(K, #eligible) clients on the K
subchannels so that the round latency d^t = max_{scheduled n} d_{n,k(n)} is as
small as possible, with dense uploads (s = 1) at full power. Per-pair latency,
spec seed_002 §2.6-2.8:

- uplink rate (§2.6):      R_{n,k} = B·log2(1 + P·h_{n,k} / (N0·B))
- uplink delay (§2.6):     d^up_{n,k} = Z / R_{n,k}
- local compute (§2.7):    d^lo_n = τ·|D_n|·Φ / f
- downlink (§2.6):         d^do_n = Z^do / (B·log2(1 + P^do·h^do_n / (N0·B)))
- client latency (§2.8):   d_{n,k} = d^do_n + d^lo_n + d^up_{n,k}

Symbol table:

=========  ===========================  ====================  ===================
symbol     meaning                      code                  default (seed_002)
=========  ===========================  ====================  ===================
Z          uplink payload (s = 1)       ``payload_bits``      32·1,663,370 (§5.2)
B          subchannel bandwidth         ``bandwidth_hz``      15 kHz (§5.4)
P^max      client transmit power        ``tx_power_dbm``      30 dBm (§5.4)
N0         noise PSD                    ``noise_psd_dbm_hz``  −107 dBm over B
Φ          CPU cycles per sample        ``cycles_per_sample`` 2·10^5 (§5.5)
f          client CPU frequency         ``cpu_freq_hz``       1.8 GHz (§5.5 mean)
τ          local steps                  ``local_steps``       60 (§5.3)
Z^do       downlink payload             ``downlink_bits``     = Z (§5.5)
P^do       AP transmit power            ``downlink_power_dbm`` 23 dBm (§5.4)
=========  ===========================  ====================  ===================

Implementation details:
    1. Bottleneck assignment (seed_002 §6.3): the smallest threshold θ among the
       d_{n,k} values such that the edges d_{n,k} ≤ θ hold a matching of size
       min(K, #eligible) (binary search, ``maximum_bipartite_matching``); then a
       min-Σ d Hungarian over those edges breaks ties. Only each subchannel's K
       fastest clients are candidates (``policies.assignment`` detail 2: the exchange
       argument holds for the bottleneck too).
    2. The spec gives the noise as a power σ² = −107 dBm (§5.4, "called PSD but
       given in dBm"); the default N0 = −107 dBm − 10·log10(15 kHz) ≈ −148.76
       dBm/Hz gives exactly that power over B = 15 kHz.
    3. The policy does not observe f_n^t (Uniform[1.2, 2.4] GHz in §5.5), so it
       uses the mean, 1.8 GHz [AMBIG-8]; d^lo follows §2.7 literally with
       |D_n| = ``obs["data_size"]``.
    4. The downlink gain h^do_n is not observed; it is estimated by the client's
       mean linear gain over the subchannels (same path loss, §5.5) [AMBIG-4].
    5. A zero rate gives an "infinite" delay of 1e18 s, kept finite for sorting.
    6. The run's constants (``context``, :func:`policies.base.run_constants`):
       Z = Z^do = 32·abs(w) dense; B, N0, P^max, Φ, f from ``context.link``;
       P^do the base station's power when the round time includes the downlink,
       else Z^do = 0 (no downlink term); in step mode ``compute_samples`` =
       τ·abs(b), in epoch mode τ = the epochs (the engine's latency model). So
       the baseline ranks clients by the latency the run charges.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from gymnasium import spaces
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching

from policies.assignment import assign_subchannels
from policies.base import (
    Natural,
    NonNegative,
    Observation,
    Policy,
    Positive,
    context_constants,
    run_constants,
)
from rayfl.observation import SystemContext

NOISE_PSD_DBM_HZ = -107.0 - 10.0 * math.log10(15e3)
_NO_LINK_S = 1e18

#: The symbol table's defaults (seed_002), used where neither the user nor the run says.
DEFAULTS: dict[str, Any] = {
    "payload_bits": 32 * 1_663_370,
    "bandwidth_hz": 15e3,
    "tx_power_dbm": 30.0,
    "noise_psd_dbm_hz": NOISE_PSD_DBM_HZ,
    "cycles_per_sample": 2e5,
    "cpu_freq_hz": 1.8e9,
    "local_steps": 60,
    "compute_samples": None,
    "downlink_bits": None,
    "downlink_power_dbm": 23.0,
}


def _run_values(context: SystemContext) -> dict[str, Any]:
    """The constants ``context`` supplies (detail 6); absent: the run does not say."""
    values = context_constants(context)
    dense_bits = 32.0 * values.pop("model_dim")
    values["payload_bits"] = dense_bits
    if context.link is not None:
        if values["downlink_power_dbm"] is None:  # no downlink in the round time
            del values["downlink_power_dbm"]
            values["downlink_bits"] = 0.0
        else:
            values["downlink_bits"] = dense_bits
    if "compute_samples" not in values and context.training.local_epochs:
        values["local_steps"] = context.training.local_epochs
    return values


def shannon_rate_bps(
    gain_db: npt.ArrayLike,
    *,
    bandwidth_hz: float,
    tx_power_dbm: float,
    noise_psd_dbm_hz: float,
) -> npt.NDArray[np.float64]:
    """Return the Shannon rate B·log2(1 + P·h / (N0·B)), seed_002 §2.6.

    Args:
        gain_db: Channel gains h [dB], any shape.
        bandwidth_hz: Bandwidth B [Hz].
        tx_power_dbm: Transmit power P [dBm].
        noise_psd_dbm_hz: Noise power spectral density N0 [dBm/Hz].

    Returns:
        Rates [bit/s], same shape as ``gain_db``.

    Example:
        >>> float(shannon_rate_bps(0.0, bandwidth_hz=1.0, tx_power_dbm=30.0,
        ...                        noise_psd_dbm_hz=30.0))
        1.0
    """
    snr_db = np.asarray(gain_db, dtype=np.float64) + tx_power_dbm - noise_psd_dbm_hz
    snr_db = snr_db - 10.0 * math.log10(bandwidth_hz)
    return bandwidth_hz * np.log2(1.0 + np.power(10.0, snr_db / 10.0))


def bottleneck_threshold(delay_s: npt.NDArray[np.float64], size: int) -> float:
    """Return the least θ such that the edges ``delay_s <= θ`` match ``size`` pairs.

    Args:
        delay_s: (clients, subchannels) latencies [s].
        size: Required matching size, at most min(delay_s.shape).

    Returns:
        The bottleneck value θ, one of the entries of ``delay_s``.

    Example:
        >>> bottleneck_threshold(np.array([[1.0, 5.0], [2.0, 9.0]]), 2)
        5.0
    """
    # θ is at least the size-th smallest row (and column) minimum: prune below.
    row_min = np.sort(delay_s.min(axis=1))[size - 1]
    column_min = np.sort(delay_s.min(axis=0))[size - 1]
    values = np.unique(delay_s[delay_s >= max(row_min, column_min)])
    low, high = 0, values.size - 1
    while low < high:
        middle = (low + high) // 2
        graph = csr_matrix(delay_s <= values[middle])
        matched = maximum_bipartite_matching(graph, perm_type="column")
        if np.count_nonzero(matched >= 0) >= size:
            high = middle
        else:
            low = middle + 1
    return float(values[low])


class DelayMinPolicy(Policy):
    """Schedule the min-max-latency matching with dense uploads (a DP-SparFL baseline).

    Args:
        observation_space: The env's observation space (needs ``data_size``).
        action_space: The env's action space.
        payload_bits: Z, uplink bits per client [bit].
        bandwidth_hz: B, bandwidth of one subchannel [Hz].
        tx_power_dbm: P^max, client transmit power [dBm].
        noise_psd_dbm_hz: N0, noise power spectral density [dBm/Hz].
        cycles_per_sample: Φ, CPU cycles per training sample.
        cpu_freq_hz: f, client CPU frequency [Hz].
        local_steps: τ, local passes in d^lo = τ·abs(D_n)·Φ/f (seed_002 §2.7).
        compute_samples: Samples every client trains on per round; when set,
            d^lo = compute_samples·Φ/f (the engine's τ·abs(b) in step mode).
        downlink_bits: Z^do; None means ``payload_bits``; 0 drops the term.
        downlink_power_dbm: P^do, access-point transmit power [dBm].
        context: The run context. Every parameter above left at None is the
            run's (detail 6), else the symbol table's default.
    """

    topologies: ClassVar[frozenset[str]] = frozenset({"star", "hierarchical"})

    required_keys: ClassVar[tuple[str, ...]] = ("channel_gain", "eligible", "data_size")

    def __init__(
        self,
        observation_space: spaces.Space[Any],
        action_space: spaces.Space[Any],
        *,
        payload_bits: Positive | None = None,
        bandwidth_hz: Positive | None = None,
        tx_power_dbm: float | None = None,
        noise_psd_dbm_hz: float | None = None,
        cycles_per_sample: NonNegative | None = None,
        cpu_freq_hz: Positive | None = None,
        local_steps: Natural | None = None,
        compute_samples: NonNegative | None = None,
        downlink_bits: NonNegative | None = None,
        downlink_power_dbm: float | None = None,
        context: SystemContext | None = None,
    ) -> None:
        given = {
            "payload_bits": payload_bits,
            "bandwidth_hz": bandwidth_hz,
            "tx_power_dbm": tx_power_dbm,
            "noise_psd_dbm_hz": noise_psd_dbm_hz,
            "cycles_per_sample": cycles_per_sample,
            "cpu_freq_hz": cpu_freq_hz,
            "local_steps": local_steps,
            "compute_samples": compute_samples,
            "downlink_bits": downlink_bits,
            "downlink_power_dbm": downlink_power_dbm,
        }
        run = {} if context is None else _run_values(context)
        v = run_constants(given, run, DEFAULTS)
        positive = ("payload_bits", "bandwidth_hz", "cpu_freq_hz")
        non_negative = ("cycles_per_sample", "local_steps", "compute_samples")
        for name in positive:
            if not v[name] > 0:
                raise ValueError(f"{name} must be > 0, got {v[name]}")
        for name in (*non_negative, "downlink_bits"):
            if v[name] is not None and not v[name] >= 0:
                raise ValueError(f"{name} must be >= 0, got {v[name]}")
        self.payload_bits = float(v["payload_bits"])
        self.bandwidth_hz = float(v["bandwidth_hz"])
        self.tx_power_dbm = float(v["tx_power_dbm"])
        self.noise_psd_dbm_hz = float(v["noise_psd_dbm_hz"])
        self.cycles_per_sample = float(v["cycles_per_sample"])
        self.cpu_freq_hz = float(v["cpu_freq_hz"])
        self.local_steps = int(v["local_steps"])
        self.compute_samples = v["compute_samples"]
        self.downlink_bits = (
            self.payload_bits
            if v["downlink_bits"] is None
            else float(v["downlink_bits"])
        )
        self.downlink_power_dbm = float(v["downlink_power_dbm"])
        super().__init__(observation_space, action_space, context=context)

    def latency_s(self, obs: Observation) -> npt.NDArray[np.float64]:
        """Return d_{n,k} = d^do_n + d^lo_n + d^up_{n,k} [s], shape (N, K), §2.8."""
        gain_db = self.field(obs, "channel_gain")
        link = {
            "bandwidth_hz": self.bandwidth_hz,
            "noise_psd_dbm_hz": self.noise_psd_dbm_hz,
        }
        downlink_s = np.zeros(self.num_clients)
        with np.errstate(divide="ignore", invalid="ignore"):
            uplink_s = self.payload_bits / shannon_rate_bps(
                gain_db, tx_power_dbm=self.tx_power_dbm, **link
            )
            if self.downlink_bits > 0:
                wideband = np.mean(np.power(10.0, gain_db / 10.0), axis=1)
                downlink_s = self.downlink_bits / shannon_rate_bps(
                    10.0 * np.log10(wideband),
                    tx_power_dbm=self.downlink_power_dbm,
                    **link,
                )
        samples = (
            self.local_steps * self.field(obs, "data_size")
            if self.compute_samples is None
            else np.full(self.num_clients, float(self.compute_samples))
        )
        local_s = samples * self.cycles_per_sample / self.cpu_freq_hz
        delay = (downlink_s + local_s)[:, None] + uplink_s
        return np.minimum(np.nan_to_num(delay, nan=_NO_LINK_S), _NO_LINK_S)

    def schedule(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Bottleneck assignment of eligible clients, then min-Σ d among ties."""
        eligible = np.flatnonzero(self.eligible_mask(obs))
        size = min(eligible.size, self.num_subchannels)
        if size == 0:
            return np.full(self.num_subchannels, self.num_clients, dtype=np.int64)
        delay = self.latency_s(obs)[eligible]
        if eligible.size > self.num_subchannels:
            top = np.argpartition(delay, self.num_subchannels - 1, axis=0)
            rows = np.unique(top[: self.num_subchannels])
            eligible, delay = eligible[rows], delay[rows]
        threshold = bottleneck_threshold(delay, size)
        forbidden = (size + 1) * max(threshold, 1.0)
        cost = np.where(delay <= threshold, delay, forbidden)
        score = np.zeros((self.num_clients, self.num_subchannels))
        score[eligible] = cost
        return assign_subchannels(
            score, eligible, idle=self.num_clients, maximize=False, prefilter=False
        )
