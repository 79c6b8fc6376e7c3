"""Devices that move in the cell: static, random waypoint and Gauss-Markov mobility.

Issue 48 ("wireless worlds that move"): the engine reads it through
``wireless.mobility`` (:class:`rayfl.wireless.world.MovingGeometry`). The
cell is the disk of radius R = ``distance_max_m`` around the base station at
the origin; a :class:`Mobility` gives each client's position at
every round boundary t·T (T = ``round_s``), its distance to the base station
and the path it travelled during the round (what correlated shadowing,
:mod:`rayfl.wireless.shadowing`, decorrelates over).

| symbol | code | meaning |
|---|---|---|
| x_{i,t} ∈ ℝ² | :meth:`Mobility.positions` | client i's position at round boundary t, m |
| d_{i,t} = max(‖x_{i,t}‖, d_min) | :meth:`Mobility.distances` | its distance to the base station, m |
| Δd_{i,t} | :meth:`Mobility.moved_m` | the path it travelled in round t, m (0 at t = 0) |
| R, d_min | ``distance_max_m``, ``distance_min_m`` | the cell's radius; the path-loss floor |
| T | ``round_s`` | one round's duration, s |
| v ~ U[v_min, v_max] | ``speed_min_mps``, ``speed_max_mps`` | random waypoint: a leg's speed |
| T_p | ``pause_s`` | random waypoint: the pause at each waypoint |
| α | ``memory`` | Gauss-Markov: the AR(1) memory of speed and direction |
| s̄, σ_s | ``speed_mean_mps``, ``speed_std_mps`` | Gauss-Markov: speed's mean and std |
| σ_θ | ``direction_std_rad`` | Gauss-Markov: direction's std around its mean θ̄_i |

Models (``kind``, parameters; :data:`MOBILITY_MODELS`):

- ``static``: x_{i,t} = x_{i,0}, with ‖x_{i,0}‖ exactly the distance the
  channel draws today (:func:`rayfl.wireless.channel.place_clients` on the
  ``geometry`` stream: d_i ~ U[d_min, R], seed_000 §2.5) at a uniform angle.
- ``random_waypoint`` (Johnson & Maltz 1996; Bettstetter, Hartenstein &
  Pérez-Costa 2004): from x_{i,0}, walk a straight leg to a waypoint uniform
  in the disk at a speed v ~ U[v_min, v_max] (v_min > 0, so no speed decay to
  0), pause T_p there, draw the next leg. Its stationary position density in
  a disk is ∝ (R² − r²)·E(r/R), E the complete elliptic integral of the second
  kind: Hyytiä, Lassila & Virtamo 2006's density for a convex area, f(x) ∝
  ∫_0^{2π} ℓ1 ℓ2 (ℓ1 + ℓ2) dφ (ℓ1, ℓ2 the distances from x to the edge along
  ±φ), in a disk; mixed with the uniform law in the share of time paused
  (Bettstetter, Resta & Santi 2003). Equation numbers were not checked
  against the papers.
- ``gauss_markov`` (Liang & Haas 1999; as surveyed by Camp, Boleng & Davies
  2002): s_t = α s_{t−1} + (1 − α) s̄ + √(1 − α²) σ_s w_t and θ_t = α
  θ_{t−1} + (1 − α) θ̄_i + √(1 − α²) σ_θ w'_t, w, w' ~ N(0, 1); x_t = x_{t−1}
  + s_{t−1}·T·(cos θ_{t−1}, sin θ_{t−1}), reflected specularly at the cell's
  edge.

The two moving models' walks are in :mod:`rayfl.wireless.walks`;
:class:`Trajectories` runs one in any area of :mod:`rayfl.wireless.areas`
from given start positions. A D2D network (:mod:`rayfl.d2d.motion`) walks its
nodes in its square [0, L]² from their dropped positions: waypoints uniform
in the square, Gauss-Markov reflected specularly at its four edges, draws from
the ``d2d_mobility`` and ``d2d_mobility_start`` streams.

Implementation details:
    1. Every model starts at the static positions, so round 0 has the papers'
       geometry whatever the model (not the model's stationary law: random
       waypoint forgets its start after a few legs, ≈ 0.9 R / v each).
    2. d_min is a floor on the distance, not a wall: positions move in the
       whole disk (a straight leg between two waypoints of an annulus may
       cross its hole, and the stationary law above is the disk's), and
       :meth:`Mobility.distances` clamps ‖x‖ to d_min, below which the
       log-distance path loss is not valid.
    3. Random-waypoint legs are keyed by leg: leg k of client i reads step k
       of the ``mobility`` stream (:class:`rayfl.wireless.streams.BlockStream`),
       so client i's trajectory in continuous time depends on (seed, i) only,
       and the rounds sample it at t·T. Gauss-Markov's innovations of round t
       read step t. Starts (angle, θ̄_i, s_0, θ_0) come from the
       ``mobility_start`` stream of (seed, i).
    4. Gauss-Markov moves once per round (Liang & Haas's time step is T). Its
       speed and direction start stationary, s_0 ~ N(s̄, σ_s²) and θ_0 ~
       N(θ̄_i, σ_θ²), with the mean direction θ̄_i ~ U[0, 2π) per client. The
       speed is the AR(1) state itself, unclipped: a negative speed moves the
       device backwards (pick s̄ ≫ σ_s to keep it rare); Δd is |s|·T.
    5. A Gauss-Markov reflection at the edge mirrors the direction and its
       mean θ̄_i about the tangent, so the device does not drift back into
       the wall and the direction's deviation from its mean just flips sign.
    6. Δd is the path length travelled in the round (with the turns at
       waypoints and bounces), not the straight displacement.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from rayfl.seeding import rng_for
from rayfl.wireless.areas import Area, Disk
from rayfl.wireless.channel import place_clients
from rayfl.wireless.streams import ClientIds, check_clients
from rayfl.wireless.walks import GaussMarkovWalk, RandomWaypointWalk, start_uniforms

__all__ = ["MOBILITY_MODELS", "Mobility", "Trajectories", "static_positions"]

FloatArray = npt.NDArray[np.float64]

#: Each mobility model's parameters and their defaults (None: required).
MOBILITY_MODELS: dict[str, dict[str, float | None]] = {
    "static": {},
    "random_waypoint": {"speed_min_mps": None, "speed_max_mps": None, "pause_s": 0.0},
    "gauss_markov": {
        "memory": None,
        "speed_mean_mps": None,
        "speed_std_mps": None,
        "direction_std_rad": None,
    },
}


def _check(kind: str, params: dict[str, float]) -> dict[str, float]:
    if kind not in MOBILITY_MODELS:
        raise ValueError(
            f"kind must be one of {', '.join(MOBILITY_MODELS)}, got {kind!r}"
        )
    names = MOBILITY_MODELS[kind]
    required = {k for k, v in names.items() if v is None}
    if not required <= set(params) <= set(names):
        raise ValueError(
            f"{kind} takes {', '.join(names) or 'no parameters'} "
            f"({', '.join(sorted(required)) or 'none'} required); "
            f"got {', '.join(params) or 'none'}"
        )
    values = {k: float(v) for k, v in names.items() if v is not None}
    values.update({k: float(v) for k, v in params.items()})
    if not all(np.isfinite(v) for v in values.values()):
        raise ValueError(f"{kind}'s parameters must be finite, got {values}")
    if kind == "random_waypoint" and not (
        0 < values["speed_min_mps"] <= values["speed_max_mps"]
        and values["pause_s"] >= 0
    ):
        raise ValueError(
            "random_waypoint needs 0 < speed_min_mps <= speed_max_mps and "
            f"pause_s >= 0, got {values}"
        )
    if kind == "gauss_markov" and not (
        0 <= values["memory"] <= 1
        and min(
            values["speed_mean_mps"],
            values["speed_std_mps"],
            values["direction_std_rad"],
        )
        >= 0
    ):
        raise ValueError(
            "gauss_markov needs memory in [0, 1] and speed_mean_mps, "
            f"speed_std_mps, direction_std_rad >= 0, got {values}"
        )
    return values


def _static_distances(
    seed: int, clients: npt.NDArray[np.int64], low: float, high: float
) -> FloatArray:
    """The channel's distances of ``clients`` (the prefix of one keyed draw)."""
    count = int(clients.max()) + 1 if len(clients) else 0
    geometry = rng_for(seed, "geometry")
    distance = place_clients(
        count, distance_min_m=low, distance_max_m=high, rng=geometry
    )
    return distance[clients]


