"""Local training and evaluation of one client on a flat model.

Local SGD as in FedAvg (McMahan et al. 2017): from the global model, ``E`` local
epochs (or ``S`` local steps) of mini-batch SGD with learning rate η on the
client's train split; optionally with FedProx's proximal term (μ/2)‖w − w_c‖²
(Li et al. 2020, eq. 2) towards a centre ``w_c`` (FedAMP: weight λ/α_K towards
its cloud model).

| paper symbol | code name |
|--------------|-----------|
| E | ``local_epochs`` |
| S | ``local_steps`` |
| B | ``batch_size`` |
| η | ``lr`` |
| μ (FedProx), λ/α_K (FedAMP) | ``prox_weight`` |

Implementation details:
    1. An epoch visits a fresh permutation of the client's samples in batches of
       ``batch_size``; the last smaller batch is kept (drop_last=False).
    2. ``local_steps`` overrides ``local_epochs``: that many batches, cycling over
       fresh permutations as needed.
    3. The reported ``train_loss`` is the mean mini-batch loss over the local run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

from rayfl.learning.models import FlatModel

__all__ = [
    "LocalTrainResult",
    "batch_indices",
    "evaluate",
    "iter_batch_indices",
    "iterate_batches",
    "local_sgd",
]


@dataclass(frozen=True)
class LocalTrainResult:
    """What one client's local training returns.

    Attributes:
        vector: The trained flat parameters, float32 (dim,).
        train_loss: Mean mini-batch loss over the local run.
        steps: Number of SGD steps taken.
    """

    vector: npt.NDArray[np.float32]
    train_loss: float
    steps: int


def batch_indices(
    num_samples: int,
    *,
    batch_size: int,
    local_epochs: int,
    local_steps: int | None,
    rng: np.random.Generator,
) -> list[npt.NDArray[np.int64]]:
    """Return the mini-batch index arrays of a local run.

    Args:
        num_samples: Size of the client's train split (> 0).
        batch_size: Mini-batch size B.
        local_epochs: Number of epochs E (ignored when ``local_steps`` is set).
        local_steps: Number of steps S, or None to use epochs.
        rng: Source of the permutations.

    Returns:
        One int64 index array per step.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> [len(b) for b in batch_indices(10, batch_size=4, local_epochs=1,
        ...                                 local_steps=None, rng=rng)]
        [4, 4, 2]
    """
    return list(
        iter_batch_indices(
            num_samples,
            batch_size=batch_size,
            local_epochs=local_epochs,
            local_steps=local_steps,
            rng=rng,
        )
    )


def iter_batch_indices(
    num_samples: int,
    *,
    batch_size: int,
    local_epochs: int,
    local_steps: int | None,
    rng: np.random.Generator,
) -> Iterator[npt.NDArray[np.int64]]:
    """Yield the mini-batch index arrays of :func:`batch_indices`, one at a time.

    Same arrays, same order and same draws from ``rng``; memory holds one epoch's
    permutation, not the whole run's batches (``local_epochs`` × samples).
    """
    steps = 0
    epochs = 0
    while True:
        perm = rng.permutation(num_samples)
        for start in range(0, num_samples, batch_size):
            yield perm[start : start + batch_size]
            steps += 1
            if local_steps is not None and steps >= local_steps:
                return
        epochs += 1
        if local_steps is None and epochs >= local_epochs:
            return


def iterate_batches(
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.int64],
    *,
    batch_size: int,
    local_epochs: int,
    local_steps: int | None,
    rng: np.random.Generator,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield the (inputs, labels) tensors of a local run's mini-batches.

    The order is :func:`batch_indices`'; the batches are drawn lazily (one
    epoch's permutation in memory), and tensors view read-only numpy data.
    """
    xt = torch.from_numpy(np.asarray(x))
    yt = torch.from_numpy(np.asarray(y))
    for idx in iter_batch_indices(
        len(y),
        batch_size=batch_size,
        local_epochs=local_epochs,
        local_steps=local_steps,
        rng=rng,
    ):
        it = torch.from_numpy(idx)
        yield xt.index_select(0, it), yt.index_select(0, it)


def local_sgd(
    model: FlatModel,
    start: npt.NDArray[np.float32],
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.int64],
    *,
    lr: float,
    batch_size: int,
    local_epochs: int = 1,
    local_steps: int | None = None,
    rng: np.random.Generator,
    prox_weight: float = 0.0,
    prox_center: npt.NDArray[np.float32] | None = None,
) -> LocalTrainResult:
    """Run local mini-batch SGD from ``start`` on ``(x, y)``.

    Args:
        model: The actor's flat model (its parameters are overwritten).
        start: Initial flat parameters, float32 (dim,).
        x: Train inputs, float32 (n, *input_shape).
        y: Train labels, int64 (n,).
        lr: Learning rate η.
        batch_size: Mini-batch size B.
        local_epochs: Epochs E.
        local_steps: Steps S (overrides epochs when set).
        rng: Source of the batch order.
        prox_weight: Weight μ of the proximal term (μ/2)‖w − w_c‖²; 0 = none.
        prox_center: The centre w_c, float32 (dim,); defaults to ``start``.

    Returns:
        The trained vector, mean train loss and step count.
    """
    model.load(start)
    center = None
    if prox_weight > 0.0:
        c = start if prox_center is None else prox_center
        center = torch.from_numpy(np.array(c, dtype=np.float32))
    params = model.params
    total = torch.zeros((), dtype=torch.float64)
    steps = 0
    for xb, yb in iterate_batches(
        x,
        y,
        batch_size=batch_size,
        local_epochs=local_epochs,
        local_steps=local_steps,
        rng=rng,
    ):
        loss = F.cross_entropy(model.module(xb), yb)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            torch._foreach_add_(params, grads, alpha=-lr)
            if center is not None:
                # ∇(μ/2)‖w − w_c‖² = μ (w − w_c), applied on the flat vector.
                model.flat.sub_(model.flat - center, alpha=lr * prox_weight)
        total += loss.detach()
        steps += 1
    return LocalTrainResult(model.vector(), float(total) / max(steps, 1), steps)


def evaluate(
    model: FlatModel,
    vector: npt.NDArray[np.float32],
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.int64],
    *,
    batch_size: int = 2048,
) -> tuple[float, float]:
    """Return (mean cross-entropy loss, accuracy) of ``vector`` on ``(x, y)``.

    Args:
        model: The actor's flat model (its parameters are overwritten).
        vector: Flat parameters to evaluate, float32 (dim,).
        x: Inputs, float32 (n, *input_shape).
        y: Labels, int64 (n,).
        batch_size: Evaluation batch size (memory only; no effect on values).

    Returns:
        ``(loss, accuracy)``; ``(nan, nan)`` when ``n == 0``.
    """
    n = len(y)
    if n == 0:
        return float("nan"), float("nan")
    model.load(vector)
    xt = torch.from_numpy(np.asarray(x))
    yt = torch.from_numpy(np.asarray(y))
    loss_sum = 0.0
    correct = 0
    with torch.no_grad():
        for start in range(0, n, batch_size):
            out = model.module(xt[start : start + batch_size])
            target = yt[start : start + batch_size]
            loss_sum += float(F.cross_entropy(out, target, reduction="sum"))
            correct += int((out.argmax(dim=1) == target).sum())
    return loss_sum / n, correct / n
