"""Per-client privacy ledger: records Gaussian releases, asks dp-accounting for ε.

The ledger stores a run-length list of each client's releases (noise multiplier
z, sampling rate q, steps per release, count) and delegates every formula to
dp-accounting's ``RdpAccountant`` or ``PLDAccountant`` (STYLE rule 6). One
release is one upload; a release of τ DP-SGD steps (seed 002) passes ``steps=τ``.
The z, q and adjacency of each mechanism come from ``rayfl.privacy.sensitivity``
(one rule for every ledger): whole-update releases are recorded at z = σ/(2C)
and q = 1 — no record is sampled inside them, and a schedule's choice of clients
is no sample of records.

Symbol table:

| paper symbol | code name | meaning |
|---|---|---|
| z, σ̂ (seed 002) | ``noise_multiplier`` | noise std / L2 sensitivity |
| q, q_i | ``sample_rate`` | Poisson sampling rate of one step |
| τ (seed 002) | ``steps`` | compositions inside one release |
| Υ_n (seed 000), t̄_i (seed 002) | ``upload_count`` | releases so far |
| T0, ε_i | ``max_uploads``, ``epsilon_budget`` | per-client caps |
| ε̂_i (seed 002 eq. 6) | ``epsilon(delta)`` | accountant's ε |

Implementation details:

1. Accounting is per client, w.r.t. that client's data. dp-accounting's
   Gaussian event is the mechanism of sensitivity 1 after scaling by Δ, so the
   adjacency is the one under which the caller's Δ holds
   (``rayfl.privacy.sensitivity``): any two datasets of the client for a whole
   clipped update (Δ = 2C), add/remove one record for Poisson DP-SGD (Δ = C).
2. ε is cached by the history signature: clients with identical histories cost
   one dp-accounting call.
3. The seed 002 quit rule (Algorithm 1) is prospective: ``eligible`` with
   ``next_noise_multiplier`` checks ε after one more such release; without it,
   ε(now) ≤ budget is checked. The cap is Υ_n < T0 (seed 000 [AMBIG-8]).
4. Every recorded release of a client is composed: recording both the local and
   the global stream of a device under an untrusted edge (seed 004 A5) reports
   the honest ≈2ε that the per-stream calibration hides.
5. The paper's nominal ε (reported next to the accountant's) is
   ``rayfl.privacy.calibration.nominal_epsilon(ledger.upload_count, ...)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import dp_accounting

# dp_accounting (and the scipy it pulls) is imported inside the functions that use
# it: every actor imports this module, and only the driver accounts.

AccountantName = Literal["rdp", "pld"]


def release_event(
    *, noise_multiplier: float, sample_rate: float, count: int
) -> dp_accounting.DpEvent:
    """Return the event of ``count`` Poisson-sampled Gaussian steps.

    Args:
        noise_multiplier: z ≥ 0 (std / L2 sensitivity).
        sample_rate: q in (0, 1]; 1 = no subsampling (no Poisson wrapper).
        count: Number of self-composed steps (≥ 1).

    Returns:
        ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(z)), count)``.

    Example:
        >>> release_event(noise_multiplier=1.0, sample_rate=1.0, count=2).count
        2
    """
    import dp_accounting

    event: dp_accounting.DpEvent = dp_accounting.GaussianDpEvent(noise_multiplier)
    if sample_rate < 1.0:
        event = dp_accounting.PoissonSampledDpEvent(sample_rate, event)
    return dp_accounting.SelfComposedDpEvent(event, count)


#: The accountant names (:func:`make_accountant`).
ACCOUNTANTS: tuple[AccountantName, ...] = ("rdp", "pld")


def make_accountant(accountant: AccountantName) -> dp_accounting.PrivacyAccountant:
    """Return an empty ``RdpAccountant`` ("rdp") or ``PLDAccountant`` ("pld").

    Raises:
        ValueError: If the name is unknown.
    """
    _check_name(accountant)
    from dp_accounting import pld, rdp

    return rdp.RdpAccountant() if accountant == "rdp" else pld.PLDAccountant()


def _check_name(accountant: str) -> None:
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be 'rdp' or 'pld', got {accountant!r}")


def _history_epsilon(
    signature: tuple[tuple[float, float, int], ...],
    *,
    delta: float,
    accountant: AccountantName,
) -> float:
    """ε of (z, q, total steps) entries: 0 if empty, ∞ if some z = 0."""
    if not signature:
        return 0.0
    if any(z == 0.0 for z, _, _ in signature):
        return float("inf")
    import dp_accounting

    ledger = make_accountant(accountant)
    ledger.compose(
        dp_accounting.ComposedDpEvent(
            [
                release_event(noise_multiplier=z, sample_rate=q, count=n)
                for z, q, n in signature
            ]
        )
    )
    return float(ledger.get_epsilon(delta))


class PrivacyLedger:
    """Per-client record of Gaussian releases; ε comes from dp-accounting.

    Args:
        num_clients: N, number of clients (ids 0..N−1).
        accountant: "rdp" or "pld" backend.

    Example:
        >>> ledger = PrivacyLedger(3)
        >>> ledger.record([0, 2], noise_multiplier=1.0, sample_rate=1.0)
        >>> ledger.upload_count.tolist()
        [1, 0, 1]
    """

    def __init__(self, num_clients: int, *, accountant: AccountantName = "rdp"):
        if num_clients < 1:
            raise ValueError(f"num_clients must be >= 1, got {num_clients}")
        # the name only: dp-accounting itself (and scipy.signal) is imported when
        # ε is first asked for, not in every run's set-up
        _check_name(accountant)
        self.num_clients = int(num_clients)
        self.accountant: AccountantName = accountant
        self._histories: list[list[list[float]]] = [[] for _ in range(num_clients)]
        self._uploads = np.zeros(num_clients, dtype=np.int64)
        self._cache: dict[tuple[object, ...], float] = {}

    @property
    def upload_count(self) -> npt.NDArray[np.int64]:
        """Releases recorded per client, shape (N,), int64 (a copy)."""
        return self._uploads.copy()

    def record(
        self,
        clients: npt.ArrayLike,
        *,
        noise_multiplier: float | npt.NDArray[np.float64],
        sample_rate: float,
        steps: int = 1,
    ) -> None:
        """Append one release to each listed client's history.

        Args:
            clients: Client ids, shape (k,), int in [0, N); duplicates count twice.
            noise_multiplier: z ≥ 0 of the release (0 = no noise, ε = ∞): one
                value for every listed client, or one per client, shape (k,)
                (DP-Ditto's per-client σ_n).
            sample_rate: q in (0, 1]; 1 unless records are Poisson-sampled
                inside the release (``rayfl.privacy.sensitivity``).
            steps: Sampled-Gaussian steps composed inside the release (≥ 1).

        Raises:
            ValueError: If an id or a parameter is out of range.
        """
        ids = np.asarray(clients, dtype=np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_clients):
            raise ValueError(f"client ids must be in [0, {self.num_clients})")
        zs = np.broadcast_to(np.asarray(noise_multiplier, dtype=np.float64), ids.shape)
        if not (bool(np.all(zs >= 0)) and 0 < sample_rate <= 1 and steps >= 1):
            raise ValueError(
                "record needs noise_multiplier >= 0, sample_rate in (0, 1] and "
                f"steps >= 1, got {noise_multiplier}, {sample_rate}, {steps}"
            )
        for client, z in zip(ids.tolist(), zs.tolist(), strict=True):
            release = [float(z), float(sample_rate), float(steps)]
            history = self._histories[client]
            if history and history[-1][:3] == release:
                history[-1][3] += 1
            else:
                history.append([*release, 1.0])
        np.add.at(self._uploads, ids, 1)

    def epsilon(
        self, delta: float, *, next_release: tuple[Any, float, int] | None = None
    ) -> npt.NDArray[np.float64]:
        """Return each client's ε at ``delta`` from its recorded releases.

        Args:
            delta: Target δ in (0, 1).
            next_release: Optional (z, q, steps) appended hypothetically to every
                history (the seed 002 quit rule looks one release ahead); z may
                be an array of shape (N,), one per client.

        Returns:
            ε per client, shape (N,), float64; 0 for an empty history, ∞ if a
            release had z = 0.
        """
        if not 0 < delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        result = np.empty(self.num_clients, dtype=np.float64)
        next_z = (
            None
            if next_release is None
            else np.broadcast_to(
                np.asarray(next_release[0], dtype=np.float64), (self.num_clients,)
            )
        )
        for client, history in enumerate(self._histories):
            # Composition is commutative: total steps per (z, q) is the signature.
            totals: dict[tuple[float, float], int] = {}
            entries = [(z, q, int(s * n)) for z, q, s, n in history]
            if next_release is not None and next_z is not None:
                _, next_q, next_steps = next_release
                entries.append((float(next_z[client]), next_q, int(next_steps)))
            for z, q, n in entries:
                totals[(z, q)] = totals.get((z, q), 0) + int(n)
            signature = tuple(sorted((z, q, n) for (z, q), n in totals.items()))
            key = (signature, float(delta), self.accountant)
            if key not in self._cache:
                self._cache[key] = _history_epsilon(
                    signature, delta=delta, accountant=self.accountant
                )
            result[client] = self._cache[key]
        return result

    def eligible(
        self,
        max_uploads: int | None = None,
        epsilon_budget: float | npt.ArrayLike | None = None,
        delta: float | None = None,
        *,
        next_noise_multiplier: float | npt.ArrayLike | None = None,
        next_sample_rate: float = 1.0,
        next_steps: int = 1,
    ) -> npt.NDArray[np.bool_]:
        """Return which clients may still upload.

        Args:
            max_uploads: T0; eligible while Υ_n < T0 (seed 000 C7). None = no cap.
            epsilon_budget: ε budget, scalar or shape (N,). None = no budget.
            delta: δ of the budget check; required with ``epsilon_budget``.
            next_noise_multiplier: If given, the check is prospective (seed 002
                quit rule): ε after one more (z, q, steps) release ≤ budget; a
                scalar or one z per client, shape (N,).
            next_sample_rate: q of that next release.
            next_steps: Steps of that next release.

        Returns:
            Boolean mask, shape (N,).

        Raises:
            ValueError: If a budget is given without ``delta``.
        """
        allowed = np.ones(self.num_clients, dtype=bool)
        if max_uploads is not None:
            allowed &= self._uploads < max_uploads
        if epsilon_budget is not None:
            if delta is None:
                raise ValueError("eligible needs delta when epsilon_budget is given")
            extra: Any = None
            if next_noise_multiplier is not None:
                z_next = np.asarray(next_noise_multiplier, dtype=np.float64)
                extra = (
                    float(z_next) if z_next.ndim == 0 else z_next,
                    float(next_sample_rate),
                    next_steps,
                )
            spent = self.epsilon(delta, next_release=extra)
            budget = np.broadcast_to(
                np.asarray(epsilon_budget, np.float64), spent.shape
            )
            allowed &= spent <= budget
        return allowed

    def state_dict(self) -> dict[str, Any]:
        """Return the ledger as numpy arrays (checkpoint-friendly).

        Returns:
            Dict with ``num_clients``, ``accountant``, ``upload_count`` (N,) int64
            and ``entries`` (E, 5) float64: the run-length entries in order, as
            rows (client, noise_multiplier, sample_rate, steps, count).
        """
        rows = [
            (client, *entry)
            for client, history in enumerate(self._histories)
            for entry in history
        ]
        return {
            "num_clients": self.num_clients,
            "accountant": self.accountant,
            "upload_count": self._uploads.copy(),
            "entries": np.asarray(rows, dtype=np.float64).reshape(-1, 5),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the ledger from ``state_dict()`` output.

        Args:
            state: Mapping produced by ``state_dict`` (arrays may be lists).

        Raises:
            ValueError: If ``num_clients`` differs from this ledger's.
        """
        if int(state["num_clients"]) != self.num_clients:
            raise ValueError(
                f"state has num_clients={state['num_clients']}, ledger has "
                f"{self.num_clients}"
            )
        name = str(state["accountant"])
        make_accountant(name)  # type: ignore[arg-type]  # validates the name
        self.accountant = name  # type: ignore[assignment]
        self._histories = [[] for _ in range(self.num_clients)]
        entries = np.asarray(state["entries"], dtype=np.float64).reshape(-1, 5)
        for client, *entry in entries.tolist():
            self._histories[int(client)].append(entry)
        self._uploads = np.asarray(state["upload_count"], dtype=np.int64).copy()
        self._cache.clear()
