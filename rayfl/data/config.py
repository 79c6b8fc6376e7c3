"""``DataConfig``: which dataset, how it is split over clients, and per-client splits.

The ``data:`` section of a run's YAML. Defaults give a quick offline run: scikit-learn
digits, 20 iid clients, 75/25 per-client train/test split of the merged pool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rayfl.text_checks import check_path, clip

DATASET_SIZES = {
    "fashion_mnist": 70_000,
    "mnist": 70_000,
    "cifar10": 60_000,
    "digits": 1797,
}
"""Samples (train + test) of each built-in dataset: an upper bound on num_clients."""

SYNTHETIC_MIN_SAMPLES = 50
"""Fewest samples the synthetic generator gives a client (FedProx's sizes start at
50); ``max_samples_per_client`` below it is refused for synthetic data."""


class DataConfig(BaseModel):
    """Dataset, partition over clients and per-client train/test split."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    dataset: Literal["fashion_mnist", "mnist", "cifar10", "digits", "synthetic"] = (
        Field(
            "digits",
            description="Dataset: real ones are read from local files (no downloads); "
            "'synthetic' is FedProx synthetic(α, β).",
        )
    )
    root: str | None = Field(
        None,
        description="Directory with user data in torchvision layout "
        "(MNIST/raw, FashionMNIST/raw, cifar-10-batches-py); None = system defaults. "
        "Read by fashion_mnist, mnist and cifar10 only. The driver (the process "
        "running rayfl) loads and partitions the data, so a root that is not a "
        "directory there is refused at validation, before Ray starts; a root "
        "without the dataset's files is refused when the data is loaded (never "
        "replaced by the system copy).",
    )
    num_clients: int = Field(
        20, le=1_000_000, description="Number of clients N, 1..1e6."
    )
    partition: Literal["iid", "dirichlet", "shards", "pathological", "size_skew"] = (
        Field("iid", description="How the pool is split over clients (Flower names).")
    )
    alpha: float = Field(
        0.5, description="Dirichlet concentration α (> 0); small α = strong skew."
    )
    min_partition_size: int = Field(
        10, description="Dirichlet: minimum samples per client before the split (≥ 0)."
    )
    self_balancing: bool = Field(
        False, description="Dirichlet: stop filling clients above the mean size."
    )
    num_shards_per_partition: int = Field(
        2, description="Shards: shards per client (2 in McMahan et al. 2017; ≥ 1)."
    )
    shard_size: int | None = Field(
        None,
        description="Shards: samples per shard (≥ 1); None = pool size // "
        "(num_clients · num_shards_per_partition).",
    )
    classes_per_client: int = Field(
        2, description="Pathological: distinct classes per client (≥ 1)."
    )
    size_distribution: Literal["lognormal", "linear"] = Field(
        "lognormal",
        description="Size skew: lognormal weights, or sizes ∝ client index + 1.",
    )
    size_sigma: float = Field(
        1.0, description="Size skew: σ of the lognormal weights (> 0)."
    )
    pool: Literal["all", "train"] = Field(
        "all",
        description="'all': merge the official train and test sets, partition, then "
        "split each client (PFLlib and the papers); 'train': partition only the "
        "official train set.",
    )
    test_fraction: float = Field(
        0.25, description="Per-client test share in (0, 1); 0.25 gives 75/25."
    )
    max_samples_per_client: int | None = Field(
        None,
        description="Cap on a client's samples after partitioning (≥ 2), before the "
        "train/test split; None = no cap. For synthetic data it also caps the "
        "generated sizes.",
    )
    client_sizes: list[int] | None = Field(
        None,
        description="Exact samples per client (before the train/test split), one "
        "per client; with partition 'dirichlet' each client also draws its class "
        "proportions from Dir(alpha), with 'iid' the samples are iid "
        "(rayfl.data.partition.sized_partition). DP-SparFL's split: 5 × [300, 600, "
        "1800, 2100]. None = the partition decides the sizes.",
    )
    population: Literal["partition", "resampled"] = Field(
        "partition",
        description="'partition': the pool is split over the clients (each sample "
        "in one client, num_clients ≤ the pool's samples); 'resampled': clients are "
        "generated on demand from (seed, client) and store nothing: with a real "
        "dataset each draws samples_per_client samples of the shared pool, with "
        "'synthetic' its FedProx synthetic(α, β) data is generated lazily, so "
        "num_clients may exceed the data (up to 1e6). partition, client_sizes "
        "and min_partition_size do not apply.",
    )
    samples_per_client: int = Field(
        20,
        description="Resampled real-data population: samples (train + test) each "
        "client draws from the pool (≥ 2).",
    )
    synthetic_alpha: float = Field(
        1.0, description="FedProx synthetic α (≥ 0): std of the local-model means."
    )
    synthetic_beta: float = Field(
        1.0, description="FedProx synthetic β (≥ 0): std of the feature-mean shifts."
    )

    @model_validator(mode="after")
    def _check_ranges(self) -> DataConfig:
        """Reject out-of-range values with a message naming the field."""
        checks = {  # field -> (its value is allowed, what is allowed)
            "num_clients": (self.num_clients >= 1, "≥ 1"),
            "alpha": (self.alpha > 0, "> 0"),
            "min_partition_size": (self.min_partition_size >= 0, "≥ 0"),
            "num_shards_per_partition": (self.num_shards_per_partition >= 1, "≥ 1"),
            "shard_size": (
                self.shard_size is None or self.shard_size >= 1,
                "≥ 1 or null",
            ),
            "classes_per_client": (self.classes_per_client >= 1, "≥ 1"),
            "size_sigma": (self.size_sigma > 0, "> 0"),
            "test_fraction": (0 < self.test_fraction < 1, "in (0, 1)"),
            "max_samples_per_client": (
                self.max_samples_per_client is None or self.max_samples_per_client >= 2,
                "≥ 2 or null",
            ),
            "samples_per_client": (self.samples_per_client >= 2, "≥ 2"),
            "synthetic_alpha": (self.synthetic_alpha >= 0, "≥ 0"),
            "synthetic_beta": (self.synthetic_beta >= 0, "≥ 0"),
        }
        for field, (ok, allowed) in checks.items():
            if not ok:
                value = getattr(self, field)
                raise ValueError(f"data.{field} must be {allowed}, got {value}")
        self._check_root()
        pool = DATASET_SIZES.get(self.dataset)
        resampled = self.population == "resampled"
        if pool is not None and self.num_clients > pool and not resampled:
            raise ValueError(
                f"data.num_clients must be at most the {pool} samples of "
                f"{self.dataset} (every client needs data), got {self.num_clients}; "
                "data.population=resampled has no such cap"
            )
        cap = self.max_samples_per_client
        if (
            self.dataset == "synthetic"
            and cap is not None
            and cap < SYNTHETIC_MIN_SAMPLES
        ):
            raise ValueError(
                f"data.max_samples_per_client must be >= {SYNTHETIC_MIN_SAMPLES} "
                f"for data.dataset=synthetic (its clients have {SYNTHETIC_MIN_SAMPLES} "
                f"samples or more), got {cap}"
            )
        if resampled and self.client_sizes is not None:
            raise ValueError(
                "data.client_sizes needs data.population=partition "
                "(a resampled population's sizes are samples_per_client)"
            )
        if self.client_sizes is not None:
            if len(self.client_sizes) != self.num_clients:
                raise ValueError(
                    f"data.client_sizes needs one size per client "
                    f"(num_clients={self.num_clients}), got {len(self.client_sizes)}"
                )
            if min(self.client_sizes) < 2:
                raise ValueError(
                    f"data.client_sizes must all be >= 2, got {self.client_sizes}"
                )
            if self.partition not in ("iid", "dirichlet"):
                raise ValueError(
                    "data.client_sizes works with partition 'iid' or 'dirichlet', "
                    f"got {self.partition!r}"
                )
        return self

    def _check_root(self) -> None:
        """Refuse a ``root`` that is not a directory here, or that no loader reads.

        The driver loads the data (``rayfl.data.federated.build_federated``),
        so the root must exist on the machine that validates the config, on a
        cluster too.
        """
        if self.root is None:
            return
        check_path("data.root", self.root)
        if self.dataset in ("digits", "synthetic"):
            raise ValueError(
                f"data.root is read by fashion_mnist, mnist and cifar10 only; "
                f"data.dataset={self.dataset} does not read files: remove data.root"
            )
        path = Path(self.root).expanduser()
        if not path.exists():
            raise ValueError(f"data.root: no such directory: {clip(self.root)}")
        if not path.is_dir():
            raise ValueError(
                f"data.root must be a directory (torchvision layout: MNIST/raw, "
                f"FashionMNIST/raw, cifar-10-batches-py), got the file {self.root}"
            )
