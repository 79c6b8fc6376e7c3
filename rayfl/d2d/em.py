"""π of a pFedWN target over its selected neighbors, and how it changes.

:class:`EMState` holds one target's mixture weights π (as log π), the trajectory
of π and of the mean log-likelihood, and whether π is frozen (``em_mode:
two_phase`` once the stopping rule fired or after ``em_max_rounds``). The E/M
steps themselves run in the target's actor (``D2DClientHost.em_update``, eqs.
9–10 of pFedWN); :meth:`EMState.apply` folds their result back into π.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.algorithms.pfedwn import stop_reached
from rayfl.d2d.config import D2DTopologyConfig

__all__ = ["EMState"]


class EMState:
    """π of one target over its selected neighbors, and its trajectory.

    Attributes:
        log_pi: log π over the selected neighbors (uniform at the start).
        frozen: True once π no longer changes (``two_phase``; always with ≤ 1
            neighbor).
        loglik: Mean log-likelihood of each E/M update.
        history: π after each update (the first entry: the initial π).
        converged_round: The round the stopping rule fired (None: not yet, or
            frozen by ``em_max_rounds``).
    """

    def __init__(self, neighbors: tuple[int, ...]) -> None:
        m = len(neighbors)
        self.log_pi = np.full(m, -math.log(m)) if m else np.zeros(0)
        self.frozen = m <= 1
        self.loglik: list[float] = []
        self.history: list[list[float]] = [np.exp(self.log_pi).tolist()]
        self.converged_round: int | None = None

    def apply(
        self,
        idx: list[int],
        new_sub: npt.NDArray[np.float64],
        loglik: float,
        *,
        round: int,
        topology: D2DTopologyConfig,
    ) -> None:
        """Fold an E/M result over the neighbors ``idx`` into π.

        The updated entries keep their total mass (the others are the neighbors
        whose model did not arrive); with ``two_phase`` π freezes once the
        stopping rule fires or after ``em_max_rounds`` rounds.

        Args:
            idx: Positions (in the selection) of the neighbors the E/M steps used.
            new_sub: Their new log π, normalised over ``idx``.
            loglik: The mean log-likelihood the E/M steps report.
            round: Round index t.
            topology: The D2D section (``em_mode``, ``em_stop``, ``em_tol``,
                ``em_max_rounds``).
        """
        old = np.exp(self.log_pi)
        mass = old[idx].sum()
        new = old.copy()
        new[idx] = mass * np.exp(new_sub)
        previous = self.loglik[-1] if self.loglik else None
        self.loglik.append(loglik)
        self.log_pi = np.log(np.maximum(new, 1e-300))
        self.history.append(new.tolist())
        if topology.em_mode == "two_phase" and not self.frozen:
            done = stop_reached(
                topology.em_stop,
                old=old,
                new=new,
                loglik_old=previous,
                loglik_new=loglik,
                tol=topology.em_tol,
            )
            if done or round + 1 >= topology.em_max_rounds:
                self.frozen = True
                self.converged_round = round if done else None

    def reselect(self, old: tuple[int, ...], new: tuple[int, ...]) -> EMState:
        """Return the state for a new selection ``new`` (was ``old``).

        Neighbors that stay keep their π, each new one gets 1/abs(new), π is
        renormalised, and EM restarts (unfrozen unless ≤ 1 neighbor); the
        trajectory continues.
        """
        pi_old = dict(zip(old, np.exp(self.log_pi).tolist(), strict=True))
        fresh = EMState(new)
        if new:
            pi = np.array([pi_old.get(m, 1.0 / len(new)) for m in new])
            fresh.log_pi = np.log(np.maximum(pi / pi.sum(), 1e-300))
        fresh.history = self.history + [np.exp(fresh.log_pi).tolist()]
        fresh.loglik = self.loglik
        return fresh

    def state_dict(self) -> dict[str, Any]:
        """Return the state as plain data (``rayfl.rundir.checkpoint``)."""
        return {
            "log_pi": np.array(self.log_pi, dtype=np.float64),
            "frozen": bool(self.frozen),
            "loglik": list(self.loglik),
            "history": [list(h) for h in self.history],
            "converged_round": self.converged_round,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> EMState:
        """Rebuild an :class:`EMState` from :meth:`state_dict`."""
        out = cls(())
        out.log_pi = np.asarray(state["log_pi"], dtype=np.float64)
        out.frozen = bool(state["frozen"])
        out.loglik = [float(v) for v in state["loglik"]]
        out.history = [list(h) for h in state["history"]]
        cr = state["converged_round"]
        out.converged_round = None if cr is None else int(cr)
        return out
