"""Populations beyond the data: clients generated on demand from (seed, client).

``data.population: resampled`` builds a :class:`~rayfl.data.federated.FederatedData`
whose clients hold no stored samples: each client's samples are drawn when an
actor asks for them (``data.train(k)``, ``data.test(k)``) from its own random
stream, so 10^6 clients cost their size columns (32 bytes each), not 10^6
datasets, and ``num_clients`` is no longer capped by the pool's size.

- A real dataset (Fashion-MNIST, MNIST, digits, CIFAR-10): client k draws
  ``data.samples_per_client`` distinct samples of the shared pool (the pool is
  stored once, in the object store), train first then test.
- ``synthetic``: client k's FedProx synthetic(α, β) data (u_k, B_k, then v_k,
  W_k, b_k, x as in :mod:`rayfl.data.synthetic`), generated lazily.

Implementation details:

1. Keys (DESIGN.md's (seed, purpose, round, client)): the synthetic sizes of
   all clients come from ``rng_for(seed, "population")`` (round 0, client 0);
   client k's samples from ``rng_for(seed, "population", round=1, client=k)``.
   The same seed gives the same clients whatever the packing or the host that
   asks, and asking twice gives the same samples.
2. Sizes: a resampled real-data client has ``samples_per_client`` samples; a
   synthetic one ``floor(lognormal(4, 2)) + 50`` clipped to [50,
   ``max_samples_per_client`` or 1000] (as the stored synthetic data). The
   test split is ``ceil(test_fraction · n)`` clipped to [1, n − 1], as
   :func:`rayfl.data.partition.train_test_split_per_client`.
3. A resampled population's clients overlap (two clients may draw the same
   pool sample), like devices sampling one distribution; within a client the
   samples are distinct (while the pool has enough).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rayfl.data.config import DataConfig
from rayfl.data.datasets import load_dataset
from rayfl.data.synthetic import synthetic_client
from rayfl.seeding import rng_for

__all__ = ["ResampledClients", "SyntheticClients", "build_population"]

SYNTHETIC_DIM = 60
SYNTHETIC_CLASSES = 10


@dataclass(frozen=True)
class ResampledClients:
    """Client k's samples: distinct indices of the shared pool, drawn by seed.

    Attributes:
        seed: The run seed.
    """

    seed: int

    def draw(
        self,
        pool_x: npt.NDArray[np.float32],
        pool_y: npt.NDArray[np.int64],
        client: int,
        size: int,
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Return client ``client``'s ``size`` samples (train first, then test)."""
        rng = rng_for(self.seed, "population", round=1, client=client)
        pool = len(pool_y)
        index = rng.choice(pool, size, replace=size > pool)
        return pool_x[index], pool_y[index]


@dataclass(frozen=True)
class SyntheticClients:
    """Client k's FedProx synthetic(α, β) samples, generated from its stream.

    Attributes:
        seed: The run seed.
        alpha: α, std of u_k.
        beta: β, std of B_k.
    """

    seed: int
    alpha: float
    beta: float

    def draw(
        self,
        pool_x: npt.NDArray[np.float32],
        pool_y: npt.NDArray[np.int64],
        client: int,
        size: int,
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Return client ``client``'s ``size`` samples (the pool is unused)."""
        rng = rng_for(self.seed, "population", round=1, client=client)
        model_mean = float(rng.normal(0.0, self.alpha))
        feature_shift = float(rng.normal(0.0, self.beta))
        return synthetic_client(
            rng,
            size,
            model_mean=model_mean,
            feature_shift=feature_shift,
            dim=SYNTHETIC_DIM,
            num_classes=SYNTHETIC_CLASSES,
        )


def _split_sizes(
    sizes: npt.NDArray[np.int64], test_fraction: float
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Return (train, test) sizes: test = ceil(f·n) clipped to [1, n − 1]."""
    test = np.ceil(test_fraction * sizes - 1e-9).astype(np.int64)
    test = np.clip(test, 1, sizes - 1)
    return sizes - test, test


def build_population(config: DataConfig, *, seed: int) -> dict[str, object]:
    """Return the fields of a resampled population's ``FederatedData``.

    Args:
        config: The data section (``population: resampled``).
        seed: Run seed.

    Returns:
        Keyword arguments of :class:`~rayfl.data.federated.FederatedData`:
        the pool ``x``/``y`` (empty for synthetic), virtual slices, the source.
    """
    n = config.num_clients
    if config.dataset == "synthetic":
        top = max(config.max_samples_per_client or 1000, 50)
        sizes = rng_for(seed, "population").lognormal(4.0, 2.0, n).astype(np.int64)
        sizes = np.clip(sizes + 50, 50, top)
        x = np.zeros((0, SYNTHETIC_DIM), np.float32)
        y = np.zeros(0, np.int64)
        source: object = SyntheticClients(
            seed, config.synthetic_alpha, config.synthetic_beta
        )
        classes = SYNTHETIC_CLASSES
        name = f"synthetic({config.synthetic_alpha:g},{config.synthetic_beta:g})"
        shape: tuple[int, ...] = (SYNTHETIC_DIM,)
    else:
        # the merged pool is a copy: then the loader's cache would be a second one
        merged = config.pool == "all"
        train, test = load_dataset(config.dataset, root=config.root, cached=not merged)
        x, y = train.x, train.y
        if config.pool == "all":
            x = np.concatenate([train.x, test.x])
            y = np.concatenate([train.y, test.y])
        sizes = np.full(n, config.samples_per_client, dtype=np.int64)
        source = ResampledClients(seed)
        classes, name = train.num_classes, f"{config.dataset} (resampled)"
        shape = tuple(int(d) for d in x.shape[1:])
    num_train, num_test = _split_sizes(sizes, config.test_fraction)
    starts = np.cumsum(sizes) - sizes
    train_slices = np.stack([starts, starts + num_train], axis=1)
    test_slices = np.stack([starts + num_train, starts + sizes], axis=1)
    for array in (train_slices, test_slices):
        array.flags.writeable = False
    return {
        "x": x,
        "y": y,
        "train_slices": train_slices,
        "test_slices": test_slices,
        "num_classes": classes,
        "input_shape": shape,
        "name": name,
        "source": source,
    }
