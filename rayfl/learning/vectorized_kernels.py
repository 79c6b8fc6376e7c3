"""One SGD step of k clients at once, on stacked flat parameters.

Both kernels hold the stacked parameters of m clients (row i of ``vectors()`` is
stacked client i's flat vector, laid out by its :class:`ModelSpec`) and update the
first ``active`` clients in place. The gradient of stacked client i is
``Σ_j w_ij ∇ce_ij`` with ``w_ij = 1/b_i`` on its real batch rows and 0 on padding,
i.e. the mean cross-entropy gradient of its batch; with ``clip_norm`` C each
per-sample gradient ∇ce_ij is first scaled by ``min(1, C / ‖∇ce_ij‖)`` (DP-SGD,
Abadi et al. 2016, Algorithm 1, without the noise).

* :class:`MatmulKernel`: the built-in MLR/MLP (``Flatten, Linear, (ReLU, Linear)*``)
  as explicit batched matmuls (``baddbmm``) with a hand-written backward; the
  per-sample norms for clipping come from ‖a_j‖² ‖δ_j‖² per layer without
  materialising per-sample gradients (Goodfellow 2015, "Efficient per-example
  gradient computations").
* :class:`VmapKernel`: any module, with ``torch.func.functional_call`` and
  ``vmap(grad_and_value(...))`` over clients (and over samples for clipping).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

from rayfl.learning.models import ModelSpec

__all__ = ["MatmulKernel", "VmapKernel", "linear_stack_shapes"]

_TINY = 1e-12


def linear_stack_shapes(module: nn.Module) -> list[tuple[int, int]] | None:
    """Return the ``(out, in)`` weight shapes of a built-in MLR/MLP, else None.

    Args:
        module: A module; matches ``Sequential(Flatten, Linear, (ReLU, Linear)*)``
            with biases, as :func:`rayfl.learning.models.build_model` builds for
            ``mlr`` and ``mlp``.

    Returns:
        One ``(out_features, in_features)`` per Linear, or None.

    Example:
        >>> from rayfl.learning.models import build_model
        >>> linear_stack_shapes(build_model("mlp", input_shape=(4,), num_classes=3,
        ...                                 hidden=(5,)))
        [(5, 4), (3, 5)]
    """
    if not isinstance(module, nn.Sequential) or len(module) < 2:
        return None
    layers = list(module)
    if not isinstance(layers[0], nn.Flatten) or len(layers) % 2 != 0:
        return None
    shapes = []
    for pos, layer in enumerate(layers[1:]):
        want = nn.Linear if pos % 2 == 0 else nn.ReLU
        if type(layer) is not want:
            return None
        if isinstance(layer, nn.Linear):
            if layer.bias is None:
                return None
            shapes.append((layer.out_features, layer.in_features))
    return shapes


class MatmulKernel:
    """Batched-matmul SGD step of the built-in MLR/MLP.

    Each layer's weights (and biases) of all clients are one contiguous
    (m, out, in) tensor, so ``baddbmm_`` updates them in one batched call (on
    strided views into a flat (m, dim) stack it falls back to one call per client).

    Args:
        spec: The model's spec (weight, bias, weight, bias, … in order).
        shapes: ``(out, in)`` per Linear, from :func:`linear_stack_shapes`.
        starts: Initial parameters of all clients, float32 (M, dim); not modified.
        order: Rows of ``starts`` to train, stacked in this order, int64 (m,).
        centers: Proximal centres of all clients, float32 (M, dim), or None.
    """

    def __init__(
        self,
        spec: ModelSpec,
        shapes: list[tuple[int, int]],
        starts: torch.Tensor,
        order: torch.Tensor,
        centers: torch.Tensor | None = None,
    ) -> None:
        m, off = len(order), spec.offsets
        sizes = [s for shape in shapes for s in (shape, (shape[0],))]
        self.params = [
            starts[:, a:b].index_select(0, order).view(m, *size)
            for size, a, b in zip(sizes, off[:-1], off[1:], strict=True)
        ]
        self.weights, self.biases = self.params[0::2], self.params[1::2]
        self.centers = None
        if centers is not None:
            self.centers = [
                centers[:, a:b].index_select(0, order).view(p.shape)
                for p, a, b in zip(self.params, off[:-1], off[1:], strict=True)
            ]

    def vectors(self) -> torch.Tensor:
        """Return the stacked parameters, float32 (m, dim)."""
        m = self.weights[0].shape[0]
        return torch.cat([p.reshape(m, -1) for p in self.params], dim=1)

    def prox_(self, active: int, rate: torch.Tensor) -> None:
        """Apply w ← w − ημ (w − w_c) to the first ``active`` clients (rate = ημ, (k,))."""
        if self.centers is None:
            raise ValueError("prox_ needs the proximal centres at construction")
        for p, c in zip(self.params, self.centers, strict=True):
            head = p[:active]
            head.sub_((head - c[:active]).mul_(rate.view(-1, *[1] * (p.dim() - 1))))

    def step(
        self,
        active: int,
        x: torch.Tensor,
        y: torch.Tensor,
        loss_weight: torch.Tensor,
        neg_lr: torch.Tensor,
        clip_norm: float | None,
    ) -> torch.Tensor:
        """Take one SGD step for the first ``active`` stacked clients.

        Args:
            active: Number k of clients stepping (a prefix of the stack).
            x: Inputs, float32 (k, slot, *input_shape).
            y: Labels, int64 (k, slot).
            loss_weight: 1/b_i on real rows, 0 on padding, float32 (k, slot).
            neg_lr: −η_i per client, float32 (k,).
            clip_norm: Per-sample gradient clipping norm C, or None.

        Returns:
            Each client's mean batch loss, float32 (k,).
        """
        # One client runs on 2-D tensors (mm/addmm beat 1-batch bmm/baddbmm).
        single = active == 1
        mm: Callable[..., torch.Tensor]
        addmm: Callable[..., torch.Tensor]
        addmm_: Callable[..., torch.Tensor]
        if single:
            weights = [w[0] for w in self.weights]
            biases = [b[0] for b in self.biases]
            x, y, loss_weight, neg_lr = x[0], y[0], loss_weight[0], neg_lr[0]
            mm, addmm, addmm_ = torch.mm, torch.addmm, torch.Tensor.addmm_
        else:
            weights = [w[:active] for w in self.weights]
            biases = [b[:active] for b in self.biases]
            mm, addmm, addmm_ = torch.bmm, torch.baddbmm, torch.Tensor.baddbmm_
        # Column layout: activations are (…, features, slot), so the softmax
        # reduces over dim −2 (a last-dim softmax over 10 classes is ~30× slower).
        acts = [x.flatten(1 if single else 2).mT]
        last = len(weights) - 1
        for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
            z = addmm(b.unsqueeze(-1), w, acts[i])
            if i < last:
                acts.append(z.clamp_(min=0.0))
        log_p = torch.log_softmax(z, dim=-2)
        labels = y.unsqueeze(-2)
        losses = (log_p.gather(-2, labels).squeeze(-2) * loss_weight).sum(-1).neg_()
        scale = (loss_weight * neg_lr.unsqueeze(-1)).unsqueeze(-2)
        # ∂ce_j/∂z = softmax − onehot(y_j), per sample (column j)
        delta = log_p.exp_().scatter_(-2, labels, -1.0, reduce="add")
        if clip_norm is None:
            delta.mul_(scale)
        deltas = [delta]
        for i in range(last, 0, -1):
            back = mm(weights[i].mT, deltas[0])
            deltas.insert(0, torch.ops.aten.threshold_backward(back, acts[i], 0.0))
        if clip_norm is not None:
            sq_norm = torch.zeros_like(loss_weight)
            for d, a in zip(deltas, acts, strict=True):
                sq_norm += d.square().sum(-2) * (a.square().sum(-2) + 1.0)
            factor = (clip_norm / sq_norm.sqrt_().clamp_(min=_TINY)).clamp_(max=1.0)
            scale = scale * factor.unsqueeze(-2)
            deltas = [d.mul_(scale) for d in deltas]
        for w, b, d, a in zip(weights, biases, deltas, acts, strict=True):
            addmm_(w, d, a.mT)
            b.add_(d.sum(-1))
        return losses.reshape(active)


class VmapKernel:
    """``torch.func`` SGD step of any module (``vmap`` over clients).

    Args:
        module: The model; only its structure is used (``functional_call``).
        spec: Its spec.
        starts: Initial parameters of all clients, float32 (M, dim); not modified.
        order: Rows of ``starts`` to train, stacked in this order, int64 (m,).
        centers: Proximal centres of all clients, float32 (M, dim), or None.
    """

    def __init__(
        self,
        module: nn.Module,
        spec: ModelSpec,
        starts: torch.Tensor,
        order: torch.Tensor,
        centers: torch.Tensor | None = None,
    ) -> None:
        self.module = module
        self.flat = starts.index_select(0, order)
        self.centers = None if centers is None else centers.index_select(0, order)
        m = self.flat.shape[0]
        self.params = {
            name: self.flat[:, start:stop].view(m, *shape)
            for name, shape, start, stop in zip(
                spec.names,
                spec.shapes,
                spec.offsets[:-1],
                spec.offsets[1:],
                strict=True,
            )
        }
        self._plain = vmap(grad_and_value(self._batch_loss))

    def vectors(self) -> torch.Tensor:
        """Return the stacked parameters, float32 (m, dim)."""
        return self.flat

    def prox_(self, active: int, rate: torch.Tensor) -> None:
        """Apply w ← w − ημ (w − w_c) to the first ``active`` clients (rate = ημ, (k,))."""
        if self.centers is None:
            raise ValueError("prox_ needs the proximal centres at construction")
        head = self.flat[:active]
        head.sub_((head - self.centers[:active]).mul_(rate.unsqueeze(1)))

    def _batch_loss(
        self,
        params: dict[str, torch.Tensor],
        x: torch.Tensor,
        y: torch.Tensor,
        w: torch.Tensor,
    ) -> torch.Tensor:
        out = functional_call(self.module, params, (x,))
        return (F.cross_entropy(out, y, reduction="none") * w).sum()

    def _sample_loss(
        self, params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor
    ) -> torch.Tensor:
        out = functional_call(self.module, params, (x.unsqueeze(0),))
        return F.cross_entropy(out, y.unsqueeze(0))

    def _clipped(
        self,
        params: dict[str, torch.Tensor],
        x: torch.Tensor,
        y: torch.Tensor,
        w: torch.Tensor,
        clip_norm: float,
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        per_sample = vmap(grad_and_value(self._sample_loss), in_dims=(None, 0, 0))
        grads, ce = per_sample(params, x, y)
        sq_norm = sum(g.reshape(g.shape[0], -1).square().sum(1) for g in grads.values())
        factor = (clip_norm / torch.sqrt(sq_norm).clamp(min=_TINY)).clamp(max=1.0) * w
        clipped = {n: torch.tensordot(factor, g, dims=1) for n, g in grads.items()}
        return clipped, (ce * w).sum()

    def step(
        self,
        active: int,
        x: torch.Tensor,
        y: torch.Tensor,
        loss_weight: torch.Tensor,
        neg_lr: torch.Tensor,
        clip_norm: float | None,
    ) -> torch.Tensor:
        """Take one SGD step for the first ``active`` stacked clients.

        Args and Returns are those of :meth:`MatmulKernel.step`.
        """
        params = {name: p[:active] for name, p in self.params.items()}
        if clip_norm is None:
            grads, losses = self._plain(params, x, y, loss_weight)
        else:
            fn = vmap(partial(self._clipped, clip_norm=clip_norm))
            grads, losses = fn(params, x, y, loss_weight)
        for name, p in params.items():
            lr = neg_lr.view(active, *([1] * (p.dim() - 1)))
            p.addcmul_(grads[name], lr)
        return losses.detach()
