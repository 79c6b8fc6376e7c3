"""``FederatedData``: the whole federated dataset in one contiguous layout.

All clients' samples live in one array ordered
``[client 0 train | client 0 test | client 1 train | client 1 test | …]``, so each
client's train and test sets are contiguous slices. After ``ray.put`` every actor
reads its clients' slices zero-copy (Ray deserializes numpy arrays inside
dataclasses as read-only views of the object store).

``build_federated`` runs: load → (merge pools) → partition → cap → per-client split.
Every random draw comes from ``np.random.default_rng([seed, PARTITION_PURPOSE])``, so
the same seed always gives the same clients, whatever the Ray packing.

Implementation details:

1. ``PARTITION_PURPOSE = PURPOSES["partition"]`` (ASCII "PART") is this module's fixed purpose
   id in DESIGN.md's (seed, purpose, round, client) key.
2. ``data.partition`` and ``data.pool`` are ignored for ``dataset="synthetic"``,
   whose clients are generated directly (FedProx synthetic(α, β)), sized
   ``lognormal(4, 2) + 50`` clipped to [``SYNTHETIC_MIN_SAMPLES``,
   ``max_samples_per_client`` or ``SYNTHETIC_MAX_SAMPLES``].
3. The cap keeps a uniformly random subset of a client's samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from rayfl.data.config import SYNTHETIC_MIN_SAMPLES, DataConfig
from rayfl.data.datasets import DatasetError, load_dataset
from rayfl.data.partition import (
    Indices,
    dirichlet_partition,
    iid_partition,
    pathological_partition,
    shard_partition,
    size_skew_partition,
    sized_partition,
    train_test_split_per_client,
)
from rayfl.data.population import build_population
from rayfl.data.synthetic import make_synthetic
from rayfl.seeding import PURPOSES, rng_for

PARTITION_PURPOSE = PURPOSES["partition"]
SYNTHETIC_MAX_SAMPLES = 1000


class ClientSource(Protocol):
    """Generates a client's samples on demand (``rayfl.data.population``)."""

    def draw(
        self,
        pool_x: npt.NDArray[np.float32],
        pool_y: npt.NDArray[np.int64],
        client: int,
        size: int,
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Return client ``client``'s ``size`` samples, train first then test."""
        ...


@dataclass(frozen=True, eq=False)
class FederatedData:
    """Every client's train and test data, stored once, client slices contiguous.

    Attributes:
        x: ``(total, *input_shape) float32`` inputs, ordered client by client,
            train then test.
        y: ``(total,) int64`` labels.
        train_slices: ``(N, 2) int64`` ``[start, stop)`` of each client's train set.
        test_slices: ``(N, 2) int64`` ``[start, stop)`` of each client's test set.
        num_classes: Number of classes.
        input_shape: Shape of one input, e.g. ``(1, 28, 28)`` or ``(60,)``.
        name: Dataset name.
        source: None for stored clients; for a population generated on demand
            (``data.population: resampled``) what draws a client's samples:
            then ``x``/``y`` are the shared pool and the slices are virtual
            (they give the sizes; ``train``/``test`` draw the samples).
    """

    x: npt.NDArray[np.float32]
    y: npt.NDArray[np.int64]
    train_slices: npt.NDArray[np.int64]
    test_slices: npt.NDArray[np.int64]
    num_classes: int
    input_shape: tuple[int, ...]
    name: str
    source: ClientSource | None = None

    def __post_init__(self) -> None:
        """Check that the slices tile ``x`` as [train_k | test_k] for k = 0..N−1."""
        n = self.train_slices.shape[0]
        if self.train_slices.shape != (n, 2) or self.test_slices.shape != (n, 2):
            raise ValueError("train_slices and test_slices must both be (N, 2)")
        if self.source is not None:  # virtual slices: sizes only
            return
        bounds = np.stack([self.train_slices, self.test_slices], axis=1).reshape(-1, 2)
        contiguous = np.array_equal(bounds[1:, 0], bounds[:-1, 1])
        if not (contiguous and bounds[0, 0] == 0 and bounds[-1, 1] == len(self.y)):
            raise ValueError("client slices must tile x as [train_0|test_0|train_1|…]")
        if np.any(bounds[:, 1] < bounds[:, 0]) or self.x.shape[0] != len(self.y):
            raise ValueError("slices must have start ≤ stop and x, y the same length")

    @property
    def num_clients(self) -> int:
        """Number of clients N."""
        return int(self.train_slices.shape[0])

    @property
    def num_train(self) -> npt.NDArray[np.int64]:
        """``(N,) int64`` train sizes."""
        return self.train_slices[:, 1] - self.train_slices[:, 0]

    @property
    def num_test(self) -> npt.NDArray[np.int64]:
        """``(N,) int64`` test sizes."""
        return self.test_slices[:, 1] - self.test_slices[:, 0]

    def train(
        self, client: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Return client ``client``'s train ``(x, y)`` (views of stored data)."""
        start, stop = (int(v) for v in self.train_slices[client])
        if self.source is not None:
            x, y = self._drawn(client)
            return x[: stop - start], y[: stop - start]
        return self.x[start:stop], self.y[start:stop]

    def test(
        self, client: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Return client ``client``'s test ``(x, y)`` (views of stored data)."""
        start, stop = (int(v) for v in self.test_slices[client])
        if self.source is not None:
            x, y = self._drawn(client)
            skip = len(y) - (stop - start)
            return x[skip:], y[skip:]
        return self.x[start:stop], self.y[start:stop]

    def _drawn(
        self, client: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Return a generated client's samples (train then test)."""
        assert self.source is not None
        size = int(self.test_slices[client, 1] - self.train_slices[client, 0])
        return self.source.draw(self.x, self.y, int(client), size)

    def label_counts(
        self, split: Literal["train", "test", "all"] = "train"
    ) -> npt.NDArray[np.int64]:
        """Count labels per client.

        Args:
            split: "train", "test" or "all" (train + test).

        Returns:
            ``(N, num_classes) int64`` counts.
        """
        slices = {"train": self.train_slices, "test": self.test_slices}
        if split == "all":
            bounds = np.stack([self.train_slices[:, 0], self.test_slices[:, 1]], 1)
        else:
            bounds = slices[split]
        client_of = np.repeat(np.arange(self.num_clients), bounds[:, 1] - bounds[:, 0])
        if self.source is not None:  # generated clients: draw each (slow for 10^6)
            parts = {"train": self.train, "test": self.test}
            labels = np.concatenate(
                [
                    self._drawn(c)[1] if split == "all" else parts[split](c)[1]
                    for c in range(self.num_clients)
                ]
            )
        else:
            labels = np.concatenate([self.y[start:stop] for start, stop in bounds])
        counts = np.zeros((self.num_clients, self.num_classes), dtype=np.int64)
        np.add.at(counts, (client_of, labels), 1)
        return counts

    def summary(self) -> dict[str, Any]:
        """Summarize sizes and label skew as plain Python values (JSON-ready).

        Returns:
            name, num_clients, num_classes, input_shape, total samples, min/mean/max
            train and test sizes, and ``label_skew_tv``: the mean over clients of
            the total-variation distance between a client's train label
            distribution and the pooled one (0 = iid, → 1 = disjoint labels).
        """
        counts = self.label_counts("train")
        local = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
        pooled = counts.sum(axis=0) / max(int(counts.sum()), 1)
        tv = 0.5 * np.abs(local - pooled).sum(axis=1)
        sizes = {"train": self.num_train, "test": self.num_test}
        return {
            "name": self.name,
            "num_clients": self.num_clients,
            "num_classes": self.num_classes,
            "input_shape": list(self.input_shape),
            "total_samples": len(self.y),
            **{
                f"{split}_{stat}": float(getattr(np, stat)(size))
                for split, size in sizes.items()
                for stat in ("min", "mean", "max")
            },
            "label_skew_tv": float(tv.mean()),
        }


def _partition(
    config: DataConfig, labels: npt.NDArray[np.int64], rng: np.random.Generator
) -> list[Indices]:
    """Dispatch ``config.partition`` on a pool with these labels."""
    n, clients = labels.size, config.num_clients
    if config.client_sizes is not None:
        return sized_partition(
            labels,
            sizes=config.client_sizes,
            alpha=config.alpha if config.partition == "dirichlet" else None,
            rng=rng,
        )
    if config.partition == "iid":
        return iid_partition(n, num_clients=clients, rng=rng)
    if config.partition == "dirichlet":
        return dirichlet_partition(
            labels,
            num_clients=clients,
            alpha=config.alpha,
            min_partition_size=config.min_partition_size,
            self_balancing=config.self_balancing,
            rng=rng,
        )
    if config.partition == "shards":
        return shard_partition(
            labels,
            num_clients=clients,
            num_shards_per_partition=config.num_shards_per_partition,
            shard_size=config.shard_size,
            rng=rng,
        )
    if config.partition == "pathological":
        return pathological_partition(
            labels,
            num_clients=clients,
            classes_per_client=config.classes_per_client,
            rng=rng,
        )
    return size_skew_partition(
        n,
        num_clients=clients,
        rng=rng,
        distribution=config.size_distribution,
        sigma=config.size_sigma,
    )


def _client_pools(
    config: DataConfig, rng: np.random.Generator
) -> tuple[np.ndarray, npt.NDArray[np.int64], list[Indices], int, str]:
    """Return the sample pool ``(x, y)``, each client's pool indices, classes, name."""
    if config.dataset == "synthetic":
        clients = make_synthetic(
            num_clients=config.num_clients,
            alpha=config.synthetic_alpha,
            beta=config.synthetic_beta,
            rng=rng,
            min_samples=SYNTHETIC_MIN_SAMPLES,
            max_samples=max(
                config.max_samples_per_client or SYNTHETIC_MAX_SAMPLES,
                SYNTHETIC_MIN_SAMPLES,
            ),
        )
        sizes = np.array([len(y) for _, y in clients], dtype=np.int64)
        parts = np.split(np.arange(sizes.sum(), dtype=np.int64), np.cumsum(sizes)[:-1])
        x = np.concatenate([xc for xc, _ in clients])
        y = np.concatenate([yc for _, yc in clients])
        name = f"synthetic({config.synthetic_alpha:g},{config.synthetic_beta:g})"
        return x, y, list(parts), 10, name
    train, test = load_dataset(config.dataset, root=config.root)
    x, y = train.x, train.y
    if config.pool == "all":
        x, y = np.concatenate([train.x, test.x]), np.concatenate([train.y, test.y])
    try:
        parts = _partition(config, y, rng)
    except ValueError as error:
        knobs: dict[str, Any] = {"num_clients": config.num_clients}
        if config.partition == "dirichlet":
            knobs.update(
                min_partition_size=config.min_partition_size, alpha=config.alpha
            )
        fields = ", ".join(f"data.{k} (now {v})" for k, v in knobs.items())
        raise DatasetError(
            f"data.partition={config.partition} on {config.dataset} "
            f"(pool={config.pool}, {y.size} samples): {error}\n"
            f"  the config fields to change: {fields}"
        ) from error
    cap = config.max_samples_per_client
    if cap is not None:
        parts = [
            rng.choice(p, cap, replace=False) if p.size > cap else p for p in parts
        ]
    return x, y, parts, train.num_classes, config.dataset


def build_federated(config: DataConfig, *, seed: int) -> FederatedData:
    """Build the federated dataset: load → merge → partition → cap → split.

    Args:
        config: The data section of the run config.
        seed: Run seed; with ``PARTITION_PURPOSE`` it keys every draw.

    Returns:
        The dataset in the contiguous client layout, arrays read-only.

    Raises:
        DatasetError: Dataset missing/corrupt, partition impossible, or a client
            with no train or no test sample (names the client and fixes).
    """
    if config.population == "resampled":
        return FederatedData(**build_population(config, seed=seed))  # type: ignore[arg-type]  # typed fields
    rng = rng_for(seed, "partition")
    pool_x, pool_y, parts, num_classes, name = _client_pools(config, rng)
    train_parts, test_parts = train_test_split_per_client(
        parts, test_fraction=config.test_fraction, rng=rng
    )
    for client, (train, test) in enumerate(zip(train_parts, test_parts, strict=True)):
        if train.size == 0 or test.size == 0:
            raise DatasetError(
                f"client {client} has {train.size + test.size} sample(s) "
                f"({train.size} train, {test.size} test) after "
                f"data.partition={config.partition}: use fewer data.num_clients, a "
                "larger data.min_partition_size or data.alpha, or data.partition=iid"
            )
    order = np.concatenate(
        [
            np.concatenate([tr, te])
            for tr, te in zip(train_parts, test_parts, strict=True)
        ]
    )
    num_train = np.array([t.size for t in train_parts], dtype=np.int64)
    num_test = np.array([t.size for t in test_parts], dtype=np.int64)
    sizes = num_train + num_test
    starts = (np.cumsum(sizes) - sizes).astype(np.int64)
    train_slices = np.stack([starts, starts + num_train], axis=1)
    test_slices = np.stack([starts + num_train, starts + sizes], axis=1)
    x, y = pool_x[order], pool_y[order]
    for array in (x, y, train_slices, test_slices):
        array.flags.writeable = False
    return FederatedData(
        x=x,
        y=y,
        train_slices=train_slices,
        test_slices=test_slices,
        num_classes=num_classes,
        input_shape=tuple(int(d) for d in x.shape[1:]),
        name=name,
    )
