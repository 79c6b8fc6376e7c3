"""Small helpers shared by the FL algorithms (local-run settings, flat gradients).

Every baseline's maths is written on flat float32 vectors so it can be reused
outside the actor path (e.g. over a D2D neighbour set); these helpers evaluate
mini-batch cross-entropy gradients of a :class:`~rayfl.learning.models.FlatModel`
at a given vector.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

from rayfl.algorithms.base import ClientUpdate
from rayfl.learning.models import FlatModel

__all__ = ["batch_gradient", "model_update", "to_tensor"]


def to_tensor(vector: npt.ArrayLike) -> torch.Tensor:
    """Return a float32 torch copy of a flat vector (never a view of the input)."""
    return torch.from_numpy(np.array(vector, dtype=np.float32).reshape(-1))


def batch_gradient(
    model: FlatModel, vector: torch.Tensor, xb: torch.Tensor, yb: torch.Tensor
) -> tuple[torch.Tensor, float]:
    """Return ∇F_B(vector) (flat, float32) and F_B(vector), the batch cross-entropy.

    Args:
        model: The actor's flat model (its parameters are overwritten).
        vector: The point, float32 (dim,).
        xb: Batch inputs.
        yb: Batch labels.

    Returns:
        The flat gradient (a fresh tensor) and the mean batch loss.
    """
    with torch.no_grad():
        model.flat.copy_(vector)
    loss = F.cross_entropy(model.module(xb), yb)
    grads = torch.autograd.grad(loss, model.params)
    return torch.cat([g.reshape(-1) for g in grads]), float(loss.detach())


def model_update(
    upload: npt.NDArray[np.float32],
    weight: float,
    metrics: dict[str, Any],
) -> ClientUpdate:
    """Return a :class:`ClientUpdate` with a float32 upload and float metrics."""
    return ClientUpdate(
        np.asarray(upload, dtype=np.float32),
        float(weight),
        {k: float(v) for k, v in metrics.items()},
    )


def local_work(ctx: Any, config: Any) -> dict[str, Any]:
    """Return the keywords of ``ctx``'s local run under ``config``'s settings.

    ``lr`` is the scheduler's ``lr`` control or ``config.lr``; ``batch_size``,
    ``local_epochs`` and ``local_steps`` come from ``config``, ``rng`` is the
    client's batch-order generator.
    """
    return {
        "lr": float(ctx.controls.get("lr", config.lr)),
        "batch_size": config.batch_size,
        "local_epochs": config.local_epochs,
        "local_steps": config.local_steps,
        "rng": ctx.rng,
    }


def local_train(ctx: Any, config: Any, start: npt.ArrayLike, **extra: Any) -> Any:
    """Run local SGD of ``ctx``'s client from ``start`` with ``config``'s settings.

    Trainer and :func:`local_work` come from ``config``; ``extra`` goes to the
    trainer (e.g. ``prox_weight``) and overrides those keywords (e.g. Ditto's
    full-batch ``batch_size``).

    Returns:
        The trainer's ``LocalTrainResult``.
    """
    from rayfl.learning.vectorized import per_client_trainer

    train = per_client_trainer(config.trainer)
    work = {**local_work(ctx, config), **extra}
    return train(ctx.model, start, ctx.x_train, ctx.y_train, **work)
