"""Surrogate FL dynamics: a cheap model of per-client loss for fast RL training.

Instead of training models, the surrogate evolves an optimality gap g_t of the
global model with a recursion shaped like Lemma 1 of Zhao et al. (spec seed_000
§4.2, eq. 26): a contraction from the clients that delivered, plus error floors
from DP noise and from channel errors, and gives each client a loss

    g_{t+1} = (1 − c · Σ_{n∈D_t} p_n) · g_t + a_noise · σ² / max(|D_t|, 1)
              + a_channel · mean_{n∈D_t} ρ_n                        (surrogate of eq. 26)
    loss_n  = f_n* + g_t + h_n · exp(−u_n / τ) + d_n · (1 − exp(−a_n / κ))

where D_t are the delivered clients, p_n their data shares, ρ_n their per-element
error probabilities (eq. 14), u_n their uploads so far and h_n a per-client
heterogeneity offset that shrinks as the client participates (clients never
scheduled stay badly served: the min-max objective notices). The last term is
the recency effect of non-IID FedAvg: a_n is the number of rounds since client
n's last delivered update and d_n ~ d̄ · U[0, 2] how far the global model drifts
from client n's data while it is away; the client's loss is lowest just after
its update went in. Calibrated on real Fashion-MNIST (examples/rl_scheduler.yaml,
random policy, 30 rounds): the test loss of a client relative to the round's
mean is −0.25 nats at a_n = 0 and +0.05…+0.25 at a_n ≥ 1, i.e. κ ≈ 1 round and a
jump of ≈ 0.35 nats (NOTES.md, issue 11).

| symbol | code name | default |
|--------|-----------|---------|
| c | ``contraction`` | 0.5 |
| a_noise | ``noise_weight`` | 1.0 |
| a_channel | ``channel_weight`` | 5.0 |
| f_n* | ``floor`` | U[``floor_low``, ``floor_high``] = U[0.2, 0.5] |
| h_n | ``heterogeneity`` | U[``heterogeneity_low``, ``heterogeneity_high``] = U[0, 1] |
| τ | ``participation_scale`` | 3 uploads |
| d̄ | ``recency_weight`` | 0 (RL config default 0.35) |
| κ | ``recency_scale`` | 1 round |
| a_n | ``age`` | 0 at reset |

Implementation details:
    1. g_0 = ln(num_classes) − mean f* so that the initial loss is that of a
       uniform classifier, as for a freshly initialised model.
    2. Per-client training losses observed after an upload equal the surrogate
       loss with multiplicative log-normal noise (std 0.05) — local losses are
       noisy estimates.
    3. d_n is drawn only when d̄ > 0, so d̄ = 0 leaves the random stream (and
       every earlier result) unchanged.
    4. Every constant of the table can be fitted to emulate rollouts
       (``rayfl bench fit-surrogate``, :mod:`rayfl.benchmarks.surrogate_fit`)
       and set through the ``rl.surrogate_*`` config fields; the ranges of f_n*
       and h_n scale the same uniform draws, so the random stream is unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["SurrogateDynamics"]


@dataclass
class SurrogateDynamics:
    """State and update rule of the surrogate (see the module docstring).

    Args:
        data_share: p_n, shape (N,), sums to 1.
        num_classes: Classes of the task (sets the initial loss).
        noise_std: σ of the DP noise (per element); 0 without DP.
        rng: Source of the per-client constants and observation noise.
    """

    data_share: npt.NDArray[np.float64]
    num_classes: int
    noise_std: float
    rng: np.random.Generator
    contraction: float = 0.5
    noise_weight: float = 1.0
    channel_weight: float = 5.0
    participation_scale: float = 3.0
    recency_weight: float = 0.0
    recency_scale: float = 1.0
    floor_low: float = 0.2
    floor_high: float = 0.5
    heterogeneity_low: float = 0.0
    heterogeneity_high: float = 1.0

    def __post_init__(self) -> None:
        if self.recency_weight < 0 or self.recency_scale <= 0:
            raise ValueError(
                "recency_weight must be >= 0 and recency_scale > 0, got "
                f"{self.recency_weight} and {self.recency_scale}"
            )
        for name, low, high in (
            ("floor", self.floor_low, self.floor_high),
            ("heterogeneity", self.heterogeneity_low, self.heterogeneity_high),
        ):
            if not 0 <= low <= high:
                raise ValueError(
                    f"{name}_low and {name}_high must satisfy 0 <= low <= high, "
                    f"got {low} and {high}"
                )
        n = len(self.data_share)
        self.floor = self.rng.uniform(self.floor_low, self.floor_high, size=n)
        self.heterogeneity = self.rng.uniform(
            self.heterogeneity_low, self.heterogeneity_high, size=n
        )
        self.drift = (
            self.recency_weight * self.rng.uniform(0.0, 2.0, size=n)
            if self.recency_weight > 0
            else np.zeros(n)
        )
        self.gap = max(math.log(self.num_classes) - float(self.floor.mean()), 0.0)
        self.uploads = np.zeros(n)
        self.age = np.zeros(n)

    def client_loss(self) -> npt.NDArray[np.float64]:
        """Return each client's current (test) loss, shape (N,)."""
        return (
            self.floor
            + self.gap
            + self.heterogeneity * np.exp(-self.uploads / self.participation_scale)
            + self.drift * (1.0 - np.exp(-self.age / self.recency_scale))
        )

    def step(
        self,
        delivered: npt.NDArray[np.int64],
        element_error: npt.NDArray[np.float64],
    ) -> npt.NDArray[np.float64]:
        """Advance one round; return the observed training loss of ``delivered``.

        Args:
            delivered: Ids of clients whose update arrived, shape (m,).
            element_error: Their per-element error probability ρ_n, shape (m,).

        Returns:
            Observed training losses of the delivered clients, shape (m,).
        """
        m = len(delivered)
        share = float(self.data_share[delivered].sum()) if m else 0.0
        self.gap = (
            (1.0 - self.contraction * share) * self.gap
            + self.noise_weight * self.noise_std**2 / max(m, 1)
            + (self.channel_weight * float(np.mean(element_error)) if m else 0.0)
        )
        self.uploads[delivered] += 1
        self.age += 1
        self.age[delivered] = 0
        loss = self.client_loss()[delivered]
        return loss * np.exp(self.rng.normal(0.0, 0.05, size=m))
