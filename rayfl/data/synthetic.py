"""FedProx's synthetic(α, β) federated data (Li et al. 2020, §5.1).

"Federated Optimization in Heterogeneous Networks" (MLSys 2020), reference script
``FedProx/data/synthetic_*/generate_synthetic.py``. For each client k:

- u_k ~ N(0, α), B_k ~ N(0, β) (α, β used as standard deviations, as the script's
  ``np.random.normal(0, alpha)`` does),
- v_k ~ N(B_k, 1) per coordinate, x ~ N(v_k, Σ) with Σ diagonal, Σ_jj = j^(−1.2),
- W_k ~ N(u_k, 1) of shape (dim, num_classes), b_k ~ N(u_k, 1),
- y = argmax softmax(x W_k + b_k) (= argmax of the logits).

Symbol table: α → ``alpha``, β → ``beta``, u_k → ``model_mean``, B_k →
``feature_shift``, v_k → ``feature_mean``, Σ → ``feature_variance``, (W_k, b_k) →
``weights``, ``bias``.

Implementation details:

1. Client sizes are ``floor(lognormal(4, 2)) + 50`` as in the script, then clipped to
   ``[min_samples, max_samples]``: the script's sizes are unbounded (the lognormal
   tail reaches tens of thousands), which would make one client dominate.
2. Because W_k and b_k share the mean u_k, u_k adds the same amount to every
   class logit and never changes the argmax: α changes the hidden local models but
   not the distribution of (x, y). Label heterogeneity comes from β (through v_k)
   and from the per-client draws of W_k, b_k.
3. Draw order (all from the one ``rng``): sizes, u, B, then per client v_k, W_k,
   b_k, x. The same generator state gives the same data.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def make_synthetic(
    *,
    num_clients: int,
    alpha: float,
    beta: float,
    rng: np.random.Generator,
    dim: int = 60,
    num_classes: int = 10,
    min_samples: int,
    max_samples: int,
) -> list[tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]]:
    """Generate FedProx synthetic(α, β) data, one ``(x, y)`` pair per client.

    Args:
        num_clients: Number of clients N (≥ 1).
        alpha: α ≥ 0, std of the local-model mean u_k.
        beta: β ≥ 0, std of the feature-mean shift B_k.
        rng: Source of every random draw.
        dim: Input dimension (60 in the paper).
        num_classes: Number of classes (10 in the paper).
        min_samples: Lower clip of a client's size (≥ 1).
        max_samples: Upper clip of a client's size (≥ ``min_samples``).

    Returns:
        For each client, ``x (n_k, dim) float32`` and ``y (n_k,) int64``.

    Raises:
        ValueError: A non-positive count, negative α/β, or min > max.

    Example:
        >>> data = make_synthetic(num_clients=3, alpha=1.0, beta=1.0,
        ...     rng=np.random.default_rng(0), min_samples=20, max_samples=20)
        >>> [(x.shape, y.shape) for x, y in data][0]
        ((20, 60), (20,))
    """
    if num_clients < 1 or dim < 1 or num_classes < 2:
        raise ValueError(
            f"need num_clients ≥ 1, dim ≥ 1, num_classes ≥ 2; got {num_clients}, "
            f"{dim}, {num_classes}"
        )
    if alpha < 0 or beta < 0:
        raise ValueError(f"alpha and beta must be ≥ 0, got {alpha} and {beta}")
    if not 1 <= min_samples <= max_samples:
        raise ValueError(
            f"need 1 ≤ min_samples ≤ max_samples, got {min_samples}, {max_samples}"
        )
    sizes = rng.lognormal(4.0, 2.0, num_clients).astype(np.int64) + 50
    sizes = np.clip(sizes, min_samples, max_samples)
    model_mean = rng.normal(0.0, alpha, num_clients)
    feature_shift = rng.normal(0.0, beta, num_clients)
    return [
        synthetic_client(
            rng,
            int(sizes[k]),
            model_mean=float(model_mean[k]),
            feature_shift=float(feature_shift[k]),
            dim=dim,
            num_classes=num_classes,
        )
        for k in range(num_clients)
    ]


def synthetic_client(
    rng: np.random.Generator,
    size: int,
    *,
    model_mean: float,
    feature_shift: float,
    dim: int = 60,
    num_classes: int = 10,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """Draw one client's ``size`` samples given its u_k and B_k (v_k, W_k, b_k, x).

    Args:
        rng: The client's draws, in the order v_k, W_k, b_k, x.
        size: Number of samples n_k.
        model_mean: u_k.
        feature_shift: B_k.
        dim: Input dimension.
        num_classes: Number of classes.

    Returns:
        ``x (size, dim) float32`` and ``y (size,) int64``.
    """
    feature_std = np.arange(1, dim + 1, dtype=np.float64) ** (-1.2 / 2.0)
    feature_mean = rng.normal(feature_shift, 1.0, dim)
    weights = rng.normal(model_mean, 1.0, (dim, num_classes))
    bias = rng.normal(model_mean, 1.0, num_classes)
    x = feature_mean + feature_std * rng.standard_normal((size, dim))
    y = np.argmax(x @ weights + bias, axis=1)
    return x.astype(np.float32), y.astype(np.int64)
