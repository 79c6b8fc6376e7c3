"""D2D nodes that come and go, compute at their own speed, and fade with memory.

Issue 48's device and channel models on the D2D topology, built from the
``topology`` section's fields (:class:`rayfl.d2d.config.D2DTopologyConfig`)
with the star's keyed models: :class:`rayfl.wireless.dynamics.OnOffAvailability`
and the trace reader (:mod:`rayfl.wireless.availability_trace`),
:func:`rayfl.wireless.compute.cpu_frequencies` and ``deadline_misses``, and
:class:`rayfl.wireless.dynamics.GaussMarkovFading`. :class:`D2DMotion
<rayfl.d2d.motion.D2DMotion>` owns one (``motion.devices``), so the engine,
the lanes, the env and its surrogate read the same round-t facts.

| symbol | code | meaning |
|---|---|---|
| a_{s,t} | :meth:`D2DDevices.available` | node s can send in round t (the target: always) |
| f_s | :attr:`D2DDevices.cpu_frequency_hz` | node s's CPU frequency, drawn once from (seed, s) |
| d^lo_s = τ·abs(D_s)·Φ/f_s | :attr:`D2DDevices.compute_time_s` | its local training time (τ = local epochs) |
| d^tx_{s,t} = 32·dim / (W·log2(1 + P ĥ²_{s,n,t}/σ²)) | :meth:`D2DDevices.airtime_s` | its model's D2D airtime to the target on round t's distances |
| d^lo_s + d^tx_{s,t} > D | :attr:`LinkState.late` | a straggler: its model misses the round deadline D |
| g_{s,f,t} | :meth:`D2DDevices.fading` | AR(1) fading power of link s → n on sub-channel f, Exp(1) marginal |

How the links use them (:func:`rayfl.d2d.links.deliveries`): a node that is
away or late delivers nothing (reported ``unavailable`` or ``straggler``);
with ``fading_dynamics: gauss_markov`` a ``bernoulli`` link succeeds iff
1 − exp(−g_{s,f,t}) ≥ P^err_{s,t} (its fade is not among the worst P^err of
its law: the marginal success is 1 − P^err, as i.i.d., but losses come in
bursts), and an ``mc_sinr`` link's fading is Γ·g_{s,f,t}. The target's
observation before round t ≥ 1 shows the fading of round t − 1 on round t's
distances: the last channel heard, one round old.

Implementation details:
    1. Every series is keyed by (seed, purpose, round, node), so a node's
       availability, frequency and fading do not depend on which nodes share
       an actor or a lane. The fading of the links to target n runs from a
       seed drawn from (seed, "d2d_fading_ar", n): two targets' links fade
       independently. Rounds may be asked in any order (replayed from 0).
    2. The airtime uses the link's mean SNR (no fading, no interference) and
       the whole band W: with the paper's 100 MHz it is microseconds, so the
       deadline bites through the local training time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.layout import D2DLayout
from rayfl.seeding import rng_for
from rayfl.wireless.compute import deadline_misses
from rayfl.wireless.dynamics import GaussMarkovFading
from rayfl.wireless.world import (
    AVAILABILITY,
    Replayed,
    cpu_frequencies_of,
    read_availability_trace,
)

__all__ = ["D2DDevices", "LinkState", "device_keys"]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: Why a selected neighbour's model did not arrive (``rejected`` column).
REJECT_UNAVAILABLE = "unavailable"
REJECT_STRAGGLER = "straggler"


def device_keys(topology: D2DTopologyConfig) -> tuple[str, ...]:
    """Return the observation keys a D2D target sees beyond the plug-in's.

    ``available`` when nodes come and go, ``compute_time_s`` when their
    frequencies differ or a deadline is set (:mod:`rayfl.observation`).

    Example:
        >>> device_keys(D2DTopologyConfig())
        ()
        >>> device_keys(D2DTopologyConfig(round_deadline_s=0.01))
        ('compute_time_s',)
    """
    keys: tuple[str, ...] = ()
    if topology.availability != "always":
        keys += ("available",)
    if (
        topology.cpu_frequency_distribution != "constant"
        or topology.round_deadline_s is not None
    ):
        keys += ("compute_time_s",)
    return keys


@dataclass(frozen=True)
class LinkState:
    """Round t's facts of the links to one target, beyond P^err.

    Attributes:
        up: (N,) node s can send (None: every node).
        late: (N,) node s misses the deadline (None: no deadline).
        fading: (N, F) unit-mean fading power of round t (None: i.i.d., the
            link draws its own).
    """

    up: BoolArray | None = None
    late: BoolArray | None = None
    fading: FloatArray | None = None

    def reason(self, s: int) -> str | None:
        """Why node ``s`` cannot deliver this round (None: it may)."""
        if self.up is not None and not self.up[s]:
            return REJECT_UNAVAILABLE
        if self.late is not None and self.late[s]:
            return REJECT_STRAGGLER
        return None


class D2DDevices:
    """Availability, CPU frequencies, deadline and fading memory of a D2D network.

    Args:
        topology: The D2D topology section.
        num_nodes: N.
        seed: The run's seed.
        data_size: (N,) train samples per node (needed for compute times).
        model_bits: Bits of one sent model, 32·dim (needed for the deadline).
        local_epochs: τ, local epochs per round.

    Example:
        >>> topo = D2DTopologyConfig(availability="markov", mean_on_rounds=4,
        ...     mean_off_rounds=2)
        >>> D2DDevices(topo, 5, seed=0).available(3).shape
        (5,)
    """

    def __init__(
        self,
        topology: D2DTopologyConfig,
        num_nodes: int,
        *,
        seed: int,
        data_size: npt.ArrayLike | None = None,
        model_bits: float | None = None,
        local_epochs: int = 1,
    ) -> None:
        self.topology, self.num_nodes, self.seed = topology, int(num_nodes), int(seed)
        self.model_bits = model_bits
        self._availability = _availability(topology, self.seed, self.num_nodes)
        #: f_s in Hz, (N,).
        frequency = cpu_frequencies_of(topology, self.seed, self.num_nodes)
        self.cpu_frequency_hz = (
            np.full(self.num_nodes, float(topology.cpu_frequency_hz))
            if frequency is None
            else frequency
        )
        #: d^lo_s in s, (N,); None without ``data_size``.
        self.compute_time_s: FloatArray | None = None
        if data_size is not None:
            samples = np.asarray(data_size, dtype=np.float64)
            cycles = local_epochs * samples * topology.cpu_cycles_per_sample
            self.compute_time_s = cycles / self.cpu_frequency_hz
        self.correlated = topology.fading_dynamics == "gauss_markov"
        self._fading: dict[int, Replayed] = {}

    @property
    def moving(self) -> bool:
        """True if any model here changes the paper's links."""
        topo = self.topology
        return (
            self._availability is not None
            or self.correlated
            or topo.round_deadline_s is not None
        )

    def available(self, t: int) -> BoolArray:
        """Return (N,) bool: which nodes can send in round ``t``."""
        if self._availability is None:
            return np.ones(self.num_nodes, dtype=bool)
        return np.asarray(self._availability(t), dtype=bool).copy()

    def airtime_s(self, layout: D2DLayout, target: int) -> FloatArray:
        """Return each node's airtime (N,) in s of one model to ``target`` (0 for it)."""
        if self.model_bits is None:
            raise ValueError("D2DDevices needs model_bits for the D2D airtime")
        topo = self.topology
        snr = topo.tx_power_w * layout.path_gain[:, target] / layout.noise_power_w
        with np.errstate(divide="ignore"):
            rate = topo.bandwidth_hz * np.log2(1.0 + snr)
            out = np.where(rate > 0, self.model_bits / rate, np.inf)
        out[target] = 0.0
        return np.asarray(out, dtype=np.float64)

    def late(self, layout: D2DLayout, target: int) -> BoolArray | None:
        """Return (N,) bool: whose model misses ``round_deadline_s`` (None: no deadline)."""
        deadline = self.topology.round_deadline_s
        if deadline is None:
            return None
        if self.compute_time_s is None:
            raise ValueError("D2DDevices needs data_size for the round deadline")
        out = deadline_misses(
            self.compute_time_s, self.airtime_s(layout, target), deadline
        )
        out[target] = False
        return out

    def fading(self, t: int, target: int) -> FloatArray:
        """Return round ``t``'s (N, F) fading powers of the links to ``target``."""
        if target not in self._fading:
            draw = rng_for(self.seed, "d2d_fading_ar", client=target)
            seed = int(draw.integers(2**62))
            rho = float(self.topology.fading_correlation or 0.0)
            n, f = self.num_nodes, self.topology.num_subchannels
            self._fading[target] = Replayed(
                lambda: GaussMarkovFading(seed, range(n), f, rho=rho),
                lambda fading, r: fading.power_gains(r),
            )
        return np.asarray(self._fading[target](t), dtype=np.float64)

    def link_state(self, t: int, layout: D2DLayout, target: int) -> LinkState | None:
        """Round ``t``'s :class:`LinkState` of the links to ``target`` (None: the paper's)."""
        if not self.moving:
            return None
        up = None
        if self._availability is not None:
            up = self.available(t)
            up[target] = True
        return LinkState(
            up,
            self.late(layout, target),
            self.fading(t, target) if self.correlated else None,
        )

    def observed(self, t: int, target: int) -> dict[str, npt.NDArray[np.float32]]:
        """Return the :func:`device_keys` rows of ``target``'s round-``t`` observation."""
        out: dict[str, npt.NDArray[np.float32]] = {}
        keys = device_keys(self.topology)
        if "available" in keys:
            up = self.available(t)
            up[target] = True
            out["available"] = up.astype(np.float32)
        if "compute_time_s" in keys:
            if self.compute_time_s is None:
                raise ValueError("D2DDevices needs data_size for compute_time_s")
            out["compute_time_s"] = self.compute_time_s.astype(np.float32)
        return out


def _availability(topology: D2DTopologyConfig, seed: int, num_nodes: int) -> Any | None:
    """Round → (N,) availability of ``topology.availability`` (None: always).

    The star's models (:data:`rayfl.wireless.world.AVAILABILITY`): the
    topology names their fields as the ``wireless`` section does.
    """
    kind = topology.availability
    if kind == "always":
        return None
    if kind == "trace":
        trace = read_availability_trace(topology, num_nodes, section="topology")
        return trace.available
    return AVAILABILITY[kind](topology, seed, num_nodes).available
