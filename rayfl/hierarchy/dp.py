"""Hierarchical DP: noise std per stream (spec §2.6) and the observer ledger.

Symbol table:

| paper symbol | code name |
|---|---|
| Δ_i = 2 η_k τ_k G, Δ̄_c = Δ_i / s_c^k | ``device_sensitivity``, ``edge_sensitivity`` |
| σ_{i,Loc}, σ_{i,Glob} | ``StreamStds.device_local``, ``device_global`` |
| σ̄_{c,Loc}, σ̄_{c,Glob} | ``StreamStds.edge_local``, ``edge_global`` |
| L = K_g K_ℓ, K_g | ``local_releases``, ``global_releases`` |
| c_2, v_2 | ``edge_constant``, ``device_constant`` |

Implementation details:
    1. Closed form σ = c q Δ √(L ln(1/δ))/ε (eq. 15, q =
       ``calibration_sample_rate``, the paper's input) or accountant mode σ = z Δ
       with z from dp-accounting for L Gaussian releases at q = 1 (devices
       sample no record: their batches are epoch permutations), so that the
       ledger's ε ≤ the target.
    2. Stds are recomputed each interval from (η_k, τ_k, s_c^k) (spec §8).
    3. Observers (spec §1 trust model): ``edge`` (the device's own edge, only
       when untrusted), ``cloud``, ``peers`` (other devices of the subnet, who
       receive w̄_c). A trusted edge is not an adversary. What each sees:
       untrusted subnet — the edge sees every device release (local and
       global); cloud and peers see post-processings of those, so the same
       releases are charged to them (an upper bound). Trusted subnet — peers and
       cloud see the edge's noisy averages: local releases (peers directly, the
       cloud through v_c, which contains w̄_c) and global releases (cloud; peers
       after the broadcast).
    4. A release is one Gaussian mechanism on an accumulated step of s SGD
       steps, recorded with q = 1 and z = σ/Δ at the sensitivity the code
       enforces (``rayfl.privacy.sensitivity``): Δ = 2η·s·G for a device (its
       step is clipped to η·s·G), 2η·s·G·max ρ for a trusted edge's mean
       (1/s_c with equal weights). The noise std is calibrated at the paper's
       Δ (2ητG, or 2η m G for local releases with ``local_sensitivity_steps:
       period``), never smaller than the actual one, so the recorded z is at
       least the calibrated z. Without clipping (G = None) z = 0: ε = ∞.
    5. The extra global-only aggregation of ``local_at_global`` re-noises
       already released edge models: post-processing, not charged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.hierarchy.config import HierDPConfig
from rayfl.privacy.accountant import PrivacyLedger
from rayfl.privacy.gaussian import accountant_noise_multiplier
from rayfl.privacy.sensitivity import ADJACENCY_CLIENT, h2fdp_release_sensitivity

__all__ = [
    "ObserverLedger",
    "StreamStds",
    "noise_multiplier",
    "release_noise_multiplier",
    "stream_stds",
]

OBSERVERS = ("edge", "cloud", "peers")


def noise_multiplier(
    *,
    epsilon: float,
    delta: float,
    sample_rate: float,
    releases: int,
    constant: float,
    calibration: str,
) -> float:
    """Return z = σ/Δ for L releases at (ε, δ), eq. 15 or the accountant.

    ``sample_rate`` is eq. 15's q (``calibration_sample_rate``); the accountant
    mode ignores it and calibrates at q = 1.

    Example:
        >>> round(noise_multiplier(epsilon=1, delta=1e-5, sample_rate=0.027,
        ...     releases=200, constant=1.5, calibration="closed_form"), 4)
        1.9434
    """
    if calibration == "accountant":  # q = 1: no record is Poisson-sampled
        return accountant_noise_multiplier(
            epsilon=epsilon, delta=delta, sample_rate=1.0, steps=int(releases)
        )
    return constant * sample_rate * math.sqrt(releases * math.log(1 / delta)) / epsilon


@dataclass(frozen=True)
class StreamStds:
    """Noise stds of one interval, per edge (N,) float64 (0 where unused).

    Attributes:
        device_local: σ_{i,Loc} of devices under untrusted edges.
        device_global: σ_{i,Glob}.
        edge_local: σ̄_{c,Loc} of trusted edges.
        edge_global: σ̄_{c,Glob}.
    """

    device_local: npt.NDArray[np.float64]
    device_global: npt.NDArray[np.float64]
    edge_local: npt.NDArray[np.float64]
    edge_global: npt.NDArray[np.float64]

    def std(self, c: int, *, edge: bool, is_global: bool) -> float:
        """Return σ of edge c's own stream (``edge``) or of its devices' stream."""
        if edge:
            return float(self.edge_global[c] if is_global else self.edge_local[c])
        return float(self.device_global[c] if is_global else self.device_local[c])


def stream_stds(
    dp: HierDPConfig,
    *,
    enabled: bool,
    trusted: npt.NDArray[np.bool_],
    participants: npt.NDArray[np.int64],
    learning_rate: float,
    tau: int,
    period: int,
    num_global: int,
    num_local: int,
    sample_rate: float,
) -> StreamStds:
    """Return σ of every stream for one interval (spec §2.6).

    Args:
        dp: The ``topology.dp`` section.
        enabled: False → all zeros (HFL without DP).
        trusted: Trust flag per edge (N,).
        participants: s_c^k per edge (N,).
        learning_rate: η_k.
        tau: τ_k.
        period: m_k (used by ``local_sensitivity_steps: period``).
        num_global: K_g (global releases over the run).
        num_local: K_ℓ (local releases per interval); L_loc = K_g K_ℓ.
        sample_rate: q of eq. 15 (``calibration_sample_rate``).

    Returns:
        The stds, per edge.

    Example:
        >>> from rayfl.hierarchy.config import HierDPConfig
        >>> s = stream_stds(HierDPConfig(), enabled=True, trusted=np.array([True, False]),
        ...     participants=np.array([5, 5]), learning_rate=0.1, tau=20, period=5,
        ...     num_global=200, num_local=3, sample_rate=0.027)
        >>> bool(np.isclose(s.edge_global[0] * 5, s.device_global[1]))
        True
    """
    n = len(trusted)
    out: dict[str, npt.NDArray[np.float64]] = {
        k: np.zeros(n)
        for k in ("device_local", "device_global", "edge_local", "edge_global")
    }
    if not enabled:
        return StreamStds(**out)
    eps = dp.epsilon / 2 if dp.strict_accounting else dp.epsilon
    g = dp.grad_bound if dp.grad_bound is not None else 1.0
    local_steps = tau if dp.local_sensitivity_steps == "tau" else period
    delta_local = 2 * learning_rate * local_steps * g
    delta_global = 2 * learning_rate * tau * g
    for c in range(n):
        constant = dp.edge_constant if trusted[c] else dp.device_constant
        common: dict[str, Any] = dict(
            epsilon=eps,
            delta=dp.delta,
            sample_rate=sample_rate,
            constant=constant,
            calibration=dp.calibration,
        )
        z_glob = noise_multiplier(releases=num_global, **common)
        z_loc = (
            noise_multiplier(releases=num_global * num_local, **common)
            if num_local
            else 0.0
        )
        if trusted[c]:
            s = max(int(participants[c]), 1)
            out["edge_local"][c] = z_loc * delta_local / s
            out["edge_global"][c] = z_glob * delta_global / s
        else:
            out["device_local"][c] = z_loc * delta_local
            out["device_global"][c] = z_glob * delta_global
    return StreamStds(**out)


def release_noise_multiplier(
    noise_std: float,
    *,
    learning_rate: float,
    steps: int,
    grad_bound: float | None,
    max_weight: float = 1.0,
) -> float:
    """Return the ledger's z = σ/Δ of one release at the sensitivity the code enforces.

    Args:
        noise_std: σ of the release (device noise, or the trusted edge's).
        learning_rate: η.
        steps: s, SGD steps accumulated in the released step.
        grad_bound: G (the step is clipped to η·s·G); None = no clip, z = 0.
        max_weight: max ρ of the edge mean (1 for a device's own release).

    Returns:
        z ≥ 0 (0 when nothing bounds the release or σ = 0: ε = ∞).

    Example:
        >>> release_noise_multiplier(1.0, learning_rate=0.1, steps=5,
        ...                          grad_bound=1.0, max_weight=0.5)
        2.0
    """
    if grad_bound is None or not noise_std > 0:
        return 0.0
    return float(
        noise_std
        / h2fdp_release_sensitivity(
            learning_rate=learning_rate,
            steps=steps,
            grad_bound=grad_bound,
            max_weight=max_weight,
        )
    )


class ObserverLedger:
    """Per-client privacy ledgers, one per semi-honest observer (edge, cloud, peers).

    Args:
        num_clients: I.
        delta: δ at which ε is reported.
        strict: Whether the streams were calibrated to ε/2 (spec A5); reported
            only, the ledger composes every release either way.
    """

    def __init__(self, num_clients: int, *, delta: float, strict: bool) -> None:
        self.num_clients = num_clients
        self.delta = delta
        self.strict = strict
        self.ledgers = {o: PrivacyLedger(num_clients) for o in OBSERVERS}
        self.nominal_epsilon = float("nan")
        self._z_range = [math.inf, 0.0]

    def record(
        self,
        clients: list[int],
        *,
        trusted: bool,
        noise_multiplier: float,
    ) -> None:
        """Charge one release of ``clients`` to the observers who see it (detail 3).

        Args:
            clients: Devices whose data the release depends on.
            trusted: Whether their edge is trusted (it then sees nothing new).
            noise_multiplier: z = σ/Δ at the enforced sensitivity
                (``release_noise_multiplier``); recorded with q = 1.
        """
        if not clients:
            return
        self._z_range = [
            min(self._z_range[0], float(noise_multiplier)),
            max(self._z_range[1], float(noise_multiplier)),
        ]
        observers = ("cloud", "peers") if trusted else OBSERVERS
        for o in observers:
            self.ledgers[o].record(
                clients, noise_multiplier=noise_multiplier, sample_rate=1.0
            )

    def per_observer(self) -> dict[str, npt.NDArray[np.float64]]:
        """Return ε per client for each observer (0 where it saw nothing)."""
        return {o: led.epsilon(self.delta) for o, led in self.ledgers.items()}

    def epsilons(self, evaluate: bool = True) -> tuple[npt.NDArray[np.float64], Any]:
        """Return (worst-observer ε per client, nominal ε per client)."""
        eps = np.max(np.stack(list(self.per_observer().values())), axis=0)
        return eps, np.full(self.num_clients, self.nominal_epsilon)

    def privacy_summary(self, eps: npt.NDArray[np.float64] | None) -> dict[str, Any]:
        """Summarise ε per observer for summary.json."""
        per = self.per_observer()
        out: dict[str, Any] = {
            "mechanism": "hierarchical_gaussian",
            "delta": self.delta,
            "nominal_epsilon_per_stream": self.nominal_epsilon,
            "strict_accounting": self.strict,
            "sensitivity": "2*eta*s*G per device release (step of s SGD steps "
            "clipped to eta*s*G); 2*eta*s*G*max rho for a trusted edge's mean "
            "(= /s_c with equal weights)",
            "adjacency": ADJACENCY_CLIENT,
            "ledger_sample_rate": 1.0,
            "noise_multiplier_min": (
                self._z_range[0] if math.isfinite(self._z_range[0]) else 0.0
            ),
            "noise_multiplier_max": self._z_range[1],
            "epsilon_target_meaning": "topology.dp.epsilon per stream and observer "
            "as calibrated (eq. 15 is the paper's formula, not a guarantee); "
            "epsilon_* are the ledger's",
            "epsilon_max_by_observer": {o: float(np.max(v)) for o, v in per.items()},
            "epsilon_per_client_by_observer": {
                o: [float(e) for e in v] for o, v in per.items()
            },
        }
        if eps is not None and len(eps):
            out.update(
                epsilon_max=float(np.max(eps)),
                epsilon_median=float(np.median(eps)),
                epsilon_min=float(np.min(eps)),
            )
        return out

    def state_dict(self) -> dict[str, Any]:
        """Return the ledgers' state (checkpoints)."""
        return {
            **{o: led.state_dict() for o, led in self.ledgers.items()},
            "noise_multiplier_range": list(self._z_range),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        for o, led in self.ledgers.items():
            led.load_state_dict(state[o])
        if "noise_multiplier_range" in state:
            self._z_range = [float(v) for v in state["noise_multiplier_range"]]
