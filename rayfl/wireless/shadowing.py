"""Shadowing that decorrelates as a device moves: Gudmundson's model.

Issue 48: the engine reads it through ``wireless.shadowing_decorrelation_m``
(:class:`rayfl.wireless.world.MovingGeometry`); by default the log-normal
shadowing is drawn once per client, :mod:`rayfl.wireless.channel`. A
device's shadowing in dB is a first-order autoregression over the distance it
moves (Gudmundson 1991, "Correlation model for shadow fading in mobile radio
systems": the autocorrelation R(Δx) = σ² e^{−|Δx|/d_corr} fitted to
measurements; its equation number was not checked against the paper):

| symbol | code | meaning |
|---|---|---|
| s_{i,t} | :meth:`GudmundsonShadowing.shadowing_db` | client i's shadowing in round t, dB |
| σ | ``std_db`` | the shadowing's std, dB |
| d_corr | ``decorrelation_m`` | the distance over which the correlation falls to 1/e, m |
| Δd_{i,t} | ``moved_m`` | the path client i travelled in round t, m (:class:`rayfl.wireless.mobility.Mobility`) |
| a = e^{−Δd/d_corr} | :func:`gudmundson_correlation` | the lag-1 correlation over that path |

s_{i,0} ~ N(0, σ²) and s_{i,t} = a_{i,t} s_{i,t−1} + √(1 − a_{i,t}²) σ w_{i,t},
w_{i,t} ~ N(0, 1) from step t of client i's ``shadowing_ar`` stream
(:class:`rayfl.wireless.streams.BlockStream`): the series depends on (seed, i)
and the paths moved only (packing-independent).

Implementation details:
    1. The series starts stationary, so s_{i,t} ~ N(0, σ²) at every round
       whatever the paths; a device that does not move keeps its shadowing
       (a = 1), as today's once-per-client draw.
    2. ``initial_db`` may replace the stationary start, e.g. by the shadowing
       the channel drew for the papers' static geometry, so a static world
       reproduces it exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.wireless.streams import (
    BlockStream,
    ClientIds,
    check_clients,
    standard_normal,
)

__all__ = ["GudmundsonShadowing", "gudmundson_correlation"]


def gudmundson_correlation(
    moved_m: npt.ArrayLike, decorrelation_m: float
) -> npt.NDArray[np.float64]:
    """Return a = exp(−Δd/d_corr), the shadowing's correlation over a path Δd.

    Example:
        >>> round(float(gudmundson_correlation(20.0, 20.0)), 4)  # 1/e
        0.3679
    """
    if not decorrelation_m > 0:
        raise ValueError(f"decorrelation_m must be > 0, got {decorrelation_m}")
    moved = np.asarray(moved_m, dtype=np.float64)
    if np.isnan(moved).any() or (moved < 0).any():
        raise ValueError("moved_m must be >= 0")
    return np.exp(-moved / decorrelation_m)


class GudmundsonShadowing:
    """Each client's shadowing in dB, evolving over the paths it moves.

    Args:
        seed: The run's seed.
        clients: The client ids followed (any subset).
        std_db: σ, dB (≥ 0).
        decorrelation_m: d_corr, m (> 0).
        initial_db: s_{i,0} of each client, (n,) dB; by default drawn
            N(0, σ²) from step 0 of its stream.

    Example:
        >>> shadow = GudmundsonShadowing(0, [0, 1], std_db=8.0, decorrelation_m=50.0)
        >>> first = shadow.shadowing_db(0, np.zeros(2))
        >>> bool((shadow.shadowing_db(1, np.zeros(2)) == first).all())  # no move
        True
    """

    def __init__(
        self,
        seed: int,
        clients: ClientIds,
        *,
        std_db: float,
        decorrelation_m: float,
        initial_db: npt.ArrayLike | None = None,
    ) -> None:
        if not (std_db >= 0 and np.isfinite(std_db)):
            raise ValueError(f"std_db must be >= 0, got {std_db}")
        gudmundson_correlation(0.0, decorrelation_m)  # checks it
        self.std_db, self.decorrelation_m = float(std_db), float(decorrelation_m)
        self.clients = check_clients(clients)
        self.stream = BlockStream(seed, "shadowing_ar", self.clients, width=1)
        self.initial_db = None
        if initial_db is not None:
            self.initial_db = np.array(initial_db, dtype=np.float64)
            if self.initial_db.shape != self.clients.shape:
                raise ValueError(
                    f"initial_db must have shape {self.clients.shape}, "
                    f"got {self.initial_db.shape}"
                )
        self.round = -1  # the last round drawn
        self.value_db = np.zeros(len(self.clients))

    def _noise(self, t: int) -> npt.NDArray[np.float64]:
        rows = np.arange(len(self.clients))
        u = self.stream.draw(rows, np.full(len(rows), t))[:, 0]
        return standard_normal(u)

    def shadowing_db(self, t: int, moved_m: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Return s_{·,t}, (n,) dB; rounds in order (0, 1, 2, ...).

        Args:
            t: The round.
            moved_m: Δd of each client in round t, (n,) m (ignored at t = 0).
        """
        if t != self.round + 1:
            raise ValueError(f"round {t} asked after round {self.round}: draw in order")
        if t == 0:
            self.value_db = (
                self.std_db * self._noise(0)
                if self.initial_db is None
                else self.initial_db.copy()
            )
        else:
            a = gudmundson_correlation(moved_m, self.decorrelation_m)
            if a.shape != self.value_db.shape:
                raise ValueError(
                    f"moved_m must have shape {self.value_db.shape}, got {a.shape}"
                )
            fresh = np.sqrt(1.0 - a**2) * self.std_db * self._noise(t)
            self.value_db = a * self.value_db + fresh
        self.round = t
        return self.value_db.copy()

    def state_dict(self) -> dict[str, Any]:
        """Plain data: the last round drawn and its shadowing."""
        return {"round": self.round, "value_db": self.value_db.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.round = int(state["round"])
        self.value_db = np.array(state["value_db"], dtype=np.float64)