def static_positions(
    seed: int,
    clients: ClientIds,
    *,
    distance_min_m: float,
    distance_max_m: float,
) -> FloatArray:
    """Return the papers' positions x_{i,0}, (n, 2) in m.

    ‖x_{i,0}‖ is the distance :class:`rayfl.wireless.channel.WirelessChannel`
    draws for client i with the same seed (up to rounding; :class:`Mobility`
    returns that distance exactly): the i-th value of
    :func:`rayfl.wireless.channel.place_clients` on ``rng_for(seed,
    "geometry")``. The angle is uniform, from the client's ``mobility_start``
    stream.

    Example:
        >>> x = static_positions(0, [0, 1], distance_min_m=10, distance_max_m=100)
        >>> bool(((np.hypot(*x.T) >= 10) & (np.hypot(*x.T) <= 100)).all())
        True
    """
    ids = check_clients(clients)
    return _start_of(seed, ids, distance_min_m, distance_max_m)[1]


def _start_of(
    seed: int, clients: npt.NDArray[np.int64], low: float, high: float
) -> tuple[FloatArray, FloatArray]:
    """The static distances (n,) and positions (n, 2) of ``clients``."""
    distance = _static_distances(seed, clients, low, high)
    angle = 2.0 * np.pi * start_uniforms(seed, clients)[:, 0]
    unit = np.stack([np.cos(angle), np.sin(angle)], axis=1)
    return distance, distance[:, None] * unit


