"""The moving models of :mod:`rayfl.wireless.mobility`: their walks in an area.

Each walk holds n clients' state as arrays and steps them one round of T
seconds at a time in an area (:mod:`rayfl.wireless.areas`: the star's disk or
a D2D network's square); :class:`rayfl.wireless.mobility.Trajectories` holds
the round counter. The equations, their sources and the choices made are in
:mod:`rayfl.wireless.mobility`'s docstring; in short:

| symbol | code | meaning |
|---|---|---|
| leg k: (waypoint, v) | :class:`RandomWaypointWalk` | a waypoint uniform in the area, v ~ U[v_min, v_max], then a pause T_p |
| s_t, θ_t (AR(1), memory α) | :class:`GaussMarkovWalk` | Liang & Haas 1999, one step per round |
| θ ↦ 2φ + π − θ | :meth:`rayfl.wireless.areas.Area.reflect` | a specular bounce off the edge at normal angle φ |

The draws come from the streams ``stream`` (legs, innovations) and
``stream + "_start"`` (starts) of (seed, client): ``mobility`` for the star,
``d2d_mobility`` for a D2D network.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.seeding import rng_for_many
from rayfl.wireless.areas import Area, reflect_in_disk
from rayfl.wireless.streams import (
    BlockStream,
    ClientIds,
    check_clients,
    standard_normal,
)

__all__ = ["GaussMarkovWalk", "RandomWaypointWalk", "reflect_in_disk", "start_uniforms"]

FloatArray = npt.NDArray[np.float64]


def start_uniforms(
    seed: int, clients: npt.NDArray[np.int64], stream: str = "mobility"
) -> FloatArray:
    """Return four uniforms per client from its ``stream + "_start"`` stream, (n, 4).

    Column 0 is the static start's angle, 1–3 Gauss-Markov's θ̄_i, s_0, θ_0.
    """
    if not len(clients):
        return np.empty((0, 4))
    streams = rng_for_many(seed, f"{stream}_start", clients=clients)
    return np.stack([g.random(4) for g in streams])


class RandomWaypointWalk:
    """Random-waypoint walks of n clients: position, leg target, speed, pause.

    Args:
        seed: The run's seed.
        clients: The client ids (any subset).
        area: Where the waypoints are drawn (:mod:`rayfl.wireless.areas`).
        round_s: T, one round's duration.
        stream: The purpose of the legs' draws (``mobility``, ``d2d_mobility``).
        **params: ``speed_min_mps``, ``speed_max_mps``, ``pause_s``.
    """

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
        self.area, self.round_s, self.p = area, round_s, params
        n = len(clients)
        self.stream = BlockStream(seed, stream, clients, width=3)
        self.position, self.waypoint = np.empty((n, 2)), np.empty((n, 2))
        self.speed, self.pause_left = np.empty(n), np.zeros(n)
        self.leg = np.zeros(n, dtype=np.int64)

    def reset(self, start: FloatArray) -> None:
        """Stand every client at ``start`` (n, 2), at the start of its leg 0."""
        self.position = start.copy()
        self.pause_left[:] = 0.0
        self.leg[:] = 0
        self._new_legs(np.arange(len(start)))

    def _new_legs(self, rows: npt.NDArray[np.int64]) -> None:
        u = self.stream.draw(rows, self.leg[rows])
        self.waypoint[rows] = self.area.uniform(u[:, :2])
        low, high = self.p["speed_min_mps"], self.p["speed_max_mps"]
        self.speed[rows] = low + (high - low) * u[:, 2]

    def step(self) -> FloatArray:
        """Walk one round; return the path length of each client, m."""
        remaining = np.full(len(self.position), self.round_s)
        moved = np.zeros(len(self.position))
        while (remaining > 0).any():
            pausing = (remaining > 0) & (self.pause_left > 0)
            rest = np.minimum(self.pause_left[pausing], remaining[pausing])
            self.pause_left[pausing] -= rest
            remaining[pausing] -= rest
            rows = np.flatnonzero((remaining > 0) & (self.pause_left <= 0))
            gap = self.waypoint[rows] - self.position[rows]
            length = np.hypot(*gap.T)
            need = length / self.speed[rows]
            arrive = need <= remaining[rows]
            done, going = rows[arrive], rows[~arrive]
            self.position[done] = self.waypoint[done]
            moved[done] += length[arrive]
            remaining[done] -= need[arrive]
            self.pause_left[done] = self.p["pause_s"]
            self.leg[done] += 1
            self._new_legs(done)
            walk = self.speed[going] * remaining[going]
            unit = gap[~arrive] / length[~arrive][:, None]
            self.position[going] += walk[:, None] * unit
            moved[going] += walk
            remaining[going] = 0.0
        return moved

    def state(self) -> dict[str, Any]:
        """Plain data: the walks' arrays."""
        keys = ("position", "waypoint", "speed", "pause_left", "leg")
        return {k: getattr(self, k).copy() for k in keys}


