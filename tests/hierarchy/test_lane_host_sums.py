"""The hierarchy lane host's batched job sums equal one ``partial_sum`` per job."""

from __future__ import annotations

import numpy as np
import pytest

from rayfl.hierarchy.lanes_host import job_sums
from rayfl.learning.aggregate import partial_sum


def _jobs(rng: np.random.Generator, dim: int) -> list[tuple[list, list]]:
    """Jobs of 0 to 4 rows; some exact in float64, some not, some single rows."""
    parts = []
    for j in range(40):
        m = int(rng.integers(0, 5))
        if j % 3 == 0:  # wide exponent spread: the running sum rounds
            rows = [
                (rng.standard_normal(dim) * 10.0 ** rng.integers(-20, 20, dim)).astype(
                    np.float32
                )
                for _ in range(m)
            ]
        else:
            rows = [rng.standard_normal(dim).astype(np.float32) for _ in range(m)]
        weights = [float(rng.integers(1, 300)) for _ in range(m)]
        if j % 7 == 0:
            weights = [1.0] * m
        parts.append((rows, weights))
    return parts


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_job_sums_equal_partial_sum_per_job(seed: int) -> None:
    parts = _jobs(np.random.default_rng(seed), dim=33)
    got = job_sums(parts)
    inexact = 0
    for (rows, weights), s in zip(parts, got, strict=True):
        if not rows:
            assert s is None
            continue
        want = partial_sum(np.stack(rows), weights)
        assert s is not None
        assert s.weight == want.weight and s.count == want.count
        np.testing.assert_array_equal(s.value(), want.value())
        np.testing.assert_array_equal(s.mean(), want.mean())
        assert (s.exact64 is None) == (want.exact64 is None)
        inexact += want.exact64 is None
    assert inexact > 0  # the limb path was exercised too


def test_job_sums_of_no_rows() -> None:
    assert job_sums([([], []), ([], [])]) == [None, None]
