"""Models of the papers and the flat-vector view of their parameters.

Outside of training a model is a flat float32 numpy vector (DESIGN.md). A
:class:`ModelSpec` records the names, shapes and offsets of a module's parameters,
and a :class:`FlatModel` is a torch module whose parameters are *views* into one
flat tensor, so loading a vector is a single copy and reading one is free.

Architectures (spec seed_000 §6.2):

| kind | layers | params (28×28×1, 10 classes) |
|------|--------|------------------------------|
| ``mlr`` | Linear(d→classes) | 7,850 |
| ``mlp`` | Linear(d→h₁) ReLU … Linear(h→classes); default h = (100,) | 79,510 |
| ``cnn`` | PFLlib ``FedAvgCNN``: Conv(c→32,5) ReLU Pool2 Conv(32→64,5) ReLU Pool2 FC(→512) ReLU FC(→classes) | 582,026 |

Implementation details:
    1. PFLlib's ``DNN`` ends with ``log_softmax`` and is trained with NLL; we output
       logits and train with cross-entropy, which is the same loss.
    2. Initialisation follows PyTorch's defaults (Kaiming-uniform weights with
       a=√5, uniform biases in ±1/√fan_in) but draws from an explicit
       ``torch.Generator`` keyed by the run's seed, never from the global RNG.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

# Arrays from Ray's object store are read-only; we only ever read them.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

__all__ = ["FlatModel", "ModelSpec", "build_model", "init_parameters"]


def _cnn(input_shape: Sequence[int], num_classes: int) -> nn.Module:
    channels, height, width = input_shape
    if height < 16 or width < 16:
        raise ValueError(
            f"model.kind=cnn needs images of at least 16×16, got {height}×{width}; "
            "use model.kind=mlp or mlr for this dataset"
        )
    out_h = ((height - 4) // 2 - 4) // 2
    out_w = ((width - 4) // 2 - 4) // 2
    return nn.Sequential(
        nn.Conv2d(channels, 32, kernel_size=5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, kernel_size=5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * out_h * out_w, 512),
        nn.ReLU(),
        nn.Linear(512, num_classes),
    )


def build_model(
    kind: str,
    *,
    input_shape: Sequence[int],
    num_classes: int,
    hidden: Sequence[int] = (100,),
) -> nn.Module:
    """Build an (uninitialised) torch module of a built-in architecture.

    Args:
        kind: ``"mlr"``, ``"mlp"`` or ``"cnn"``.
        input_shape: Shape of one sample, e.g. ``(1, 28, 28)`` or ``(60,)``.
        num_classes: Number of output classes.
        hidden: Hidden layer widths of the MLP.

    Returns:
        The module; feed it float32 batches of shape ``(batch, *input_shape)``.

    Raises:
        ValueError: For an unknown kind or a CNN on too small images.

    Example:
        >>> m = build_model("mlr", input_shape=(1, 28, 28), num_classes=10)
        >>> sum(p.numel() for p in m.parameters())
        7850
    """
    in_features = int(np.prod(input_shape))
    if kind == "mlr":
        return nn.Sequential(nn.Flatten(), nn.Linear(in_features, num_classes))
    if kind == "mlp":
        layers: list[nn.Module] = [nn.Flatten()]
        width = in_features
        for h in hidden:
            layers += [nn.Linear(width, int(h)), nn.ReLU()]
            width = int(h)
        layers.append(nn.Linear(width, num_classes))
        return nn.Sequential(*layers)
    if kind == "cnn":
        if len(input_shape) != 3:
            raise ValueError(
                f"model.kind=cnn needs image data (C, H, W), got shape {input_shape}"
            )
        return _cnn(input_shape, num_classes)
    raise ValueError(f"model.kind must be one of mlr, mlp, cnn; got {kind!r}")


def init_parameters(module: nn.Module, generator: torch.Generator) -> None:
    """Re-initialise ``module`` in place like PyTorch's defaults, from ``generator``.

    Args:
        module: A module made of ``nn.Linear`` / ``nn.Conv2d`` layers.
        generator: The explicit source of randomness.
    """
    with torch.no_grad():
        for layer in module.modules():
            if isinstance(layer, (nn.Linear, nn.Conv2d)):
                nn.init.kaiming_uniform_(
                    layer.weight, a=math.sqrt(5), generator=generator
                )
                if layer.bias is not None:
                    fan_in = layer.weight[0].numel()
                    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
                    nn.init.uniform_(layer.bias, -bound, bound, generator=generator)


@dataclass(frozen=True)
class ModelSpec:
    """Names, shapes and offsets of a module's parameters in the flat vector.

    Attributes:
        names: Parameter names in ``module.named_parameters()`` order.
        shapes: Their shapes.
        offsets: Start offsets, length ``len(names) + 1``; the last is ``dim``.
    """

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]

    @classmethod
    def of(cls, module: nn.Module) -> ModelSpec:
        """Return the spec of ``module``'s parameters."""
        names, shapes, offsets = [], [], [0]
        for name, p in module.named_parameters():
            names.append(name)
            shapes.append(tuple(p.shape))
            offsets.append(offsets[-1] + p.numel())
        return cls(tuple(names), tuple(shapes), tuple(offsets))

    @property
    def dim(self) -> int:
        """Number of parameters (length of the flat vector)."""
        return self.offsets[-1]


class FlatModel:
    """A torch module whose parameters live in one flat float32 tensor.

    Args:
        module: The module; its parameters are re-pointed into ``self.flat``.

    Example:
        >>> fm = FlatModel(build_model("mlr", input_shape=(4,), num_classes=3))
        >>> fm.load(np.arange(15, dtype=np.float32))
        >>> float(fm.module[1].bias[2])
        14.0
    """

    def __init__(self, module: nn.Module) -> None:
        self.module = module
        self.spec = ModelSpec.of(module)
        self.flat = torch.zeros(self.spec.dim, dtype=torch.float32)
        self.params: list[torch.Tensor] = []
        with torch.no_grad():
            for p, start, stop in zip(
                module.parameters(),
                self.spec.offsets[:-1],
                self.spec.offsets[1:],
                strict=False,
            ):
                view = self.flat[start:stop].view(p.shape)
                view.copy_(p.data)
                p.data = view
                self.params.append(p)

    def load(self, vector: npt.NDArray[np.float32]) -> None:
        """Copy a flat vector into the parameters (one copy)."""
        with torch.no_grad():
            self.flat.copy_(torch.from_numpy(np.asarray(vector, dtype=np.float32)))

    def vector(self) -> npt.NDArray[np.float32]:
        """Return a copy of the parameters as a flat float32 numpy vector."""
        return self.flat.detach().numpy().copy()
