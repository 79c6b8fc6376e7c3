"""Every lane's observer ledgers as columns: one release-history state per cell.

:class:`rayfl.hierarchy.dp.ObserverLedger` keeps, per observer (edge, cloud,
peers), a :class:`rayfl.privacy.accountant.PrivacyLedger` of every device's
releases; its ε is a function of the history's *signature* only (the total
count per (z, q), sorted: composition commutes). The lanes record the same
releases (q = 1, one step each), so a device's history under one observer is
fully described by its signature. :class:`LedgerColumns` numbers the
signatures met by any lane (:class:`SignatureTable`, state 0 = no release)
and keeps one state per (lane, observer, device) in an int array; a release
moves a cell to the state of its signature plus that z, and ε per device is
a table look-up, max over observers, for every lane at once.

Each lane's ε equals ``ObserverLedger.epsilons()`` of the same releases: the
same signatures, each ε computed once by a ``PrivacyLedger`` that holds the
signature's releases (tests/envs/test_hierarchy_lanes.py compares the lanes'
``privacy_spent`` with the env run alone).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from rayfl.hierarchy.dp import OBSERVERS
from rayfl.privacy.accountant import PrivacyLedger

__all__ = ["LaneLedger", "LedgerColumns", "SignatureTable"]

#: A release history's signature: sorted (z, q, total steps) entries.
Signature = tuple[tuple[float, float, int], ...]


class SignatureTable:
    """The release-history signatures met so far, numbered; ε of each at δ.

    Args:
        delta: δ at which ε is reported.
    """

    def __init__(self, delta: float) -> None:
        self.delta = float(delta)
        self.signatures: list[Signature] = [()]
        self._index: dict[Signature, int] = {(): 0}
        self._next: dict[tuple[int, float], int] = {}
        self._epsilon = np.array([0.0])
        self._known = np.array([True])

    def after(self, state: int, noise_multiplier: float) -> int:
        """Return the state of ``state``'s history plus one release at z (q = 1)."""
        move = (state, noise_multiplier)
        found = self._next.get(move)
        if found is not None:
            return found
        totals = {z: n for z, _, n in self.signatures[state]}
        totals[noise_multiplier] = totals.get(noise_multiplier, 0) + 1
        signature = tuple(sorted((z, 1.0, n) for z, n in totals.items()))
        new = self._index.get(signature)
        if new is None:
            new = self._index[signature] = len(self.signatures)
            self.signatures.append(signature)
        self._next[move] = new
        return new

    def epsilon(self, states: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Return ε at δ of each state (any shape), computing new ones once."""
        count = len(self.signatures)
        if len(self._epsilon) < count:
            grow = count - len(self._epsilon)
            self._epsilon = np.concatenate([self._epsilon, np.full(grow, np.nan)])
            self._known = np.concatenate([self._known, np.zeros(grow, dtype=bool)])
        for state in np.unique(states[~self._known[states]]).tolist():
            self._epsilon[state] = self._compute(self.signatures[state])
            self._known[state] = True
        return self._epsilon[states]

    def _compute(self, signature: Signature) -> float:
        """ε of one signature: a one-device ``PrivacyLedger`` with its releases."""
        ledger = PrivacyLedger(1)
        for z, q, n in signature:
            for _ in range(n):
                ledger.record([0], noise_multiplier=z, sample_rate=q)
        return float(ledger.epsilon(self.delta)[0])


class LedgerColumns:
    """Every lane's observer ledgers: states (lanes, observers, devices).

    Args:
        num_lanes: E.
        num_clients: I.
        delta: δ at which ε is reported.
    """

    def __init__(self, num_lanes: int, num_clients: int, *, delta: float) -> None:
        self.table = SignatureTable(delta)
        self.states = np.zeros((num_lanes, len(OBSERVERS), num_clients), np.int64)

    def lane(self, lane: int) -> LaneLedger:
        """Return a fresh (empty) ledger of ``lane`` (its states cleared)."""
        self.states[lane] = 0
        return LaneLedger(self, lane)

    def epsilons(self, lanes: list[int]) -> npt.NDArray[np.float64]:
        """Return the worst-observer ε per device of ``lanes``, (len(lanes), I)."""
        return self.table.epsilon(self.states[lanes]).max(axis=1)


class LaneLedger:
    """One lane's view of :class:`LedgerColumns`, as ``ObserverLedger`` is used.

    ``record`` charges a release to the observers who see it (detail 3 of
    :mod:`rayfl.hierarchy.dp`); ``epsilons`` returns (worst-observer ε per
    device, nominal ε per device) as ``ObserverLedger.epsilons``.
    """

    _observers_untrusted = tuple(range(len(OBSERVERS)))
    _observers_trusted = tuple(
        o for o, name in enumerate(OBSERVERS) if name in ("cloud", "peers")
    )

    def __init__(self, columns: LedgerColumns, lane: int) -> None:
        self.columns, self.lane = columns, lane
        self.num_clients = columns.states.shape[2]
        self.nominal_epsilon = math.nan

    def record(
        self, clients: list[int], *, trusted: bool, noise_multiplier: float
    ) -> None:
        """Charge one release of ``clients`` (q = 1) at z to its observers."""
        if not clients:
            return
        z = float(noise_multiplier)
        after = self.columns.table.after
        states = self.columns.states[self.lane]
        observers = self._observers_trusted if trusted else self._observers_untrusted
        for o in observers:
            row = states[o]
            for i in clients:
                row[i] = after(int(row[i]), z)

    def epsilons(
        self,
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Return (worst-observer ε per device, nominal ε per device)."""
        eps = self.columns.epsilons([self.lane])[0]
        return eps, np.full(self.num_clients, self.nominal_epsilon)
