"""Tests of the keyed block streams (rayfl.wireless.streams).

The oracle is numpy's own seeding: step k of client i is row k mod 64 of
``np.random.default_rng([seed, purpose id, k // 64, i]).random((64, W))``,
whatever the order the steps are asked in and whoever else is followed.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from rayfl.seeding import PURPOSES
from rayfl.wireless.streams import BLOCK_STEPS, BlockStream, standard_normal


def test_each_step_is_the_keyed_row_of_its_block():
    # Arrange
    clients = [7, 2, 40]
    stream = BlockStream(5, "mobility", clients, width=3)
    steps = np.array([0, 63, 64, 200, 1])
    # Act: rows asked out of order and twice
    got = [stream.draw(np.array([r % 3]), steps[[r]])[0] for r in range(5)]
    # Assert
    for r, step in enumerate(steps):
        client = clients[r % 3]
        key = [5, PURPOSES["mobility"], int(step) // BLOCK_STEPS, client]
        block = np.random.default_rng(key).random((BLOCK_STEPS, 3))
        np.testing.assert_array_equal(got[r], block[step % BLOCK_STEPS])


def test_standard_normal_is_normal_and_finite_at_zero():
    u = np.random.default_rng(0).random(10**5)
    assert stats.kstest(standard_normal(u), "norm").pvalue > 1e-3
    assert np.isfinite(standard_normal(np.array([0.0, 1.0 - 2.0**-53]))).all()
