"""Local batches are drawn lazily: memory does not grow with local_epochs."""

import itertools
import time

import numpy as np
import pytest

from rayfl.learning.train import batch_indices, iter_batch_indices, iterate_batches


@pytest.mark.parametrize(
    ("n", "batch", "epochs", "steps"),
    [(10, 4, 3, None), (7, 3, 1, 11), (5, 8, 2, None)],
)
def test_lazy_batches_equal_the_list(n, batch, epochs, steps):
    kw = {"batch_size": batch, "local_epochs": epochs, "local_steps": steps}
    listed = batch_indices(n, rng=np.random.default_rng(3), **kw)
    lazy = list(iter_batch_indices(n, rng=np.random.default_rng(3), **kw))
    assert len(listed) == len(lazy)
    for a, b in zip(listed, lazy, strict=True):
        np.testing.assert_array_equal(a, b)


def test_many_epochs_start_at_once():
    # Building every batch of 1e5 epochs up front takes seconds and ~1 GB; lazily the
    # first batches come at once.
    x = np.zeros((1000, 4), np.float32)
    y = np.zeros(1000, np.int64)
    t0 = time.perf_counter()
    gen = iterate_batches(
        x,
        y,
        batch_size=10,
        local_epochs=10**5,
        local_steps=None,
        rng=np.random.default_rng(0),
    )
    first = list(itertools.islice(gen, 3))
    assert len(first) == 3 and first[0][0].shape == (10, 4)
    assert time.perf_counter() - t0 < 0.5
