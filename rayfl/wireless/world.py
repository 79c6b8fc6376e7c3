"""A run's moving world: correlated fading, device availability, CPU speeds.

The engine's view of issue 48's models (:mod:`rayfl.wireless.dynamics`,
:mod:`rayfl.wireless.compute`), built from the ``wireless`` section: the uplink
model (:class:`rayfl.uplink.UplinkModel`) asks it for round t's fading powers,
which clients are reachable in round t, and each client's CPU frequency. Every
series is keyed by (seed, purpose, round, client), so a client's series does
not depend on which clients share an actor, and a round can be asked in any
order (a model that steps in order is replayed from round 0 when asked for an
earlier round: resumed and restarted runs see the same world).

| symbol | code | meaning |
|---|---|---|
| g_{n,k,t} = abs(h)² | :meth:`MovingWorld.fading` | uplink (N, K) and downlink (N,) fading power of round t |
| a_{n,t} | :meth:`MovingWorld.available` | client n reachable in round t |
| f_n | :attr:`MovingWorld.cpu_frequency_hz` | client n's CPU frequency (None: the config's one value) |
| d_{n,t}, s_{n,t} | :meth:`MovingWorld.geometry` | client n's distance (m) and shadowing (dB) in round t |

Availability models are looked up by ``wireless.availability`` in
:data:`AVAILABILITY` (``always``, ``markov``, ``trace``: a FedScale-style
file, :mod:`rayfl.wireless.availability_trace`); a new kind plugs in with
:func:`register_availability`.

Implementation details:
    1. Gauss-Markov Rician fading keeps the line-of-sight part fixed and runs
       the AR(1) on the scattered part: g = abs(sqrt(K/(K+1)) + sqrt(1/(K+1))·h_t)²,
       so its marginal is the i.i.d. Rician law of :func:`fading_power_gain`.
    2. The downlink gain is its own AR(1) series per client (one "subchannel"),
       from a seed derived from (seed, "fading_ar_downlink"), independent of the
       uplink's, as the i.i.d. model draws them independently.
    3. Mobility (:class:`rayfl.wireless.mobility.Mobility`) gives round t's
       distances at the round's start boundary t·T; Gudmundson's shadowing
       (:class:`rayfl.wireless.shadowing.GudmundsonShadowing`) starts from the
       channel's once-per-client draw (``initial_db``) and decorrelates over the
       path moved in round t. The downlink sees the same distance and
       shadowing as the uplink (one device, one position).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from rayfl.seeding import rng_for
from rayfl.wireless.availability_trace import AvailabilityTrace, read_trace
from rayfl.wireless.channel import WirelessChannel
from rayfl.wireless.compute import cpu_frequencies
from rayfl.wireless.config import WirelessConfig
from rayfl.wireless.dynamics import (
    GaussMarkovFading,
    OnOffAvailability,
    doppler_hz,
    jakes_correlation,
)
from rayfl.wireless.mobility import MOBILITY_MODELS, Mobility
from rayfl.wireless.shadowing import GudmundsonShadowing
from rayfl.wireless.units import db_to_linear

__all__ = [
    "AVAILABILITY",
    "Availability",
    "LastSeen",
    "MovingGeometry",
    "MovingWorld",
    "Replayed",
    "cpu_frequencies_of",
    "fading_rho",
    "mobility_params",
    "read_availability_trace",
    "register_availability",
]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


class Availability(Protocol):
    """Which clients are reachable in round t (any order of rounds)."""

    def available(self, t: int) -> BoolArray:
        """Return (N,) bool: client n is reachable in round ``t``."""
        ...


class Replayed:
    """Step a model that draws rounds in order (0, 1, 2, ...) for any round asked.

    Args:
        make: Builds the model afresh (round -1).
        step: ``step(model, t)`` draws round t of the model.

    Example:
        >>> counts = Replayed(lambda: [], lambda model, t: model.append(t) or t)
        >>> counts(2), counts(2), counts(0)
        (2, 2, 0)
    """

    def __init__(self, make: Callable[[], Any], step: Callable[[Any, int], Any]):
        self.make, self.step = make, step
        self.model = make()
        self.round, self.value = -1, None

    def __call__(self, t: int) -> Any:
        """Return round ``t``'s draw (replaying from round 0 if t was passed)."""
        if t < 0:
            raise ValueError(f"round must be >= 0, got {t}")
        if t < self.round:
            self.model, self.round = self.make(), -1
        while self.round < t:
            self.round += 1
            self.value = self.step(self.model, self.round)
        return self.value


