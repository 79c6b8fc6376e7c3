"""FedALA: adaptive local aggregation of the global model (Zhang et al., AAAI 2023).

"FedALA: Adaptive Local Aggregation for Personalized Federated Learning".

Before local training, client n mixes the received global model Θ^t into its
previous local model θ_n^{t−1} element-wise (Adaptive Local Aggregation, eqs. 4-6):

    θ̂_n = θ_n^{t−1} + (Θ^t − θ_n^{t−1}) ⊙ [1^{|Θ|−p}; W_n^p]

i.e. the lower layers take Θ^t and the top p parameter tensors take the learned
mix with weights W_n ∈ [0, 1]. W_n is learned on a random s% of the local data:

    W_n ← clip_[0,1]( W_n − η ∇_{θ̂} L(θ̂_n) ⊙ (Θ^t − θ_n^{t−1}) )       (eq. 7)

(from all-ones, until the loss settles in the first ALA; one epoch afterwards).
Client n then trains θ̂_n by local SGD into θ_n^t and uploads it; the server
averages as FedAvg. The personalized model is θ_n^t.

Limit: p = 0 (``layer_idx=0``) makes θ̂_n = Θ^t: FedAvg (detail 3).

| paper symbol | code name |
|--------------|-----------|
| Θ^t | ``ctx.global_vector`` |
| θ_n^{t−1}, θ_n^t | ``ctx.state["personal"]`` |
| W_n^p | ``ctx.state["ala_weights"]`` (the top-p slice only) |
| p | ``layer_idx`` |
| s | ``rand_percent`` |
| η | ``eta`` |
| η (local SGD) | ``lr`` (control ``lr``) |

Implementation details:
    1. ALA is skipped in the client's first round (θ̂ = Θ^t: there is no local
       model yet; PFLlib skips it when θ = Θ).
    2. W's data: a contiguous slice of ⌊s·n/100⌋ train samples at a random
       offset, in order, batches of B, last partial batch dropped (PFLlib ``ALA``).
       First ALA: epochs until more than ``num_pre_loss`` epochs ran and the std of
       the last ``num_pre_loss`` epoch losses (loss of an epoch's last batch) is
       below ``threshold``, at most ``max_start_epochs`` (PFLlib has no cap).
    3. p counts parameter tensors from the top, weights and biases separately
       (PFLlib's ``layer_idx``; its default 2 = the last linear layer); p = 0
       means no adaptive part (PFLlib reads 0 as "all layers").
    4. The offset draw uses a generator spawned from the round's batch generator,
       so the local SGD batches are FedAvg's (exact FedAvg limit at p = 0).
    5. The upload is the local model θ_n^t (``clip_target="model"``, spec seed_001
       §5) or θ_n^t − Θ^t (``"update"``); the server averages with weights |D_n|.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import numpy.typing as npt
import torch

from rayfl.algorithms.base import Algorithm, ClientContext, ClientUpdate
from rayfl.algorithms.config import FedALAConfig
from rayfl.algorithms.pfl_common import (
    batch_gradient,
    local_train,
    model_update,
    to_tensor,
)
from rayfl.learning.models import FlatModel

__all__ = ["FedALA", "adaptive_local_aggregation"]


def _ala_batches(
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.int64],
    rand_percent: int,
    batch_size: int,
    rng: np.random.Generator,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Return the full batches of ALA's s% slice of the data at a random offset."""
    n = len(y)
    count = int(rand_percent / 100 * n)
    begin = int(rng.integers(0, n - count + 1)) if n else 0
    xs = torch.from_numpy(np.asarray(x[begin : begin + count]))
    ys = torch.from_numpy(np.asarray(y[begin : begin + count]))
    return [
        (xs[i : i + batch_size], ys[i : i + batch_size])
        for i in range(0, count - batch_size + 1, batch_size)
    ]


