"""Exact client sizes with per-client Dirichlet label skew (DP-SparFL's split)."""

from __future__ import annotations

import numpy as np
import pytest

from rayfl.data.config import DataConfig
from rayfl.data.federated import build_federated
from rayfl.data.partition import sized_partition

SPARFL_SIZES = [300, 600, 1800, 2100] * 5


def test_sizes_are_exact_and_disjoint_even_when_classes_run_out():
    labels = np.repeat(np.arange(3), [50, 30, 20])  # 100 samples, unbalanced classes
    sizes = [40, 35, 20]
    parts = sized_partition(
        labels, sizes=sizes, alpha=0.1, rng=np.random.default_rng(0)
    )
    assert [len(p) for p in parts] == sizes
    union = np.concatenate(parts)
    assert len(np.unique(union)) == union.size == sum(sizes)


def test_small_alpha_skews_labels_and_iid_does_not():
    labels = np.repeat(np.arange(10), 1000)
    rng = np.random.default_rng(1)
    skewed = sized_partition(labels, sizes=[500] * 10, alpha=0.1, rng=rng)
    iid = sized_partition(labels, sizes=[500] * 10, alpha=None, rng=rng)

    def top_class_share(parts):
        return np.mean(
            [np.bincount(labels[p], minlength=10).max() / p.size for p in parts]
        )

    # Dir(0.1) over 10 classes puts most mass on one class; iid gives ~0.1 + noise.
    assert top_class_share(skewed) > 0.5
    assert top_class_share(iid) < 0.2


def test_large_alpha_matches_expected_proportions():
    labels = np.repeat(np.arange(4), 5000)
    parts = sized_partition(
        labels, sizes=[4000] * 4, alpha=1e4, rng=np.random.default_rng(2)
    )
    for p in parts:
        np.testing.assert_allclose(np.bincount(labels[p]) / p.size, 0.25, atol=0.02)


@pytest.mark.parametrize(
    ("sizes", "alpha", "match"),
    [([0, 3], 1.0, "sizes"), ([80, 30], 1.0, "sum"), ([3, 3], 0.0, "alpha")],
)
def test_bad_arguments(sizes, alpha, match):
    with pytest.raises(ValueError, match=match):
        sized_partition(
            np.zeros(100, dtype=int),
            sizes=sizes,
            alpha=alpha,
            rng=np.random.default_rng(0),
        )


def test_config_checks_client_sizes():
    with pytest.raises(ValueError, match="one size per client"):
        DataConfig(num_clients=3, client_sizes=[10, 10])
    with pytest.raises(ValueError, match="iid' or 'dirichlet"):
        DataConfig(num_clients=2, client_sizes=[10, 10], partition="shards")


def test_build_federated_gives_the_sparfl_sizes_on_digits():
    # digits has 1797 samples: scale the DP-SparFL pattern down by 20.
    sizes = [s // 20 for s in SPARFL_SIZES]
    cfg = DataConfig(
        dataset="digits",
        num_clients=20,
        partition="dirichlet",
        alpha=0.2,
        client_sizes=sizes,
    )
    data = build_federated(cfg, seed=0)
    totals = [a + b for a, b in zip(data.num_train, data.num_test, strict=True)]
    assert totals == sizes