class GaussMarkovWalk:
    """Gauss-Markov walks of n clients: position, speed, direction (mean, deviation).

    Args:
        seed: The run's seed.
        clients: The client ids (any subset).
        area: Where the walks bounce (:mod:`rayfl.wireless.areas`).
        round_s: T, one round's duration (the model's time step).
        stream: The purpose of the draws (starts: ``stream + "_start"``).
        **params: ``memory``, ``speed_mean_mps``, ``speed_std_mps``,
            ``direction_std_rad``.
    """

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
        self.area, self.round_s, self.p = area, round_s, params
        self.seed, self.clients, self.purpose = seed, check_clients(clients), stream
        n = len(self.clients)
        self.stream = BlockStream(seed, stream, self.clients, width=2)
        self.position, self.speed = np.empty((n, 2)), np.empty(n)
        self.mean_direction, self.deviation = np.empty(n), np.empty(n)
        self.round = 0

    def reset(self, start: FloatArray) -> None:
        """Stand every client at ``start`` (n, 2), its speed and direction stationary."""
        u = start_uniforms(self.seed, self.clients, self.purpose)
        self.position = start.copy()
        self.mean_direction = 2.0 * np.pi * u[:, 1]
        self.speed = self.p["speed_mean_mps"] + self.p[
            "speed_std_mps"
        ] * standard_normal(u[:, 2])
        self.deviation = self.p["direction_std_rad"] * standard_normal(u[:, 3])
        self.round = 0

    def step(self) -> FloatArray:
        """Move one round on the last speed and direction, then update them."""
        direction = self.mean_direction + self.deviation
        travel = (self.speed * self.round_s)[:, None]
        heading = np.stack([np.cos(direction), np.sin(direction)], axis=1)
        self.position, sign, offset = self.area.reflect(self.position, travel * heading)
        self.mean_direction = np.mod(offset + sign * self.mean_direction, 2.0 * np.pi)
        self.deviation = sign * self.deviation
        self.round += 1
        rows = np.arange(len(self.position))
        w = standard_normal(self.stream.draw(rows, np.full(len(rows), self.round)))
        alpha = self.p["memory"]
        scale = np.sqrt(1.0 - alpha**2)
        self.speed = (
            alpha * self.speed
            + (1.0 - alpha) * self.p["speed_mean_mps"]
            + scale * self.p["speed_std_mps"] * w[:, 0]
        )
        self.deviation = (
            alpha * self.deviation + scale * self.p["direction_std_rad"] * w[:, 1]
        )
        return np.abs(travel[:, 0])

    def state(self) -> dict[str, Any]:
        """Plain data: the walks' arrays and the last round stepped."""
        keys = ("position", "speed", "mean_direction", "deviation")
        return {"round": self.round} | {k: getattr(self, k).copy() for k in keys}
