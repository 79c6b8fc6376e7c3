"""Channels and devices that change over rounds: correlated fading, on/off devices.

Groundwork of issue 48 ("wireless worlds that move"), not yet read by the
engine: the papers' default stays i.i.d. fading and always-reachable clients
(:mod:`rayfl.wireless.channel`). Each model is keyed like every other draw
(:func:`rayfl.seeding.rng_for`): client i's series depends on (seed, i) and
the rounds so far only, never on which clients share an actor, so runs stay
reproducible and packing-independent.

| symbol | code | meaning |
|---|---|---|
| f_D = v·f_c/c | :func:`doppler_hz` | maximum Doppler shift of a device moving at v |
| ρ = J0(2π f_D T) | :func:`jakes_correlation` | lag-1 correlation of the complex gain over a round of length T (Jakes) |
| h_t = ρ h_{t−1} + √(1−ρ²) w_t | :class:`GaussMarkovFading` | AR(1) complex gain per (client, subchannel), w_t ~ CN(0, 1) |
| P(on→off) = 1/T_on, P(off→on) = 1/T_off | :class:`OnOffAvailability` | a device's reachability, a two-state Markov chain per client |

Implementation details:
    1. The gain starts stationary (h_0 = w_0 ~ CN(0, 1)), so |h_t|² ~ Exp(1) at
       every round (unit-mean Rayleigh power, as the i.i.d. model) and ρ = 0 is
       exactly the i.i.d. model's distribution.
    2. On and off periods are geometric in rounds, with means T_on and T_off
       (≥ 1); the chain starts in its stationary law, P(on) = T_on/(T_on + T_off).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import j0

from rayfl.seeding import rng_for

__all__ = [
    "SPEED_OF_LIGHT",
    "GaussMarkovFading",
    "OnOffAvailability",
    "doppler_hz",
    "jakes_correlation",
]

SPEED_OF_LIGHT = 299_792_458.0  # m/s


def doppler_hz(speed_mps: float, carrier_hz: float) -> float:
    """Return the maximum Doppler shift f_D = v·f_c/c of a device moving at ``speed_mps``.

    Example:
        >>> round(doppler_hz(1.0, 2.4e9), 3)  # walking speed at 2.4 GHz
        8.006
    """
    if speed_mps < 0 or carrier_hz <= 0:
        raise ValueError(
            f"speed_mps must be >= 0 and carrier_hz > 0, got {speed_mps}, {carrier_hz}"
        )
    return speed_mps * carrier_hz / SPEED_OF_LIGHT


def jakes_correlation(doppler: float, interval_s: float) -> float:
    """Return ρ = J0(2π f_D T), the lag-``interval_s`` correlation of Jakes' fading.

    Example:
        >>> jakes_correlation(0.0, 1.0)
        1.0
    """
    if doppler < 0 or interval_s < 0:
        raise ValueError(
            f"doppler and interval_s must be >= 0, got {doppler}, {interval_s}"
        )
    return float(j0(2.0 * np.pi * doppler * interval_s))


def _check_clients(clients: Sequence[int]) -> npt.NDArray[np.int64]:
    ids = np.asarray(clients, dtype=np.int64)
    if ids.ndim != 1 or len(np.unique(ids)) != len(ids) or (ids < 0).any():
        raise ValueError("clients must be distinct non-negative ids")
    return ids


class GaussMarkovFading:
    """AR(1) complex gains of ``clients`` on K subchannels, one round at a time.

    Args:
        seed: The run's seed.
        clients: The client ids this object follows (any subset: each id's
            series is the same whoever else is in the set).
        num_subchannels: K.
        rho: The lag-1 correlation ρ in [−1, 1] (:func:`jakes_correlation`);
            0 is i.i.d. fading.

    Example:
        >>> fading = GaussMarkovFading(0, [0, 1, 2], 4, rho=0.9)
        >>> fading.power_gains(0).shape
        (3, 4)
    """

    def __init__(
        self, seed: int, clients: Sequence[int], num_subchannels: int, *, rho: float
    ) -> None:
        if not -1.0 <= rho <= 1.0 or not np.isfinite(rho):
            raise ValueError(f"rho must be in [-1, 1], got {rho}")
        if num_subchannels < 1:
            raise ValueError(f"num_subchannels must be >= 1, got {num_subchannels}")
        self.seed, self.rho = int(seed), float(rho)
        self.clients = _check_clients(clients)
        self.num_subchannels = int(num_subchannels)
        self.round = -1  # the last round drawn
        self.gain = np.zeros((len(self.clients), self.num_subchannels), complex)

    def _innovation(self, t: int) -> npt.NDArray[np.complex128]:
        """w_t ~ CN(0, 1) per (client, subchannel), keyed by (seed, t, client)."""
        out = np.empty_like(self.gain)
        for row, client in enumerate(self.clients.tolist()):
            draw = rng_for(self.seed, "fading_ar", round=t, client=client)
            re_im = draw.standard_normal((2, self.num_subchannels))
            out[row] = (re_im[0] + 1j * re_im[1]) / np.sqrt(2.0)
        return out

    def complex_gains(self, t: int) -> npt.NDArray[np.complex128]:
        """Return h_t, (N, K); rounds are drawn in order (0, 1, 2, ...)."""
        if t != self.round + 1:
            raise ValueError(f"round {t} asked after round {self.round}: draw in order")
        w = self._innovation(t)
        if t == 0:
            self.gain = w  # stationary start
        else:
            self.gain = self.rho * self.gain + np.sqrt(1.0 - self.rho**2) * w
        self.round = t
        return self.gain.copy()

    def power_gains(self, t: int) -> npt.NDArray[np.float64]:
        """Return |h_t|², (N, K): the unit-mean fading power of round t."""
        return np.abs(self.complex_gains(t)) ** 2

    def state_dict(self) -> dict[str, Any]:
        """Plain data: the last round drawn and its gains."""
        return {"round": self.round, "gain": self.gain.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.round = int(state["round"])
        self.gain = np.asarray(state["gain"], dtype=complex).copy()


class OnOffAvailability:
    """Each client's reachability: a two-state Markov chain over rounds.

    Args:
        seed: The run's seed.
        clients: The client ids (any subset: each id's chain is its own).
        mean_on: T_on, the mean number of rounds a device stays reachable (≥ 1).
        mean_off: T_off, the mean number of rounds it stays away (≥ 1).

    Example:
        >>> chain = OnOffAvailability(0, range(5), mean_on=10, mean_off=2)
        >>> chain.available(0).dtype
        dtype('bool')
    """

    def __init__(
        self, seed: int, clients: Sequence[int], *, mean_on: float, mean_off: float
    ) -> None:
        if not (mean_on >= 1 and mean_off >= 1):
            raise ValueError(
                f"mean_on and mean_off must be >= 1 round, got {mean_on}, {mean_off}"
            )
        self.seed = int(seed)
        self.clients = _check_clients(clients)
        self.mean_on, self.mean_off = float(mean_on), float(mean_off)
        self.round = -1
        self.on = np.zeros(len(self.clients), dtype=bool)

    def available(self, t: int) -> npt.NDArray[np.bool_]:
        """Return which clients are reachable in round t (rounds in order)."""
        if t != self.round + 1:
            raise ValueError(f"round {t} asked after round {self.round}: draw in order")
        u = np.array(
            [
                rng_for(self.seed, "availability", round=t, client=c).random()
                for c in self.clients.tolist()
            ]
        )
        if t == 0:
            self.on = u < self.mean_on / (self.mean_on + self.mean_off)
        else:
            leave = np.where(self.on, 1.0 / self.mean_on, 1.0 / self.mean_off)
            self.on = np.where(u < leave, ~self.on, self.on)
        self.round = t
        return self.on.copy()

    def state_dict(self) -> dict[str, Any]:
        """Plain data: the last round drawn and each client's state."""
        return {"round": self.round, "on": self.on.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.round = int(state["round"])
        self.on = np.asarray(state["on"], dtype=bool).copy()
