"""Partitioners: split one sample pool over clients (names follow Flower Datasets).

Every partitioner returns ``list[np.ndarray]``: one ``(n_k,) int64`` array of sample
indices per client, disjoint across clients and shuffled within a client. Every
random draw comes from the ``rng`` argument.

Sources: Flower Datasets (``flwr_datasets/partitioner/``: ``IidPartitioner``,
``DirichletPartitioner``, ``ShardPartitioner``, ``LinearPartitioner``,
``SizePartitioner``); Dirichlet label skew of Yurochkin et al. 2019
(arXiv:1905.12022) as in Flower; shards of McMahan et al. 2017 (arXiv:1602.05629,
§3); the pathological "pat" split of PFLlib (TsingZ0/PFLlib
``utils/dataset_utils.py``, ``balance=True``).

Implementation details:

1. ``pathological_partition`` deals classes cyclically: client slot i gets classes
   ``order[(i·c + j) mod K]`` for j < c over a random class order, and the slots are
   dealt to clients in random order, so every client has exactly c distinct classes
   and every class is held by ⌊N·c/K⌋ or ⌈N·c/K⌉ clients (PFLlib's greedy loop gives
   the same groups for N·c divisible by K, e.g. 20 clients × 2 of 10 classes → each
   class over 4 clients). Each class is split evenly (±1) over its holders; classes
   with no holder (N·c < K) are dropped.
2. ``train_test_split_per_client`` puts ⌈f·n⌉ samples in test, like scikit-learn's
   ``train_test_split`` that PFLlib uses, clamped to [1, n − 1] when n ≥ 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

Indices = npt.NDArray[np.int64]


def _labels_1d(labels: npt.ArrayLike) -> npt.NDArray[np.int64]:
    array = np.asarray(labels)
    if array.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {array.shape}")
    return array.astype(np.int64, copy=False)


def _check_counts(num_samples: int, num_clients: int) -> None:
    if num_clients < 1 or num_samples < num_clients:
        raise ValueError(
            f"need 1 ≤ num_clients ≤ num_samples, got num_clients={num_clients} "
            f"and {num_samples} samples"
        )


def iid_partition(
    num_samples: int, *, num_clients: int, rng: np.random.Generator
) -> list[Indices]:
    """Split ``range(num_samples)`` uniformly at random into equal parts (± 1).

    Args:
        num_samples: Pool size n.
        num_clients: Number of clients N ≤ n.
        rng: Source of the permutation.

    Returns:
        N index arrays; the first ``n mod N`` clients get one extra sample.

    Raises:
        ValueError: N < 1 or N > n.

    Example:
        >>> parts = iid_partition(10, num_clients=3, rng=np.random.default_rng(0))
        >>> [len(p) for p in parts]
        [4, 3, 3]
    """
    _check_counts(num_samples, num_clients)
    permutation = rng.permutation(num_samples).astype(np.int64)
    return list(np.array_split(permutation, num_clients))


def dirichlet_partition(
    labels: npt.ArrayLike,
    *,
    num_clients: int,
    alpha: float,
    min_partition_size: int = 10,
    self_balancing: bool = False,
    rng: np.random.Generator,
    max_retries: int = 10,
) -> list[Indices]:
    """Label skew: each class is shared over clients with proportions ~ Dir(α).

    As Flower's ``DirichletPartitioner``: per class, draw p ~ Dir(α·1_N), cut the
    (shuffled) class members at ``floor(cumsum(p)·n_class)``; with
    ``self_balancing``, clients already above n/N get no more samples. The whole
    draw is repeated until every client has ≥ ``min_partition_size`` samples.

    Args:
        labels: ``(n,)`` integer labels of the pool.
        num_clients: Number of clients N.
        alpha: Concentration α > 0; small α (0.1) is very skewed, large α (100)
            is close to iid.
        min_partition_size: Minimum samples per client.
        self_balancing: Stop giving samples to clients above n/N (Flower's
            default is True; ours is False, the plain Yurochkin et al. scheme).
        rng: Source of every draw.
        max_retries: Redraws allowed after the first draw.

    Returns:
        N index arrays covering the pool.

    Raises:
        ValueError: α ≤ 0, too few samples, or no valid draw within the retries.

    Example:
        >>> labels = np.repeat(np.arange(4), 25)
        >>> parts = dirichlet_partition(labels, num_clients=4, alpha=1.0,
        ...     min_partition_size=5, rng=np.random.default_rng(0))
        >>> sum(len(p) for p in parts)
        100
    """
    labels = _labels_1d(labels)
    _check_counts(labels.size, num_clients)
    if alpha <= 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    if num_clients * min_partition_size > labels.size:
        raise ValueError(
            f"dirichlet_partition: {num_clients} clients × min_partition_size "
            f"{min_partition_size} > {labels.size} samples; lower min_partition_size"
        )
    average = labels.size / num_clients
    smallest = 0
    for _ in range(max_retries + 1):
        parts: list[list[Indices]] = [[] for _ in range(num_clients)]
        sizes = np.zeros(num_clients, dtype=np.int64)
        for label in np.unique(labels):
            members = rng.permutation(np.flatnonzero(labels == label))
            proportions = rng.dirichlet(np.full(num_clients, float(alpha)))
            if self_balancing:
                proportions = np.where(sizes > average, 0.0, proportions)
                if proportions.sum() == 0:  # underflow: share among eligible clients
                    proportions = (sizes <= average).astype(np.float64)
                proportions = proportions / proportions.sum()
            cuts = (np.cumsum(proportions) * members.size).astype(np.int64)[:-1]
            for client, chunk in enumerate(np.split(members, cuts)):
                parts[client].append(chunk)
                sizes[client] += chunk.size
        smallest = int(sizes.min())
        if smallest >= min_partition_size:
            return [rng.permutation(np.concatenate(p)).astype(np.int64) for p in parts]
    raise ValueError(
        f"dirichlet_partition: after {max_retries + 1} draws with alpha={alpha}, "
        f"some client still had fewer than min_partition_size={min_partition_size} "
        f"samples (smallest: {smallest} of {labels.size} over {num_clients} "
        "clients); use a smaller min_partition_size, a larger alpha or fewer clients"
    )


def shard_partition(
    labels: npt.ArrayLike,
    *,
    num_clients: int,
    num_shards_per_partition: int,
    shard_size: int | None = None,
    rng: np.random.Generator,
) -> list[Indices]:
    """McMahan et al. 2017 shards: sort by label, cut into shards, deal them out.

    Samples are shuffled, stably sorted by label and cut into ``n // shard_size``
    consecutive shards; each client gets ``num_shards_per_partition`` distinct
    shards drawn at random (Flower's ``ShardPartitioner``). Leftover shards and
    samples are unused.

    Args:
        labels: ``(n,)`` integer labels of the pool.
        num_clients: Number of clients N.
        num_shards_per_partition: Shards per client s (2 in McMahan et al.).
        shard_size: Samples per shard; None means ``n // (N·s)``.
        rng: Source of every draw.

    Returns:
        N index arrays of exactly ``s·shard_size`` samples each.

    Raises:
        ValueError: Fewer than ``N·s·shard_size`` samples or a size < 1.

    Example:
        >>> labels = np.repeat(np.arange(4), 5)
        >>> parts = shard_partition(labels, num_clients=2,
        ...     num_shards_per_partition=2, shard_size=5, rng=np.random.default_rng(0))
        >>> [len(p) for p in parts]
        [10, 10]
    """
    labels = _labels_1d(labels)
    _check_counts(labels.size, num_clients)
    num_needed = num_clients * num_shards_per_partition
    if num_shards_per_partition < 1:
        raise ValueError(
            f"num_shards_per_partition must be ≥ 1, got {num_shards_per_partition}"
        )
    if shard_size is None:
        shard_size = labels.size // num_needed
    if shard_size < 1 or num_needed * shard_size > labels.size:
        raise ValueError(
            f"shard_partition needs {num_clients} clients × "
            f"{num_shards_per_partition} shards × shard_size {shard_size} samples "
            f"but the pool has {labels.size}; lower shard_size, "
            "num_shards_per_partition or num_clients"
        )
    permutation = rng.permutation(labels.size)
    order = permutation[np.argsort(labels[permutation], kind="stable")]
    num_shards = labels.size // shard_size
    shards = order[: num_shards * shard_size].reshape(num_shards, shard_size)
    chosen = rng.permutation(num_shards)[:num_needed].reshape(num_clients, -1)
    return [rng.permutation(shards[row].ravel()).astype(np.int64) for row in chosen]


def pathological_partition(
    labels: npt.ArrayLike,
    *,
    num_clients: int,
    classes_per_client: int,
    rng: np.random.Generator,
) -> list[Indices]:
    """PFLlib "pat" split: every client holds exactly c classes, balanced.

    See implementation detail 1 in the module docstring.

    Args:
        labels: ``(n,)`` integer labels of the pool (K distinct classes).
        num_clients: Number of clients N.
        classes_per_client: c, with 1 ≤ c ≤ K.
        rng: Source of every draw.

    Returns:
        N index arrays; client k's samples have exactly c distinct labels.

    Raises:
        ValueError: c outside [1, K] or a class with fewer samples than holders.

    Example:
        >>> labels = np.repeat(np.arange(4), 6)
        >>> parts = pathological_partition(labels, num_clients=4,
        ...     classes_per_client=2, rng=np.random.default_rng(0))
        >>> [len(np.unique(labels[p])) for p in parts]
        [2, 2, 2, 2]
    """
    labels = _labels_1d(labels)
    _check_counts(labels.size, num_clients)
    classes = np.unique(labels)
    if not 1 <= classes_per_client <= classes.size:
        raise ValueError(
            f"classes_per_client must be in [1, {classes.size}] (the number of "
            f"classes), got {classes_per_client}"
        )
    slots = np.arange(num_clients)[:, None] * classes_per_client
    slots = (slots + np.arange(classes_per_client)) % classes.size
    client_classes = rng.permutation(classes)[slots][rng.permutation(num_clients)]
    parts: list[list[Indices]] = [[] for _ in range(num_clients)]
    for label in classes:
        holders = np.flatnonzero((client_classes == label).any(axis=1))
        if holders.size == 0:
            continue
        members = rng.permutation(np.flatnonzero(labels == label))
        if holders.size > members.size:
            raise ValueError(
                f"class {label} has {members.size} samples for {holders.size} "
                "clients; use fewer clients or fewer classes_per_client"
            )
        for client, chunk in zip(
            holders, np.array_split(members, holders.size), strict=True
        ):
            parts[client].append(chunk)
    return [rng.permutation(np.concatenate(p)).astype(np.int64) for p in parts]


def _apportion(weights: npt.NDArray[np.float64], total: int) -> npt.NDArray[np.int64]:
    """Integer sizes ∝ weights summing to ``total`` (largest remainder), each ≥ 1."""
    quotas = weights / weights.sum() * total
    sizes = np.floor(quotas).astype(np.int64)
    remainder = total - int(sizes.sum())
    sizes[np.argsort(sizes - quotas, kind="stable")[:remainder]] += 1
    deficit = int((sizes == 0).sum())
    sizes[sizes == 0] = 1
    for _ in range(deficit):
        sizes[np.argmax(sizes)] -= 1
    return sizes


def size_skew_partition(
    num_samples: int,
    *,
    num_clients: int,
    rng: np.random.Generator,
    distribution: Literal["lognormal", "linear"] = "lognormal",
    sigma: float = 1.0,
) -> list[Indices]:
    """Quantity skew: iid samples, unequal client sizes.

    ``linear``: sizes ∝ k + 1 for client k (Flower's ``LinearPartitioner``);
    ``lognormal``: weights ~ LogNormal(0, σ) normalized to ``num_samples``. Sizes
    are rounded by largest remainder and every client gets ≥ 1 sample.

    Args:
        num_samples: Pool size n ≥ N.
        num_clients: Number of clients N.
        rng: Source of every draw.
        distribution: "lognormal" or "linear".
        sigma: σ of the lognormal weights (> 0).

    Returns:
        N index arrays covering the pool.

    Raises:
        ValueError: Unknown distribution, σ ≤ 0, or n < N.

    Example:
        >>> parts = size_skew_partition(10, num_clients=4,
        ...     rng=np.random.default_rng(0), distribution="linear")
        >>> [len(p) for p in parts]
        [1, 2, 3, 4]
    """
    _check_counts(num_samples, num_clients)
    if distribution == "linear":
        weights = np.arange(1, num_clients + 1, dtype=np.float64)
    elif distribution == "lognormal":
        if sigma <= 0:
            raise ValueError(f"sigma must be > 0, got {sigma}")
        weights = rng.lognormal(0.0, sigma, num_clients)
    else:
        raise ValueError(
            f"distribution must be 'lognormal' or 'linear', got {distribution!r}"
        )
    sizes = _apportion(weights, num_samples)
    permutation = rng.permutation(num_samples).astype(np.int64)
    return list(np.split(permutation, np.cumsum(sizes)[:-1]))


def sized_partition(
    labels: npt.ArrayLike,
    *,
    sizes: Sequence[int],
    alpha: float | None,
    rng: np.random.Generator,
) -> list[Indices]:
    """Exact client sizes with optional per-client Dirichlet label skew.

    Client n receives exactly ``sizes[n]`` samples drawn without replacement from
    the pool. With ``alpha`` set, client n first draws class proportions
    q_n ~ Dir(α·1_C) and takes ``sizes[n]·q_n`` samples of each class (largest
    remainder rounding); when a class runs out, the shortfall is taken from the
    classes with the most samples left, so sizes are always exact. With
    ``alpha=None`` the samples are iid. This is the "Dir(α) with imbalanced
    sizes" split of DP-SparFL (seed_002 §5.5: 5 × {300, 600, 1800, 2100} on
    20 clients); samples not given to any client are left out.

    Args:
        labels: ``(n,)`` integer labels of the pool.
        sizes: Samples per client, each ≥ 1, summing to at most n.
        alpha: Concentration α > 0 of the per-client class proportions, or None.
        rng: Source of every draw.

    Returns:
        One index array per client, of length ``sizes[n]``, disjoint.

    Raises:
        ValueError: A size < 1, sizes summing above n, or α ≤ 0.

    Example:
        >>> labels = np.repeat(np.arange(4), 25)
        >>> parts = sized_partition(labels, sizes=[5, 10, 30], alpha=0.5,
        ...     rng=np.random.default_rng(0))
        >>> [len(p) for p in parts]
        [5, 10, 30]
    """
    labels = _labels_1d(labels)
    sizes_arr = np.asarray(sizes, dtype=np.int64)
    if sizes_arr.size == 0 or sizes_arr.min() < 1:
        raise ValueError(f"sizes must be a non-empty list of ints >= 1, got {sizes}")
    if int(sizes_arr.sum()) > labels.size:
        raise ValueError(
            f"sizes sum to {int(sizes_arr.sum())} > {labels.size} samples in the pool"
        )
    if alpha is not None and alpha <= 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    if alpha is None:
        permutation = rng.permutation(labels.size).astype(np.int64)
        cuts = np.cumsum(sizes_arr)[:-1]
        return list(np.split(permutation[: int(sizes_arr.sum())], cuts))
    classes = np.unique(labels)
    pools = [list(rng.permutation(np.flatnonzero(labels == c))) for c in classes]
    parts: list[Indices] = []
    for size in sizes_arr.tolist():
        q = rng.dirichlet(np.full(classes.size, float(alpha)))
        want = _apportion_zero(q, size)
        left = np.array([len(pool) for pool in pools], dtype=np.int64)
        take = np.minimum(want, left)
        short = size - int(take.sum())
        while short > 0:  # fill from the classes with the most samples left
            k = int(np.argmax(left - take))
            take[k] += 1
            short -= 1
        chunks = []
        for k, count in enumerate(take.tolist()):
            chunks.append(np.asarray(pools[k][:count], dtype=np.int64))
            del pools[k][:count]
        parts.append(rng.permutation(np.concatenate(chunks)).astype(np.int64))
    return parts


def _apportion_zero(
    weights: npt.NDArray[np.float64], total: int
) -> npt.NDArray[np.int64]:
    """Integer counts ∝ weights summing to ``total`` (largest remainder, zeros kept)."""
    quotas = weights / weights.sum() * total
    counts = np.floor(quotas).astype(np.int64)
    remainder = total - int(counts.sum())
    counts[np.argsort(counts - quotas, kind="stable")[:remainder]] += 1
    return counts


def train_test_split_per_client(
    indices: Sequence[npt.ArrayLike], *, test_fraction: float, rng: np.random.Generator
) -> tuple[list[Indices], list[Indices]]:
    """Split every client's indices into train and test (75/25 in the papers).

    Args:
        indices: One index array per client.
        test_fraction: f in (0, 1); a client of n samples gets ⌈f·n⌉ test samples,
            clamped to [1, n − 1] when n ≥ 2 (n = 1 goes to train).
        rng: Source of the shuffles.

    Returns:
        ``(train, test)``: one index array per client in each list.

    Raises:
        ValueError: f outside (0, 1).

    Example:
        >>> train, test = train_test_split_per_client(
        ...     [np.arange(8), np.arange(8, 12)], test_fraction=0.25,
        ...     rng=np.random.default_rng(0))
        >>> [len(t) for t in train], [len(t) for t in test]
        ([6, 3], [2, 1])
    """
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    train: list[Indices] = []
    test: list[Indices] = []
    for client_indices in indices:
        shuffled = rng.permutation(np.asarray(client_indices, dtype=np.int64))
        n = shuffled.size
        num_test = int(np.ceil(test_fraction * n - 1e-9))
        num_test = min(max(num_test, 1), n - 1) if n >= 2 else 0
        train.append(shuffled[num_test:])
        test.append(shuffled[:num_test])
    return train, test