class _Always:
    """Every client reachable every round (the papers')."""

    def __init__(self, num_clients: int) -> None:
        self.num_clients = num_clients

    def available(self, t: int) -> BoolArray:
        return np.ones(self.num_clients, dtype=bool)


class _Markov:
    """:class:`OnOffAvailability` of every client, asked in any order.

    ``wireless``: any section with ``mean_on_rounds`` and ``mean_off_rounds``
    (the star's ``wireless``, a D2D ``topology``).
    """

    def __init__(self, wireless: Any, seed: int, num_clients: int) -> None:
        on, off = wireless.mean_on_rounds, wireless.mean_off_rounds
        self.draw = Replayed(
            lambda: OnOffAvailability(
                seed,
                range(num_clients),
                mean_on=float(on or 1),
                mean_off=float(off or 1),
            ),
            lambda chain, t: chain.available(t),
        )

    def available(self, t: int) -> BoolArray:
        return np.asarray(self.draw(t), dtype=bool).copy()


def _trace(wireless: WirelessConfig, seed: int, num_clients: int) -> Availability:
    """The trace file of ``wireless.availability_trace`` (its rows, in rounds)."""
    return read_availability_trace(wireless, num_clients)


def read_availability_trace(
    wireless: Any, num_clients: int, *, section: str = "wireless"
) -> AvailabilityTrace:
    """Read ``wireless.availability_trace`` for N = ``num_clients`` clients.

    ``wireless``: any section with the trace fields (the star's ``wireless``,
    a D2D ``topology``: ``section`` names it in the errors).

    Raises:
        ValueError: Naming the field, the file and (for a bad row) its line.
    """
    path = wireless.availability_trace
    if path is None:
        raise ValueError(
            f"{section}.availability=trace needs {section}.availability_trace"
        )
    try:
        return read_trace(
            path,
            num_clients=num_clients,
            absent=wireless.availability_trace_absent or "never",
            period_rounds=wireless.availability_period_rounds,
        )
    except FileNotFoundError:
        raise ValueError(
            f"{section}.availability_trace: no file {path!r} (relative to the "
            "working directory)"
        ) from None
    except ValueError as error:
        raise ValueError(f"{section}.availability_trace: {error}") from None


#: ``wireless.availability`` kind → factory(wireless, seed, num_clients).
AVAILABILITY: dict[str, Callable[[Any, int, int], Availability]] = {
    "always": lambda wireless, seed, n: _Always(n),
    "markov": _Markov,
    "trace": _trace,
}


def register_availability(
    kind: str,
    factory: Callable[[Any, int, int], Availability],
    *,
    force: bool = False,
) -> None:
    """Register an availability model under ``kind`` (e.g. a trace file reader).

    Raises:
        ValueError: If ``kind`` is taken and not ``force``.
    """
    if kind in AVAILABILITY and not force:
        raise ValueError(f"availability kind {kind!r} is already registered")
    AVAILABILITY[kind] = factory


def fading_rho(wireless: WirelessConfig) -> float:
    """Return ρ of ``gauss_markov`` fading (0 for ``iid``: independent rounds).

    ``wireless.fading_correlation`` as given, else Jakes' J0(2π·f_D·T) with f_D
    = ``doppler_hz`` or ``speed_mps``·``carrier_hz``/c and T =
    ``round_duration_s``.

    Example:
        >>> fading_rho(WirelessConfig(fading_dynamics="gauss_markov",
        ...     doppler_hz=0.0, round_duration_s=1.0))
        1.0
    """
    if wireless.fading_dynamics == "iid":
        return 0.0
    if wireless.fading_correlation is not None:
        return float(wireless.fading_correlation)
    assert wireless.round_duration_s is not None  # the config requires it
    shift = wireless.doppler_hz
    if shift is None:
        assert wireless.speed_mps is not None and wireless.carrier_hz is not None
        shift = doppler_hz(wireless.speed_mps, wireless.carrier_hz)
    return jakes_correlation(shift, wireless.round_duration_s)


