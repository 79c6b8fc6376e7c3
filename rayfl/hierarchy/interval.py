"""The interval schedule: what one global round hands to the next.

τ_k, m_k and s_c^k (set by the controller between rounds), the local-period
counter that keys noise and fading, β̂, the controller's cost normalisers and
each device's local update count. A checkpoint stores it as the ``schedule``
block (plain data).

Symbol table: τ_k → ``tau``, m_k → ``period``, K_ℓ → ``num_local``, s_c^k →
``participants``, β̂ → ``beta_hat``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rayfl.hierarchy.config import TopologyConfig
from rayfl.hierarchy.submit import segments

__all__ = ["Interval"]


@dataclass
class Interval:
    """The schedule of the next global interval and the counters so far.

    Attributes:
        tau: τ_k, SGD steps of the interval.
        period: m_k, steps between local aggregations.
        num_local: K_ℓ, local releases per interval (``local_at_global`` included).
        participants: s_c^k per edge, int64 (C,).
        local_update_count: Local segments each device trained, int64 (I,).
        steps_done: SGD steps run so far.
        period_index: Local periods run so far (keys noise and fading).
        beta_hat: β̂, the smoothness estimate (NaN until measured).
        control_refs: The controller's cost normalisers, set at k = 0.
    """

    tau: int
    period: int
    num_local: int
    participants: np.ndarray
    local_update_count: np.ndarray
    steps_done: int = 0
    period_index: int = 0
    beta_hat: float = float("nan")
    control_refs: Any = None

    @classmethod
    def start(
        cls, topo: TopologyConfig, *, sizes: np.ndarray, num_clients: int
    ) -> Interval:
        """Return the schedule of interval 0: τ_0, m_0 and full subnets."""
        tau = topo.tau
        period = topo.tau if topo.baseline == "pedpfl" else topo.local_period
        return cls(
            tau=tau,
            period=period,
            num_local=len(segments(tau, period)) - 1 + int(topo.local_at_global),
            participants=np.asarray(sizes, dtype=np.int64).copy(),
            local_update_count=np.zeros(num_clients, dtype=np.int64),
        )

    def state_dict(self) -> dict[str, Any]:
        """Return the ``schedule`` block of a checkpoint."""
        return {
            "tau": self.tau,
            "period": self.period,
            "participants": self.participants.tolist(),
            "steps_done": self.steps_done,
            "period_index": self.period_index,
            "beta_hat": self.beta_hat,
            "control_refs": self.control_refs,
            "local_update_count": self.local_update_count.tolist(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (``num_local`` comes from the config)."""
        self.tau, self.period = int(state["tau"]), int(state["period"])
        self.participants = np.asarray(state["participants"], dtype=np.int64)
        self.steps_done = int(state["steps_done"])
        self.period_index = int(state["period_index"])
        self.beta_hat = float(state["beta_hat"])
        self.control_refs = state["control_refs"]
        self.local_update_count = np.asarray(
            state["local_update_count"], dtype=np.int64
        )