def adaptive_local_aggregation(
    model: FlatModel,
    local: npt.NDArray[np.float32],
    received: npt.NDArray[np.float32],
    weights: npt.NDArray[np.float32] | None,
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.int64],
    *,
    layer_idx: int,
    rand_percent: int,
    eta: float,
    batch_size: int,
    first: bool,
    threshold: float,
    num_pre_loss: int,
    max_start_epochs: int,
    rng: np.random.Generator,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], int]:
    """Return θ̂ = ALA(θ, Θ), the learned top weights W, and the epochs run.

    Args:
        model: A flat model (scratch; its ``spec.offsets`` define the layers).
        local: θ_n^{t−1}, float32 (dim,).
        received: Θ^t, float32 (dim,).
        weights: W of the top ``layer_idx`` tensors (flat), or None for all ones.
        x: Train inputs.
        y: Train labels.
        layer_idx: p ≥ 0.
        rand_percent: s in [0, 100].
        eta: η > 0.
        batch_size: B.
        first: Whether this is the client's first ALA (train W until settled).
        threshold: Std threshold of the first ALA.
        num_pre_loss: Window of that std.
        max_start_epochs: Cap on the first ALA's epochs.
        rng: Source of the sample offset.

    Returns:
        (θ̂, W, epochs).
    """
    offsets = model.spec.offsets
    cut = offsets[len(offsets) - 1 - layer_idx] if layer_idx > 0 else offsets[-1]
    theta_hat = to_tensor(received)
    if layer_idx == 0:
        return theta_hat.numpy(), np.zeros(0, np.float32), 0
    low = to_tensor(local)[cut:]
    diff = to_tensor(received)[cut:] - low
    w = (
        torch.ones_like(low)
        if weights is None
        else torch.from_numpy(np.array(weights, np.float32))
    )
    batches = _ala_batches(x, y, rand_percent, batch_size, rng)
    epochs = 0
    losses: list[float] = []
    if batches:
        while True:
            loss = float("nan")
            for xb, yb in batches:
                theta_hat[cut:] = low + diff * w
                grad, loss = batch_gradient(model, theta_hat, xb, yb)
                w = torch.clamp(w - eta * grad[cut:] * diff, 0.0, 1.0)
            losses.append(loss)
            epochs += 1
            if not first or epochs >= max_start_epochs:
                break
            if (
                len(losses) > num_pre_loss
                and float(np.std(losses[-num_pre_loss:])) < threshold
            ):
                break
    theta_hat[cut:] = low + diff * w
    return theta_hat.numpy(), w.numpy(), epochs


class FedALA(Algorithm):
    """FedALA: FedAvg server, adaptive local aggregation before local training.

    Args:
        config: The ``algorithm`` section (:class:`FedALAConfig`).
    """

    keeps_personal: ClassVar[bool] = True

    def client_update(self, ctx: ClientContext) -> ClientUpdate:
        """ALA(θ_n, Θ^t), local SGD, upload θ_n^t (or θ_n^t − Θ^t)."""
        cfg: FedALAConfig = self.config  # type: ignore[assignment]
        local = ctx.state.get("personal")
        epochs = 0
        if local is None:
            start = np.array(ctx.global_vector, np.float32)
        else:
            start, weights, epochs = adaptive_local_aggregation(
                ctx.model,
                local,
                ctx.global_vector,
                ctx.state.get("ala_weights"),
                ctx.x_train,
                ctx.y_train,
                layer_idx=cfg.layer_idx,
                rand_percent=cfg.rand_percent,
                eta=cfg.eta,
                batch_size=cfg.batch_size,
                first=not ctx.state.get("ala_started", False),
                threshold=cfg.threshold,
                num_pre_loss=cfg.num_pre_loss,
                max_start_epochs=cfg.max_start_epochs,
                rng=ctx.rng.spawn(1)[0],
            )
            ctx.state["ala_weights"] = weights
            ctx.state["ala_started"] = True
        result = local_train(ctx, cfg, start)
        ctx.state["personal"] = result.vector
        upload = (
            result.vector - ctx.global_vector if self.uploads_delta else result.vector
        )
        return model_update(
            upload,
            len(ctx.y_train),
            {
                "train_loss": result.train_loss,
                "steps": result.steps,
                "ala_epochs": epochs,
            },
        )