def _gauss_markov(seed: int, rows: int, cols: int, rho: float) -> Replayed:
    return Replayed(
        lambda: GaussMarkovFading(seed, range(rows), cols, rho=rho),
        lambda fading, t: fading.complex_gains(t),
    )


def mobility_params(wireless: WirelessConfig) -> dict[str, float]:
    """Return the ``wireless.mobility_*`` fields set, by :data:`MOBILITY_MODELS` name.

    Example:
        >>> mobility_params(WirelessConfig(mobility="random_waypoint",
        ...     mobility_speed_min_mps=1, mobility_speed_max_mps=2,
        ...     round_duration_s=1))
        {'speed_min_mps': 1.0, 'speed_max_mps': 2.0}
    """
    names = MOBILITY_MODELS.get(wireless.mobility)
    if names is None:
        raise ValueError(
            f"wireless.mobility must be one of {', '.join(MOBILITY_MODELS)}, "
            f"got {wireless.mobility!r}"
        )
    values = {name: getattr(wireless, f"mobility_{name}") for name in names}
    return {name: float(v) for name, v in values.items() if v is not None}


class MovingGeometry:
    """Each round's client distances and shadowing (mobility, Gudmundson).

    Args:
        wireless: The ``wireless`` section.
        seed: The run's seed.
        num_clients: N.
    """

    def __init__(self, wireless: WirelessConfig, seed: int, num_clients: int) -> None:
        clients = range(num_clients)
        #: The channel's once-per-client shadowing (the papers' static draw).
        self.static_shadowing_db = np.asarray(
            WirelessChannel(
                wireless, num_clients, rng_for(seed, "geometry")
            ).shadowing_db
        )
        self.mobility = Mobility(
            wireless.mobility,
            seed,
            clients,
            distance_min_m=wireless.distance_min_m,
            distance_max_m=wireless.distance_max_m,
            round_s=wireless.round_duration_s or 1.0,  # static: never read
            **mobility_params(wireless),
        )
        decorrelation_m = wireless.shadowing_decorrelation_m
        self.shadowing: Replayed | None = None
        if decorrelation_m is not None:
            self.shadowing = Replayed(
                lambda: GudmundsonShadowing(
                    seed,
                    clients,
                    std_db=wireless.shadowing_std_db,
                    decorrelation_m=decorrelation_m,
                    initial_db=self.static_shadowing_db,
                ),
                lambda series, t: series.shadowing_db(t, self.mobility.moved_m(t)),
            )

    def at(self, t: int) -> tuple[FloatArray, FloatArray]:
        """Return round ``t``'s distances (N,) in m and shadowing (N,) in dB."""
        shadowing_db = (
            self.static_shadowing_db if self.shadowing is None else self.shadowing(t)
        )
        return self.mobility.distances(t), np.asarray(shadowing_db, dtype=np.float64)


