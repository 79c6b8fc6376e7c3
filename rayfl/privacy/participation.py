"""Per-client DP budgets of local DP-SGD: T̂_i (eq. 13), β_i (eq. 12), quit rule.

DP-SparFL (spec seed_002 §2.5): client i runs τ Poisson-subsampled Gaussian steps
(rate q_i = abs(b)/abs(D_i), noise multiplier σ̂) each time it is scheduled. With
``algorithm.sampling: fixed`` the steps are accounted without amplification
(q = 1, replace-one, z = σ̂/2; ``rayfl.privacy.sensitivity.dp_sgd_rule``). Its ε
after t̄ participations comes from the accountant (dp-accounting's RDP, the
``PrivacyLedger`` backend); it may participate at most T̂_i times (eq. 13), and
the scheduler's long-term participation target is β_i (eq. 12).

| paper symbol | code name |
|--------------|-----------|
| ε_i | ``budgets`` (drawn U[ε_min, ε_max], §5.3) |
| δ | ``delta`` |
| σ̂ | ``noise_multiplier`` |
| q_i | ``sample_rate`` (N,) |
| τ | ``steps`` |
| t̄_i | ``PrivacyLedger.upload_count`` |
| T̂_i | ``max_participations`` |
| β_i | ``participation_targets`` |

Implementation details:
    1. [AMBIG-14] T̂_i is the largest k with ε(k·τ steps) ≤ ε_i by the same
       accountant the ledger uses (so the quit rule and T̂_i agree exactly);
       the RDP orders and the RDP→(ε, δ) conversion are dp-accounting's, which
       may differ slightly from eq. 13's max over Opacus' orders.
    2. Quit rule (Algorithm 1): a client is eligible while ε after one more
       participation ≤ ε_i; clients with T̂_i = 0 are never eligible.
    3. The draws of ε_i use the generator (seed, "epsilon_budget").
    4. Speed: RDP composes additively, so with the RDP backend ε after k
       participations is dp-accounting's ``compute_epsilon`` of k·τ times the
       one-step RDP curve (the same orders and conversion as ``RdpAccountant``;
       tested equal to the ledger's ε). One full accountant call costs seconds
       on a loaded machine, and the quit rule needs one per client per round.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from rayfl.privacy.accountant import AccountantName, PrivacyLedger, _history_epsilon

__all__ = [
    "LocalDPSGD",
    "draw_epsilon_budgets",
    "max_participations",
    "participation_targets",
]


def draw_epsilon_budgets(
    num_clients: int, *, low: float, high: float, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """Draw ε_i ~ U[low, high] per client (seed_002 §5.3)."""
    if not 0 < low <= high:
        raise ValueError(f"need 0 < low <= high, got {low}, {high}")
    return rng.uniform(low, high, size=num_clients)


@lru_cache(maxsize=64)
def _rdp_per_step(
    noise_multiplier: float, sample_rate: float
) -> npt.NDArray[np.float64]:
    """RDP of one Poisson-subsampled Gaussian step at dp-accounting's orders."""
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    return np.asarray(
        rdp._compute_rdp_poisson_subsampled_gaussian(
            q=sample_rate,
            noise_multiplier=noise_multiplier,
            orders=rdp.DEFAULT_RDP_ORDERS,
        ),
        dtype=np.float64,
    )


@lru_cache(maxsize=65536)
def _fast_epsilon(
    total_steps: int,
    noise_multiplier: float,
    sample_rate: float,
    delta: float,
    accountant: AccountantName,
) -> float:
    """ε after ``total_steps`` steps: linear RDP composition, or the accountant."""
    if total_steps <= 0:
        return 0.0
    if accountant != "rdp":
        signature = ((noise_multiplier, sample_rate, total_steps),)
        return _history_epsilon(signature, delta=delta, accountant=accountant)
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    curve = total_steps * _rdp_per_step(noise_multiplier, sample_rate)
    return float(rdp.compute_epsilon(rdp.DEFAULT_RDP_ORDERS, curve, delta)[0])


