"""pFedWN (Ni, Ghazikor & Hashemi): EM mixture weights and the target's aggregation.

The numerical core of pFedWN (spec seed_003 §2.5–2.6, Alg. 1 bottom and Alg. 2),
as pure numpy on loss matrices and flat vectors; the server-free D2D driver in
:mod:`rayfl.d2d` runs it on Ray actors.

* **EM** (Sec. IV-B, App. B, after FedEM): the target n treats each of its training
  samples as drawn from one of its M selected neighbors' distributions with prior
  π_n, the likelihood of sample i under neighbor m being p_m(y_i|x_i) ∝
  exp(−ℓ(h_{ω_m}(x_i), y_i)) (eq. 8). E-step (eq. 9), in log space:
  log q_i(m) = log π_m − L_im − logsumexp_m'(log π_m' − L_im'). M-step (eq. 10):
  π_m = (1/k_n) Σ_i q_i(m).
* **Aggregation** (eq. 1): ω_n ← α ω_n + (1−α) Σ_m π_m ω_m, then one local epoch.

Symbol table (paper symbol → code name):

| Symbol            | Code name                      | Shape        |
|-------------------|--------------------------------|--------------|
| L_im = ℓ(h_{ω_m}(x_i), y_i) | ``loss_matrix``      | (k_n, M)     |
| π_nm              | ``weights`` (log: ``log_weights``) | (M,)     |
| q_i(m) = λ_nm,i   | ``responsibilities``           | (k_n, M)     |
| α (eq. 1)         | ``alpha`` (config ``alpha``)   | scalar       |
| ω_n, ω_m          | ``own``, ``neighbors``         | (dim,), (M, dim) |

Implementation details:
    1. The prior π⁰ is uniform, 1/M (spec §2.6 [REC]).
    2. The stopping rule is configurable: ``"l1"`` stops when ‖π^{t+1} − π^t‖₁ <
       tol (spec [REC], default tol 1e-3), ``"loglik"`` when the mean
       log-likelihood improves by less than tol; ``max_iter`` caps both.
    3. Eq. 11 (re-fitting the components on the target's data) is not done: the
       components are the received neighbor models (spec A5 default).
    4. A lost packet renormalises π over the models that arrived; when none
       arrived, ω_n is kept (α = 1 for that round; spec A8).
    5. The constant B of eq. 8 cancels in eq. 9, so losses enter unshifted; the
       E-step is exact in log space even for losses of hundreds of nats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy.special import logsumexp

__all__ = [
    "EMResult",
    "aggregate_target",
    "em_step",
    "fit_mixture_weights",
]

FloatArray = npt.NDArray[np.float64]
StopRule = Literal["l1", "loglik"]


def em_step(
    log_weights: npt.ArrayLike, loss_matrix: npt.ArrayLike
) -> tuple[FloatArray, float]:
    """Run one E-step (eq. 9) and M-step (eq. 10) in log space.

    Args:
        log_weights: log π, (M,).
        loss_matrix: L_im, per-sample losses (negative log-likelihoods) of each
            neighbor model on the target's samples, (k, M), float.

    Returns:
        ``(new_log_weights, mean_log_likelihood)``; the log-likelihood is that of
        the *input* weights, (1/k) Σ_i log Σ_m π_m e^{−L_im}.

    Example:
        >>> lw, ll = em_step(np.log([0.5, 0.5]), [[0.0, 50.0], [0.0, 50.0]])
        >>> np.round(np.exp(lw), 6).tolist()
        [1.0, 0.0]
    """
    losses = np.asarray(loss_matrix, dtype=np.float64)
    log_pi = np.asarray(log_weights, dtype=np.float64)
    if losses.ndim != 2 or losses.shape[1] != log_pi.shape[0] or losses.shape[0] < 1:
        raise ValueError(
            f"loss_matrix must be (k >= 1, M={log_pi.shape[0]}), got {losses.shape}"
        )
    joint = log_pi[None, :] - losses  # log π_m + log p_m(y_i|x_i)
    log_evidence = logsumexp(joint, axis=1)  # (k,)
    log_resp = joint - log_evidence[:, None]  # log q_i(m), eq. 9
    new = logsumexp(log_resp, axis=0) - np.log(losses.shape[0])  # eq. 10
    return new - logsumexp(new), float(np.mean(log_evidence))


@dataclass(frozen=True)
class EMResult:
    """What :func:`fit_mixture_weights` returns.

    Attributes:
        weights: π*, (M,), on the simplex.
        iterations: E/M steps taken.
        converged: True if the stopping rule fired before ``max_iter``.
        history: π after each step, (iterations + 1, M) (row 0 is π⁰).
        log_likelihood: Mean log-likelihood before each step (iterations,).
    """

    weights: FloatArray
    iterations: int
    converged: bool
    history: FloatArray
    log_likelihood: FloatArray = field(default_factory=lambda: np.zeros(0))


def stop_reached(
    rule: StopRule,
    *,
    old: FloatArray,
    new: FloatArray,
    loglik_old: float | None,
    loglik_new: float,
    tol: float,
) -> bool:
    """Return True when the EM stopping rule fires (implementation detail 2)."""
    if rule == "l1":
        return float(np.sum(np.abs(new - old))) < tol
    if rule == "loglik":
        return loglik_old is not None and abs(loglik_new - loglik_old) < tol
    raise ValueError(f"EM stopping rule must be 'l1' or 'loglik', got {rule!r}")


def fit_mixture_weights(
    loss_matrix: npt.ArrayLike,
    *,
    prior: npt.ArrayLike | None = None,
    tol: float = 1e-3,
    max_iter: int = 500,
    stop: StopRule = "l1",
) -> EMResult:
    """Run EM to convergence on a fixed loss matrix (Alg. 1, bottom).

    Args:
        loss_matrix: L_im, (k, M).
        prior: π⁰, (M,), positive; default uniform.
        tol: Tolerance of the stopping rule.
        max_iter: Maximum E/M steps.
        stop: ``"l1"`` or ``"loglik"``.

    Returns:
        The weights, the trajectory and the log-likelihoods.

    Example:
        Two samples explained only by neighbor 0, one only by neighbor 1:

        >>> losses = [[0.0, 50.0], [0.0, 50.0], [50.0, 0.0]]
        >>> fit_mixture_weights(losses).weights.round(2).tolist()
        [0.67, 0.33]
    """
    losses = np.asarray(loss_matrix, dtype=np.float64)
    m = losses.shape[1] if losses.ndim == 2 else 0
    if m < 1:
        raise ValueError(f"loss_matrix must be (k, M >= 1), got {losses.shape}")
    pi = np.full(m, 1.0 / m) if prior is None else np.asarray(prior, np.float64)
    if pi.shape != (m,) or np.any(pi <= 0):
        raise ValueError(f"prior must be ({m},) and positive, got {pi}")
    log_pi = np.log(pi / pi.sum())
    history = [np.exp(log_pi)]
    logliks: list[float] = []
    converged = False
    for _ in range(max_iter):
        new_log, loglik = em_step(log_pi, losses)
        old, new = np.exp(log_pi), np.exp(new_log)
        done = stop_reached(
            stop,
            old=old,
            new=new,
            loglik_old=logliks[-1] if logliks else None,
            loglik_new=loglik,
            tol=tol,
        )
        logliks.append(loglik)
        history.append(new)
        log_pi = new_log
        if done:
            converged = True
            break
    return EMResult(
        weights=np.exp(log_pi),
        iterations=len(logliks),
        converged=converged,
        history=np.stack(history),
        log_likelihood=np.asarray(logliks),
    )


def aggregate_target(
    own: npt.NDArray[np.float32],
    neighbors: npt.ArrayLike,
    weights: npt.ArrayLike,
    *,
    alpha: float,
) -> npt.NDArray[np.float32]:
    """Return ω_n ← α ω_n + (1−α) Σ_m π_m ω_m (eq. 1) over the models received.

    Args:
        own: ω_n, float32 (dim,).
        neighbors: The received ω_m, (m, dim); m may be 0.
        weights: Their π_m, (m,), non-negative; renormalised to sum 1.
        alpha: α ∈ [0, 1]; 1 keeps ω_n (pure local training).

    Returns:
        The aggregated model, float32 (dim,); ω_n when nothing arrived or all
        weights are 0.

    Example:
        >>> aggregate_target(np.zeros(2, np.float32), [[1.0, 2.0], [3.0, 4.0]],
        ...     [1.0, 1.0], alpha=0.5).tolist()
        [1.0, 1.5]
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    own64 = np.asarray(own, dtype=np.float64)
    rows = np.asarray(neighbors, dtype=np.float64).reshape(-1, own64.size)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.shape[0] != rows.shape[0] or np.any(w < 0):
        raise ValueError(
            f"weights must be ({rows.shape[0]},) non-negative, got {w.shape}"
        )
    if rows.shape[0] == 0 or w.sum() <= 0 or alpha == 1.0:
        return np.array(own, dtype=np.float32)
    mix = (w / w.sum()) @ rows
    return (alpha * own64 + (1.0 - alpha) * mix).astype(np.float32)