class _Static:
    """Positions that never change."""

    def __init__(
        self,
        seed: int,
        clients: ClientIds,
        *,
        area: Area,
        round_s: float,
        stream: str = "mobility",
        **params: float,
    ) -> None:
        self.position = np.empty((len(clients), 2))

    def reset(self, start: FloatArray) -> None:
        self.position = start.copy()

    def step(self) -> FloatArray:
        return np.zeros(len(self.position))

    def state(self) -> dict[str, Any]:
        return {"position": self.position.copy()}


class _Model(Protocol):
    position: FloatArray

    def __init__(
        self,
        seed: int,
        clients: ClientIds,
        *,
        area: Area,
        round_s: float,
        stream: str = "mobility",
        **params: float,
    ) -> None: ...

    def reset(self, start: FloatArray) -> None: ...

    def step(self) -> FloatArray: ...

    def state(self) -> dict[str, Any]: ...


_MODELS: dict[str, type[_Model]] = {
    "static": _Static,
    "random_waypoint": RandomWaypointWalk,
    "gauss_markov": GaussMarkovWalk,
}


class Trajectories:
    """Positions of ``clients`` from ``start`` at each round boundary, in an area.

    The walk under one model, without the star's cell: :class:`Mobility` runs
    it in the disk from the papers' positions, :mod:`rayfl.d2d.motion` in a
    D2D network's square from its nodes' positions. Rounds may be asked in any
    order: asking round t after round t' ≤ t walks on from t'; asking an
    earlier round replays from round 0 (the draws being keyed).

    Args:
        kind: One of :data:`MOBILITY_MODELS`.
        seed: The run's seed.
        clients: The client ids followed (each id's trajectory is the same
            whoever else is followed).
        area: Where they move (:class:`rayfl.wireless.areas.Disk` or
            :class:`~rayfl.wireless.areas.Square`).
        start: (n, 2) positions at round 0, m, in the area.
        round_s: T, the duration of one round, s (> 0).
        stream: The purpose of the draws (``mobility``, ``d2d_mobility``).
        **params: The model's parameters (:data:`MOBILITY_MODELS`).

    Example:
        >>> from rayfl.wireless.areas import Square
        >>> walk = Trajectories("random_waypoint", 0, range(2), area=Square(50),
        ...     start=np.full((2, 2), 25.0), round_s=5, speed_min_mps=1,
        ...     speed_max_mps=3)
        >>> x = walk.positions(10)
        >>> bool(((x >= 0) & (x <= 50)).all()), bool((x != 25.0).any())
        (True, True)
    """

    def __init__(
        self,
        kind: str,
        seed: int,
        clients: ClientIds,
        *,
        area: Area,
        start: npt.ArrayLike,
        round_s: float,
        stream: str = "mobility",
        **params: float,
    ) -> None:
        values = _check(kind, params)
        if not round_s > 0:
            raise ValueError(f"round_s must be > 0, got {round_s}")
        self.kind, self.params = kind, values
        self.clients = check_clients(clients)
        self.start = np.array(start, dtype=np.float64).reshape(len(self.clients), 2)
        self.model = _MODELS[kind](
            int(seed),
            self.clients,
            area=area,
            round_s=float(round_s),
            stream=stream,
            **values,
        )
        self.rewind()

    def rewind(self) -> None:
        """Stand every client at its start, round 0."""
        self.model.reset(self.start)
        self.round = 0
        self.moved = np.zeros(len(self.clients))

    def walk_to(self, t: int) -> None:
        """Walk (or replay) to the boundary of round ``t``."""
        if t < 0:
            raise ValueError(f"round must be >= 0, got {t}")
        if t < self.round:
            self.rewind()
        while self.round < t:
            self.moved = self.model.step()
            self.round += 1

    def positions(self, t: int) -> FloatArray:
        """Return x_{i,t}, (n, 2) in m: the positions at the boundary of round t."""
        self.walk_to(t)
        return np.array(self.model.position, dtype=np.float64)

    def moved_m(self, t: int) -> FloatArray:
        """Return Δd_{i,t}, (n,) in m: the path travelled from boundary t − 1 to t."""
        self.walk_to(t)
        return self.moved.copy()

    def state_dict(self) -> dict[str, Any]:
        """Plain data: the last round walked, its path lengths and the model's state."""
        return {
            "round": self.round,
            "moved": self.moved.copy(),
            "model": self.model.state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (of a :class:`Trajectories` built alike)."""
        self.round = int(state["round"])
        self.moved = np.array(state["moved"], dtype=np.float64)
        for key, value in state["model"].items():
            setattr(self.model, key, np.array(value) if np.ndim(value) else int(value))


class Mobility:
    """Positions of ``clients`` at each round boundary, under one mobility model.

    Rounds may be asked in any order: asking round t after round t' ≤ t walks
    on from t'; asking an earlier round replays from round 0 (the same
    positions, the draws being keyed).

    Args:
        kind: One of :data:`MOBILITY_MODELS`.
        seed: The run's seed.
        clients: The client ids followed (any subset: each id's trajectory is
            the same whoever else is followed).
        distance_min_m: d_min, the distance floor, m (> 0).
        distance_max_m: R, the cell's radius, m (> d_min).
        round_s: T, the duration of one round, s (> 0).
        **params: The model's parameters (:data:`MOBILITY_MODELS`).

    Example:
        >>> world = Mobility("random_waypoint", 0, range(3), distance_min_m=10,
        ...                  distance_max_m=100, round_s=5, speed_min_mps=1,
        ...                  speed_max_mps=2)
        >>> world.positions(4).shape, bool((world.moved_m(4) >= 5).all())
        ((3, 2), True)
    """

    def __init__(
        self,
        kind: str,
        seed: int,
        clients: ClientIds,
        *,
        distance_min_m: float,
        distance_max_m: float,
        round_s: float,
        **params: float,
    ) -> None:
        _check(kind, params)
        if not 0 < distance_min_m < distance_max_m:
            raise ValueError(
                "need 0 < distance_min_m < distance_max_m, got "
                f"{distance_min_m:g} and {distance_max_m:g}"
            )
        self.kind, self.seed = kind, int(seed)
        self.clients = check_clients(clients)
        self.distance_min_m, self.distance_max_m = (
            float(distance_min_m),
            float(distance_max_m),
        )
        self.round_s = float(round_s)
        self._start_distance, start = _start_of(
            self.seed, self.clients, self.distance_min_m, self.distance_max_m
        )
        self.walk = Trajectories(
            kind,
            self.seed,
            self.clients,
            area=Disk(self.distance_max_m),
            start=start,
            round_s=self.round_s,
            stream="mobility",
            **params,
        )
        self.params = self.walk.params

    @property
    def round(self) -> int:
        """The last round walked."""
        return self.walk.round

    def positions(self, t: int) -> FloatArray:
        """Return x_{i,t}, (n, 2) in m: the positions at the boundary of round t."""
        return self.walk.positions(t)

    def distances(self, t: int) -> FloatArray:
        """Return d_{i,t} = max(‖x_{i,t}‖, d_min), (n,) in m.

        While a client has not moved (round 0, or ``static``) this is exactly
        the channel's distance, not ‖x‖ recomputed with rounding.
        """
        radius: FloatArray = np.hypot(*self.positions(t).T)
        if self.walk.round == 0 or self.kind == "static":
            radius = self._start_distance
        out: FloatArray = np.maximum(radius, self.distance_min_m)
        return out

    def moved_m(self, t: int) -> FloatArray:
        """Return Δd_{i,t}, (n,) in m: the path travelled from boundary t − 1 to t."""
        return self.walk.moved_m(t)

    def state_dict(self) -> dict[str, Any]:
        """Plain data: the last round walked, its path lengths and the model's state."""
        return self.walk.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (of a :class:`Mobility` built alike)."""
        self.walk.load_state_dict(state)
