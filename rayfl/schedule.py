"""The schedule of one round: which clients upload, on which subchannel, at what power.

A :class:`Schedule` is what a scheduling policy's action becomes (the env turns
actions into schedules) and what :meth:`rayfl.engine.Engine.run_round` takes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = ["Schedule"]


@dataclass(frozen=True)
class Schedule:
    """One round's scheduling decision.

    Attributes:
        clients: Scheduled client ids, int64 (m,), distinct.
        subchannel: Subchannel of each scheduled client (m,), -1 = none (ideal link).
        tx_power_w: Transmit power of each (m,) in W; NaN = the configured maximum.
        controls: Per-client knobs, name → float array (m,) (e.g. ``lr``).
        all_controls: The same knobs for every client, name → float array (N,),
            read by algorithms that also update unscheduled clients.
    """

    clients: npt.NDArray[np.int64]
    subchannel: npt.NDArray[np.int64] = field(
        default_factory=lambda: np.zeros(0, np.int64)
    )
    tx_power_w: npt.NDArray[np.float64] = field(
        default_factory=lambda: np.zeros(0, np.float64)
    )
    controls: dict[str, npt.NDArray[np.float64]] = field(default_factory=dict)
    all_controls: dict[str, npt.NDArray[np.float64]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        clients = np.asarray(self.clients, dtype=np.int64).reshape(-1)
        m = len(clients)
        if len(np.unique(clients)) != m:
            raise ValueError(f"a client is scheduled twice: {clients.tolist()}")
        sub = np.asarray(self.subchannel, dtype=np.int64).reshape(-1)
        power = np.asarray(self.tx_power_w, dtype=np.float64).reshape(-1)
        object.__setattr__(self, "clients", clients)
        object.__setattr__(self, "subchannel", sub if len(sub) else np.full(m, -1))
        object.__setattr__(
            self, "tx_power_w", power if len(power) else np.full(m, np.nan)
        )
        for name, values in self.controls.items():
            if len(np.asarray(values).reshape(-1)) != m:
                raise ValueError(
                    f"control {name!r} needs one value per scheduled client"
                )
        if len(self.subchannel) != m or len(self.tx_power_w) != m:
            raise ValueError(
                "subchannel and tx_power_w need one entry per scheduled client"
            )

    @classmethod
    def of(cls, clients: npt.ArrayLike) -> Schedule:
        """Return a schedule of ``clients`` on ideal links, sorted by id."""
        return cls(np.sort(np.asarray(clients, dtype=np.int64)))
