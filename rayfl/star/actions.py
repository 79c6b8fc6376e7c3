"""The star's action → :class:`rayfl.schedule.Schedule` (the scheduling env's rules).

An action is ``MultiDiscrete([N + 1] * K)`` — entry k is the client on
subchannel k, or N for idle — or a dict with that array under ``assignment``
and optional ``power`` (level l of L means P_max·(l+1)/L; missing: maximum)
and ``controls`` (N × C per-client knobs; missing: the algorithm's configured
values). A client named on several subchannels keeps the lowest-indexed one; a
client that is not eligible is ignored (and reported). A client set
(``MultiBinary(N)``) has its own rules, :class:`StarParticipants`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from rayfl.observation import CORE_KEYS, observation_space
from rayfl.schedule import Schedule
from rayfl.star.moving import moving_keys
from rayfl.wireless.config import WirelessConfig
from rayfl.wireless.units import power_levels_w

__all__ = ["StarActions", "StarParticipants"]


@dataclass(frozen=True)
class StarActions:
    """Turns star actions into schedules.

    Attributes:
        num_clients: N.
        num_subchannels: K.
        power_w: The L transmit power levels in W, ascending.
        control_names: The algorithm's per-client controls exposed to the policy.
        default_controls: Their configured values, (N, C).
    """

    num_clients: int
    num_subchannels: int
    power_w: npt.NDArray[np.float64]
    control_names: tuple[str, ...] = ()
    default_controls: npt.NDArray[np.float32] | None = None
    control_ranges: tuple[tuple[float, float], ...] = ()
    moving_keys: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, cfg: Any, *, controls: bool = False) -> StarActions:
        """Return the rules of ``cfg``'s star (``wireless`` or its defaults).

        With ``controls``, the algorithm's declared per-client controls are part
        of the action, defaulting to their configured values.
        """
        wireless = cfg.wireless or WirelessConfig()
        n = cfg.data.num_clients
        declared: dict[str, tuple[float, float]] = {}
        if controls:
            from rayfl.algorithms.registry import algorithm_controls

            declared = algorithm_controls(cfg.algorithm)
        configured = [getattr(cfg.algorithm, name) for name in declared]
        return cls(
            num_clients=n,
            num_subchannels=wireless.num_subchannels,
            power_w=power_levels_w(
                tx_power_dbm=wireless.tx_power_dbm, power_levels=wireless.power_levels
            ),
            control_names=tuple(declared),
            default_controls=np.tile(np.array(configured, np.float32), (n, 1)),
            control_ranges=tuple(declared.values()),
            moving_keys=moving_keys(cfg.wireless),
        )

    def spaces(self) -> tuple[spaces.Dict, spaces.Space[Any]]:
        """The star's observation space and action space (see the module docstring)."""
        n, k = self.num_clients, self.num_subchannels
        assignment = spaces.MultiDiscrete(np.full(k, n + 1, dtype=np.int64))
        parts: dict[str, spaces.Space[Any]] = {}
        if len(self.power_w) > 1:
            levels = np.full(k, len(self.power_w), dtype=np.int64)
            parts["power"] = spaces.MultiDiscrete(levels)
        if self.control_names:
            low, high = np.array(self.control_ranges, np.float32).T
            parts["controls"] = spaces.Box(
                np.tile(low, (n, 1)), np.tile(high, (n, 1)), dtype=np.float32
            )
        action = (
            spaces.Dict({"assignment": assignment, **parts}) if parts else assignment
        )
        # the keys are the star plug-in's observation_keys, and a moving
        # world's (rayfl.star.moving)
        return observation_space(CORE_KEYS + self.moving_keys, n, k), action

    def to_schedule(
        self, action: Any, eligible: npt.NDArray[np.bool_]
    ) -> tuple[Schedule, list[int]]:
        """Return the schedule of ``action`` and the ineligible clients it named.

        Raises:
            ValueError: For a malformed assignment, power or controls entry.
        """
        if isinstance(action, Mapping):
            assignment = np.asarray(action["assignment"])
            power, controls = action.get("power"), action.get("controls")
        else:
            assignment, power, controls = np.asarray(action), None, None
        assignment = self._check_assignment(assignment.reshape(-1), action)
        levels = self._levels(power)
        clients, subchannels, power_w, ignored = [], [], [], []
        seen: set[int] = set()
        for s, c in enumerate(assignment.tolist()):
            if c == self.num_clients or c in seen:
                continue
            seen.add(c)
            if not eligible[c]:
                ignored.append(c)
                continue
            clients.append(c)
            subchannels.append(s)
            power_w.append(self.power_w[levels[s]])
        ctrl, all_ctrl = self._controls(controls, clients)
        schedule = Schedule(
            np.asarray(clients, dtype=np.int64),
            subchannel=np.asarray(subchannels, dtype=np.int64),
            tx_power_w=np.asarray(power_w, dtype=np.float64),
            controls=ctrl,
            all_controls=all_ctrl,
        )
        return schedule, ignored

    def _check_assignment(self, assignment: np.ndarray, action: Any) -> np.ndarray:
        n, k = self.num_clients, self.num_subchannels
        if assignment.shape != (k,) or not np.issubdtype(assignment.dtype, np.integer):
            raise ValueError(
                f"assignment must be {k} integers (one per subchannel), got {action!r}"
            )
        bad = np.flatnonzero((assignment < 0) | (assignment > n))
        if bad.size:
            s = int(bad[0])
            raise ValueError(
                f"subchannel {s}: client {int(assignment[s])} is not in 0..{n} "
                f"({n} = idle)"
            )
        return assignment

    def _levels(self, power: Any) -> npt.NDArray[np.int64]:
        k, top = self.num_subchannels, len(self.power_w) - 1
        levels = (
            np.full(k, top)
            if power is None
            else np.asarray(power, dtype=np.int64).reshape(-1)
        )
        if levels.shape != (k,) or np.any((levels < 0) | (levels > top)):
            raise ValueError(f"power must be {k} levels in 0..{top}, got {power!r}")
        return levels

    def _controls(
        self, controls: Any, clients: list[int]
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The scheduled clients' controls and every client's (empty without any)."""
        if not self.control_names or self.default_controls is None:
            return {}, {}
        table = self.default_controls if controls is None else np.asarray(controls)
        if table.shape != self.default_controls.shape:
            raise ValueError(
                f"controls must have shape {self.default_controls.shape} "
                f"(clients × {', '.join(self.control_names)}), got {table.shape}"
            )
        idx = np.asarray(clients, dtype=np.int64)
        names = enumerate(self.control_names)
        ctrl = {name: table[idx, j].astype(np.float64) for j, name in names}
        all_ctrl = {
            name: table[:, j].astype(np.float64)
            for j, name in enumerate(self.control_names)
        }
        return ctrl, all_ctrl


@dataclass(frozen=True)
class StarParticipants:
    """The star's client-set decision: its spaces, observation and schedule.

    The policy names the clients that take part: on ideal links that is the
    schedule; with a channel model the i-th participant by id gets subchannel i
    at the maximum power.

    Attributes:
        num_clients: N.
        num_subchannels: K, or 0 on ideal links (no channel model).
    """

    num_clients: int
    num_subchannels: int = 0

    def spaces(self) -> tuple[spaces.Dict, spaces.MultiBinary]:
        """The observation space (eligibility, round, gains with K) and ``MultiBinary(N)``."""
        keys = ["eligible", "round"]
        if self.num_subchannels:
            keys.append("channel_gain")
        n, k = self.num_clients, max(self.num_subchannels, 1)
        return observation_space(keys, n, k), spaces.MultiBinary(n)

    def observe(self, system: Any, t: int) -> dict[str, npt.NDArray[np.float32]]:
        """Round ``t``'s observation of ``system`` (no evaluation; the round's own gains)."""
        obs = {
            "eligible": system.uplink.eligible(t).astype(np.float32),
            "round": np.array([t], dtype=np.float32),
        }
        if self.num_subchannels:
            gain = system.uplink.channel_state(t).gain_db
            obs["channel_gain"] = np.asarray(gain, dtype=np.float32)
        return obs

    def to_schedule(
        self, action: Any, eligible: npt.NDArray[np.bool_]
    ) -> tuple[Schedule, list[int]]:
        """Return the schedule of the client set ``action`` and the clients it ignores.

        Ignored: ineligible clients, then (with K subchannels) the chosen clients
        past the K-th by id, which get no subchannel.

        Raises:
            ValueError: Unless ``action`` is N zeros and ones.
        """
        flags = np.asarray(action).reshape(-1)
        if flags.shape != (self.num_clients,) or not np.isin(flags, (0, 1)).all():
            raise ValueError(
                f"participants must be {self.num_clients} zeros or ones, got {action!r}"
            )
        chosen = np.flatnonzero(flags)
        ignored = [int(c) for c in chosen if not eligible[c]]
        chosen = chosen[eligible[chosen]]
        if not self.num_subchannels:
            return Schedule.of(chosen), ignored
        ignored += chosen[self.num_subchannels :].tolist()
        chosen = chosen[: self.num_subchannels]
        return Schedule(chosen, subchannel=np.arange(len(chosen))), ignored
