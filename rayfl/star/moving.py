"""The star's observation of a moving world (issue 48): reachability, channel age, compute.

With the papers' static world the star observes its eight core keys
(:data:`rayfl.observation.CORE_KEYS`). Each model of ``wireless`` that makes
the world move adds the keys that describe it (:func:`moving_keys`), so the
default observation and every existing policy's input stay as they were:

| model | keys added | meaning |
|---|---|---|
| ``availability`` not ``always`` | ``available``, ``channel_age`` | reachable this round; rounds since ``channel_gain`` was measured |
| ``cpu_frequency_distribution`` not ``constant``, or ``round_deadline_s`` | ``compute_time_s`` | local training time d^lo = τ·abs(D_n)·Φ/f_n |

With availability on, ``channel_gain`` row n is the gain the base station
last heard from client n (:class:`rayfl.wireless.world.LastSeen`): an
unreachable device sends no pilots. ``eligible`` is 0 for an unreachable
client, so a schedule naming it is repaired and the client reported, as a
client whose privacy budget is spent.

Correlated fading (``fading_dynamics: gauss_markov``), mobility
(``mobility``) and Gudmundson's shadowing (``shadowing_decorrelation_m``) add
no key: the channel's memory and each round's distances show in
``channel_gain`` over rounds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from rayfl.wireless.cost import computation_latency_s
from rayfl.wireless.world import LastSeen

if TYPE_CHECKING:
    from rayfl.uplink import UplinkModel

__all__ = ["compute_time_s", "moving_keys", "moving_observation", "seen_channel"]


def moving_keys(wireless: Any) -> tuple[str, ...]:
    """Return the moving-world keys the star observes under ``wireless`` (table).

    Example:
        >>> from rayfl.wireless.config import WirelessConfig
        >>> moving_keys(WirelessConfig())
        ()
        >>> moving_keys(WirelessConfig(round_deadline_s=1.0))
        ('compute_time_s',)
    """
    if wireless is None:
        return ()
    keys: tuple[str, ...] = ()
    if wireless.availability != "always":
        keys += ("available", "channel_age")
    if (
        wireless.cpu_frequency_distribution != "constant"
        or wireless.round_deadline_s is not None
    ):
        keys += ("compute_time_s",)
    return keys


def seen_channel(
    uplink: UplinkModel, t: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Return the last-seen uplink gains (N, K) in dB and their ages (N,) in rounds.

    Round ``t``'s gains and zero ages when every client is always reachable.
    """
    state = uplink.channel_state(t)
    if state is None or uplink.world is None or uplink.channel is None:
        raise ValueError("the channel is seen only with a wireless section")
    if uplink.world.availability is None:
        return np.asarray(state.gain_db), np.zeros(uplink.num_clients)
    if uplink.last_seen is None:
        large = uplink.channel.large_scale_gain_linear[:, None]
        uplink.last_seen = LastSeen(
            np.broadcast_to(10.0 * np.log10(large), state.gain_db.shape)
        )

    def gain_db(r: int) -> npt.NDArray[np.float64]:
        past = uplink.channel_state(r)
        assert past is not None  # a wireless section: every round has a state
        return np.asarray(past.gain_db)

    seen = uplink.last_seen.at(t, gain_db, uplink.available)
    uplink.channel_state(t)  # keep round t's state cached for its link
    return seen


def compute_time_s(uplink: UplinkModel) -> npt.NDArray[np.float64]:
    """Return every client's local training time d^lo = τ·abs(D_i)·Φ/f_i (N,), in s."""
    wireless = uplink.sections.wireless
    if wireless is None:
        return np.zeros(uplink.num_clients)
    everyone = np.arange(uplink.num_clients)
    frequency = uplink.cpu_frequency_hz(everyone)
    return computation_latency_s(
        num_samples=uplink.num_samples(everyone),
        cpu_cycles_per_sample=wireless.cpu_cycles_per_sample,
        cpu_frequency_hz=wireless.cpu_frequency_hz if frequency is None else frequency,
    )


def moving_observation(uplink: UplinkModel, t: int) -> dict[str, Any]:
    """Return round ``t``'s moving-world keys, and ``channel_gain`` when it is remembered."""
    keys = moving_keys(uplink.sections.wireless)
    out: dict[str, Any] = {}
    if "available" in keys:
        gain_db, age = seen_channel(uplink, t)
        out["channel_gain"] = gain_db.astype(np.float32)
        out["available"] = uplink.available(t).astype(np.float32)
        out["channel_age"] = age.astype(np.float32)
    if "compute_time_s" in keys:
        out["compute_time_s"] = compute_time_s(uplink).astype(np.float32)
    return out