class MovingWorld:
    """The moving parts of a run's wireless world (module docstring).

    Args:
        wireless: The ``wireless`` section.
        seed: The run's seed.
        num_clients: N.
    """

    def __init__(self, wireless: WirelessConfig, seed: int, num_clients: int) -> None:
        self.wireless = wireless
        self.num_clients = num_clients
        factory = AVAILABILITY.get(wireless.availability)
        if factory is None:
            raise ValueError(
                f"wireless.availability must be one of {', '.join(AVAILABILITY)}, "
                f"got {wireless.availability!r}"
            )
        #: Reachability; None when every client always is (the default).
        self.availability = (
            None
            if wireless.availability == "always"
            else factory(wireless, seed, num_clients)
        )
        self.correlated = wireless.fading_dynamics == "gauss_markov"
        if self.correlated:
            rho = fading_rho(wireless)
            k = wireless.num_subchannels
            self._uplink = _gauss_markov(seed, num_clients, k, rho)
            downlink_seed = int(rng_for(seed, "fading_ar_downlink").integers(2**62))
            self._downlink = _gauss_markov(downlink_seed, num_clients, 1, rho)
        #: f_n in Hz, (N,); None: ``wireless.cpu_frequency_hz`` for everyone.
        self.cpu_frequency_hz = cpu_frequencies_of(wireless, seed, num_clients)
        #: Distances and shadowing per round; None: the channel's fixed geometry.
        self.moving_geometry = (
            MovingGeometry(wireless, seed, num_clients)
            if wireless.mobility != "static"
            or wireless.shadowing_decorrelation_m is not None
            else None
        )

    def geometry(self, t: int) -> dict[str, FloatArray]:
        """Return round ``t``'s ``distances_m`` and ``shadowing_db`` (N,) as keywords.

        Empty for the papers' static geometry, so the channel uses its own
        fixed draw (bit for bit today's); else the keywords of
        :meth:`rayfl.wireless.channel.WirelessChannel.state_of`.
        """
        if self.moving_geometry is None:
            return {}
        distances_m, shadowing_db = self.moving_geometry.at(t)
        return {"distances_m": distances_m, "shadowing_db": shadowing_db}

    def fading(self, t: int) -> tuple[FloatArray, FloatArray]:
        """Return round ``t``'s fading powers: uplink (N, K) and downlink (N,).

        Raises:
            ValueError: With i.i.d. fading (the channel draws it itself).
        """
        if not self.correlated:
            raise ValueError("i.i.d. fading is drawn by the channel, not the world")
        up = self._power(self._uplink(t))
        down = self._power(self._downlink(t))[:, 0]
        return up, down

    def _power(self, h: npt.NDArray[np.complex128]) -> FloatArray:
        """abs(h)² for Rayleigh; the Rician law with a fixed line of sight."""
        if self.wireless.fading == "rician":
            k = float(db_to_linear(self.wireless.rician_k_db))
            h = np.sqrt(k / (k + 1)) + h * np.sqrt(1.0 / (k + 1))
        return np.asarray(np.abs(h) ** 2, dtype=np.float64)

    def available(self, t: int) -> BoolArray:
        """Return (N,) bool: which clients are reachable in round ``t``."""
        if self.availability is None:
            return np.ones(self.num_clients, dtype=bool)
        return np.asarray(self.availability.available(t), dtype=bool)


def cpu_frequencies_of(wireless: Any, seed: int, num_clients: int) -> FloatArray | None:
    """f_n of every client, or None for the config's one value (constant).

    ``wireless``: any section with the ``cpu_frequency_*`` fields (the star's
    ``wireless``, a D2D ``topology``).
    """
    kind = wireless.cpu_frequency_distribution
    clients = range(num_clients)
    if kind == "uniform":
        return cpu_frequencies(
            seed,
            clients,
            "uniform",
            low=float(wireless.cpu_frequency_low_hz or 0.0),
            high=float(wireless.cpu_frequency_high_hz or 0.0),
        )
    if kind == "lognormal":
        return cpu_frequencies(
            seed,
            clients,
            "lognormal",
            median=wireless.cpu_frequency_hz,
            sigma=float(wireless.cpu_frequency_sigma or 0.0),
        )
    return None


class LastSeen:
    """The base station's memory of each client's channel: last gain heard, and when.

    A reachable client's channel is measured every round; an unreachable one's
    is the gain of the last round it was reachable (its large-scale gain, the
    fading mean, if never), with its age in rounds.

    Args:
        never_db: (N, K) gain in dB reported before a client is first heard.
    """

    def __init__(self, never_db: FloatArray) -> None:
        self.never_db = np.asarray(never_db, dtype=np.float64)
        self._reset()

    def _reset(self) -> None:
        self.round = -1
        self.gain_db = self.never_db.copy()
        self.seen = np.full(len(self.never_db), -1, dtype=np.int64)

    def at(
        self,
        t: int,
        gain_db: Callable[[int], FloatArray],
        available: Callable[[int], BoolArray],
    ) -> tuple[FloatArray, FloatArray]:
        """Return round ``t``'s last-seen gains (N, K) in dB and their ages (N,).

        Args:
            t: The round.
            gain_db: Round r's true (N, K) gain in dB.
            available: Round r's reachable clients (N,).
        """
        if t < self.round:
            self._reset()
        while self.round < t:
            r = self.round + 1
            on = np.asarray(available(r), dtype=bool)
            if on.any():
                self.gain_db[on] = np.asarray(gain_db(r))[on]
                self.seen[on] = r
            self.round = r
        return self.gain_db.copy(), (t - self.seen).astype(np.float64)