def max_participations(
    epsilon_budget: float,
    *,
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    delta: float,
    accountant: AccountantName = "rdp",
    limit: int = 100_000,
) -> int:
    """Return T̂: the most participations whose ε stays ≤ ``epsilon_budget`` (eq. 13).

    Args:
        epsilon_budget: ε_i > 0.
        noise_multiplier: σ̂ > 0.
        sample_rate: q_i in (0, 1].
        steps: τ, DP-SGD steps per participation.
        delta: δ.
        accountant: Ledger backend, "rdp" or "pld".
        limit: Search cap (returned if even ``limit`` participations fit).

    Returns:
        T̂ ≥ 0.

    Example:
        >>> max_participations(1e-6, noise_multiplier=1.0, sample_rate=1.0,
        ...                    steps=1, delta=1e-5)
        0
    """

    def fits(k: int) -> bool:
        eps = _fast_epsilon(
            k * int(steps),
            float(noise_multiplier),
            float(sample_rate),
            delta,
            accountant,
        )
        return eps <= epsilon_budget

    if not fits(1):
        return 0
    low, high = 1, 2
    while high <= limit and fits(high):
        low, high = high, high * 2
    if high > limit:
        return limit if fits(limit) else _bisect(fits, low, limit)
    return _bisect(fits, low, high)


def _bisect(fits, low: int, high: int) -> int:  # type: ignore[no-untyped-def]
    """Largest k in [low, high) with fits(k), given fits(low) and not fits(high)."""
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            low = mid
        else:
            high = mid
    return low


def participation_targets(
    max_participations: npt.ArrayLike, *, num_subchannels: int
) -> npt.NDArray[np.float64]:
    """Return β_i = min{N·T̂_i / Σ_k T̂_k, 1} (eq. 12).

    Example:
        >>> participation_targets([1, 1, 2], num_subchannels=2).tolist()
        [0.5, 0.5, 1.0]
    """
    t_hat = np.asarray(max_participations, dtype=np.float64)
    total = float(t_hat.sum())
    if total <= 0:
        return np.zeros_like(t_hat)
    return np.minimum(num_subchannels * t_hat / total, 1.0)


@dataclass(frozen=True)
class LocalDPSGD:
    """The DP-SGD release of each participation and the per-client budgets.

    Attributes:
        noise_multiplier: σ̂.
        sample_rate: q_i per client, (N,).
        steps: τ.
        budgets: ε_i per client, (N,).
        delta: δ.
        accountant: Ledger backend.
        sensitivity: Description of Δ (``dp_sgd_rule``), for summary.json.
        adjacency: The adjacency under which Δ holds.
    """

    noise_multiplier: float
    sample_rate: npt.NDArray[np.float64]
    steps: int
    budgets: npt.NDArray[np.float64]
    delta: float
    accountant: AccountantName = "rdp"
    sensitivity: str = "C per step on the sum of per-sample clipped gradients"
    adjacency: str = "add/remove one record"

    def epsilon(self, participations: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Return ε_i after the given participation counts (N,), eq. 6.

        With the RDP backend the per-step RDP curve of (σ̂, q) is computed once
        and composed linearly (detail 4); otherwise each count goes through the
        accountant.
        """
        counts = np.asarray(participations, dtype=np.int64).reshape(-1)
        out = np.zeros(counts.shape, dtype=np.float64)
        for i, (k, q) in enumerate(zip(counts, self.sample_rate, strict=True)):
            if k > 0:
                out[i] = _fast_epsilon(
                    int(k) * self.steps,
                    self.noise_multiplier,
                    float(q),
                    self.delta,
                    self.accountant,
                )
        return out

    def record(self, ledger: PrivacyLedger, clients: npt.ArrayLike) -> None:
        """Record one participation (τ sampled-Gaussian steps) per listed client."""
        for c in np.asarray(clients, dtype=np.int64).reshape(-1).tolist():
            ledger.record(
                [c],
                noise_multiplier=self.noise_multiplier,
                sample_rate=float(self.sample_rate[c]),
                steps=self.steps,
            )

    def eligible(self, ledger: PrivacyLedger) -> npt.NDArray[np.bool_]:
        """Return who may participate: ε after one more round ≤ ε_i (quit rule)."""
        return self.epsilon(ledger.upload_count + 1) <= self.budgets

    def max_participations(self) -> npt.NDArray[np.int64]:
        """Return T̂_i per client (eq. 13)."""
        return np.array(
            [
                max_participations(
                    float(b),
                    noise_multiplier=self.noise_multiplier,
                    sample_rate=float(q),
                    steps=self.steps,
                    delta=self.delta,
                    accountant=self.accountant,
                )
                for b, q in zip(self.budgets, self.sample_rate, strict=True)
            ],
            dtype=np.int64,
        )
