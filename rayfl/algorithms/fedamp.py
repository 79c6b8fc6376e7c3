"""FedAMP: attentive message passing via cloud models (Huang et al., AAAI 2021).

"Personalized Cross-Silo Federated Learning on Non-IID Data".

The server keeps every client's latest uploaded model w_j and sends each
scheduled client n its personalized cloud model (eqs. 6-7 with A(‖·‖²) of
PFLlib, spec seed_003 §5):

    ξ_{n,j} = α_K · A′(‖w_n − w_j‖²),   A′(d²) = exp(−d²/σ)/σ     (j ≠ n)
    ξ_{n,n} = 1 − Σ_{j≠n} ξ_{n,j}
    U_n = Σ_j ξ_{n,j} w_j

Client n then trains its own model on (eq. 8)

    min_w  F_n(w) + (λ / (2 α_K)) ‖w − U_n‖²

by SGD from its previous w_n, and uploads w_n. The personalized model is w_n.

Limit: λ = 0 is local training (each w_n trained alone from ω⁰, U_n unused).
With α_K → 0 (ξ_{n,j} → 0) U_n = w_n.

| paper symbol | code name |
|--------------|-----------|
| w_n | ``ctx.state["personal"]``; the upload |
| U_n (u_i^k) | built from ``ctx.download`` |
| ξ_{n,j} | :func:`attention_weights` |
| α_K | ``alpha_k`` |
| λ | ``lam`` |
| σ | ``sigma`` |
| η | ``lr`` (control ``lr``) |

Implementation details:
    1. Downloads (:meth:`FedAMP.server_downloads`): the server sends
       m_n = Σ_{j≠n} ξ_{n,j} w̃_j (one vector) and ξ_{n,n}; the client forms
       U_n = m_n + ξ_{n,n} w_n with its *own* exact w_n (PFLlib
       ``set_parameters(mu, coef_self)``). The attention weights use the
       uploads as received (DP-noised, spec seed_001 §5).
    2. The server uses the latest upload of every client, scheduled this round or
       not; a client that never uploaded counts as ω⁰ (all clients start there).
       A client's first download also carries ω⁰ as its starting model
       (counted on the downlink: dim more values).
    3. Local SGD (E epochs, batch B) takes the gradient step then the proximal
       step w ← w − η (λ/α_K)(w − U_n), as FedProx in
       :func:`rayfl.learning.train.local_sgd`. PFLlib's regularizer is computed on
       detached tensors and so has no gradient; we follow the paper.
    4. Defaults α_K = 5e-3, λ = 5e-7, σ = 0.1 are PFLlib's example configuration
       (spec seed_003 §5); spec seed_001 quotes PFLlib's CLI defaults α_K = λ =
       σ = 1, with which ξ_{n,n} = 1 − (N − 1) e^{−d²} can be very negative while
       the models are close. No restriction is imposed: ξ_{n,n} < 0 is allowed.
    5. The global model (column ``global``) is the weighted mean of the uploads;
       FedAMP itself never uses it.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from rayfl.algorithms.base import Algorithm, ClientContext, ClientUpdate, Download
from rayfl.algorithms.config import FedAMPConfig
from rayfl.algorithms.pfl_common import local_train, model_update

__all__ = ["FedAMP", "attention_weights", "cloud_models"]


def attention_weights(
    models: npt.ArrayLike, *, alpha_k: float, sigma: float
) -> npt.NDArray[np.float64]:
    """Return FedAMP's message-passing weights ξ (m, m) among ``models``.

    Args:
        models: Flat models w_1..w_m, (m, dim).
        alpha_k: α_K > 0.
        sigma: σ > 0.

    Returns:
        ξ with ξ_{i,j} = α_K exp(−‖w_i − w_j‖²/σ)/σ off the diagonal and rows
        summing to 1.

    Example:
        >>> xi = attention_weights(np.zeros((3, 2)), alpha_k=0.1, sigma=1.0)
        >>> xi.round(3).tolist()
        [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]
    """
    w = np.asarray(models, dtype=np.float64)
    sq = np.sum(w * w, axis=1)
    dist2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (w @ w.T), 0.0)
    xi = alpha_k * np.exp(-dist2 / sigma) / sigma
    np.fill_diagonal(xi, 0.0)
    np.fill_diagonal(xi, 1.0 - xi.sum(axis=1))
    return xi


def cloud_models(
    models: npt.ArrayLike, *, alpha_k: float, sigma: float
) -> npt.NDArray[np.float32]:
    """Return the personalized cloud models U = ξ W (m, dim) of ``models``."""
    w = np.asarray(models, dtype=np.float64)
    return (attention_weights(w, alpha_k=alpha_k, sigma=sigma) @ w).astype(np.float32)


def _message(
    own: npt.NDArray[np.float64],
    others: npt.NDArray[np.float64],
    *,
    alpha_k: float,
    sigma: float,
) -> tuple[npt.NDArray[np.float32], float]:
    """Return m = Σ_j ξ_j w_j over ``others`` and ξ_self = 1 − Σ_j ξ_j."""
    d2 = np.sum((others - own[None, :]) ** 2, axis=1)
    xi = alpha_k * np.exp(-d2 / sigma) / sigma
    return (xi @ others).astype(np.float32), float(1.0 - xi.sum())


class FedAMP(Algorithm):
    """FedAMP: personalized cloud models from the server, proximal local SGD.

    Args:
        config: The ``algorithm`` section (:class:`FedAMPConfig`).
    """

    uploads_delta: bool = False
    personalized_downloads: ClassVar[bool] = True
    keeps_personal: ClassVar[bool] = True

    def client_update(self, ctx: ClientContext) -> ClientUpdate:
        """Train w_n towards U_n = m_n + ξ_nn w_n and upload it."""
        cfg: FedAMPConfig = self.config  # type: ignore[assignment]
        if ctx.download is None:
            raise ValueError("FedAMP needs its personalized download (ctx.download)")
        start = ctx.state.get("personal")
        if start is None:
            start = np.asarray(ctx.download.get("start", ctx.global_vector))
        center = (
            np.asarray(ctx.download["message"], np.float64)
            + ctx.download["self_weight"] * start.astype(np.float64)
        ).astype(np.float32)
        result = local_train(
            ctx,
            cfg,
            start,
            prox_weight=cfg.lam / cfg.alpha_k,
            prox_center=center,
        )
        ctx.state["personal"] = result.vector
        return model_update(
            result.vector,
            len(ctx.y_train),
            {"train_loss": result.train_loss, "steps": result.steps},
        )

    def server_downloads(
        self,
        round: int,
        global_vector: npt.NDArray[np.float32],
        store: dict[str, Any],
        clients: list[int],
        num_clients: int,
    ) -> dict[int, Download]:
        """Return (m_n, ξ_nn) for each scheduled client (detail 1)."""
        cfg: FedAMPConfig = self.config  # type: ignore[assignment]
        init = store.setdefault("init", np.array(global_vector, np.float32))
        uploads: dict[int, Any] = store.get("uploads", {})
        models = np.stack([uploads.get(j, init) for j in range(num_clients)])
        models = models.astype(np.float64)
        out = {}
        for n in clients:
            others = np.delete(models, n, axis=0)
            message, self_weight = _message(
                models[n], others, alpha_k=cfg.alpha_k, sigma=cfg.sigma
            )
            data: dict[str, Any] = {"message": message, "self_weight": self_weight}
            size = len(init) + 1
            if n not in uploads:
                data["start"] = init
                size += len(init)
            out[n] = Download(data, size)
        return out
