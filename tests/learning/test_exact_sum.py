"""Exact aggregation: grouping-independent, no overflow, exactly rounded.

Oracles: :func:`math.fsum` (a correctly rounded float64 sum) and
:class:`fractions.Fraction` (exact rationals), both independent of the limb code.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rayfl.exactsum import exact_sum
from rayfl.hierarchy.edge import apply_sums
from rayfl.learning.aggregate import partial_sum, weighted_mean

F32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
F64 = st.floats(allow_nan=False, allow_infinity=False)


def _fsum_columns(rows: np.ndarray, weights) -> list[float]:
    """Correctly rounded Σ_k fl64(w_k·v_k) per column (math.fsum)."""
    w = [float(x) for x in weights]
    return [
        math.fsum(wk * float(v) for wk, v in zip(w, col, strict=True))
        for col in np.asarray(rows, np.float64).T
    ]


def _exact_mean32(rows: np.ndarray, weights) -> np.ndarray:
    """float32(RN64(RN64(S) / W)) with S, W from Fractions (documented semantics)."""
    w = [Fraction(float(x)) for x in weights]
    total_w = sum(w, Fraction(0))
    out = []
    for col in np.asarray(rows, np.float64).T:
        s = sum(
            (wk * Fraction(float(wk_v)) for wk, wk_v in zip(w, col, strict=True)),
            Fraction(0),
        )
        s64 = float(s)  # correctly rounded (as fsum of exact products)
        out.append(float(Fraction(s64) / Fraction(float(total_w))))
    return np.asarray(out, np.float64).astype(np.float32)


@st.composite
def stacks(draw, elements=F32, dtype=np.float32, max_rows=12):
    m = draw(st.integers(1, max_rows))
    d = draw(st.integers(1, 6))
    rows = draw(hnp.arrays(dtype, (m, d), elements=elements))
    weights = draw(
        st.lists(
            st.one_of(st.integers(1, 10**6).map(float), st.floats(1e-3, 1e6)),
            min_size=m,
            max_size=m,
        )
    )
    return rows, weights


@settings(max_examples=200, deadline=None)
@given(data=stacks(), seed=st.integers(0, 2**32 - 1))
def test_any_grouping_and_order_gives_identical_bits(data, seed):
    rows, weights = data
    whole = partial_sum(rows, weights)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(rows))
    cuts = np.sort(rng.integers(0, len(rows) + 1, size=rng.integers(0, 4)))
    groups = np.split(order, cuts)
    parts = [partial_sum(rows[g], [weights[i] for i in g]) for g in groups]
    rng.shuffle(parts)
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    assert total.count == whole.count and total.weight == whole.weight
    assert whole.value().tobytes() == total.value().tobytes()
    assert whole.mean().tobytes() == total.mean().tobytes()


@settings(max_examples=200, deadline=None)
@given(data=stacks())
def test_sum_is_the_correctly_rounded_fsum(data):
    rows, weights = data
    got = partial_sum(rows, weights).value()
    assert got.tolist() == _fsum_columns(rows, weights)


@settings(max_examples=100, deadline=None)
@given(data=stacks(elements=F64, dtype=np.float64, max_rows=6))
def test_float64_rows_over_the_whole_range_match_fractions(data):
    rows, weights = data
    weights = [1.0] * len(rows)  # w·v must stay finite
    s = exact_sum(rows, weights)
    for col, got in zip(rows.T, s.value(), strict=True):
        exact = sum((Fraction(float(v)) for v in col), Fraction(0))
        try:
            want = float(exact)
        except OverflowError:
            want = math.inf if exact > 0 else -math.inf
        assert got == want


@settings(max_examples=100, deadline=None)
@given(data=stacks())
def test_mean_is_the_rounded_exact_mean(data):
    rows, weights = data
    assert np.array_equal(
        partial_sum(rows, weights).mean(), _exact_mean32(rows, weights)
    )


@pytest.mark.parametrize(
    ("rows", "weights", "want"),
    [
        ([[9e8], [9e8], [9e8]], [1, 1, 1], 9e8),  # wrapped to −5.3e8 in int64
        ([[2.0**31]], [1.0], 2.0**31),  # raised OverflowError (≥ 2³⁰)
        ([[1e30], [1e30]], [600, 600], 1e30),
        ([[3.4028235e38], [3.4028235e38]], [1.0, 3.0], 3.4028235e38),
        ([[1e30], [1.0], [-1e30]], [1, 1, 1], 1 / 3),  # cancellation, exactly
        ([[1e-45], [1e-45]], [1, 1], 1e-45),  # float32 subnormals kept exactly
    ],
)
def test_huge_and_tiny_finite_values(rows, weights, want):
    rows32 = np.asarray(rows, np.float32)
    got = weighted_mean(rows32, np.asarray(weights, np.float64))
    assert got.tolist() == [float(np.float32(want))]
    assert np.array_equal(got, _exact_mean32(rows32, weights))


def test_float64_range_edges():
    big = np.finfo(np.float64).max
    s = exact_sum(np.array([[big, big, 5e-324], [big, -big, 5e-324]]), [1.0, 1.0])
    assert s.value().tolist() == [math.inf, 0.0, 1e-323]
    # the mean of two float64 max does not overflow before the division
    m = exact_sum(np.array([[big], [big]]), [1.0, 1.0])
    assert m.mean().tolist() == [math.inf]  # float32 cannot hold it
    assert (m + exact_sum(np.array([[-big]]), [1.0])).value().tolist() == [big]


def test_non_finite_rows_and_zero_weights_are_refused():
    with pytest.raises(ValueError, match="not finite"):
        partial_sum(np.array([[1.0, np.nan]], np.float32), [1.0])
    with pytest.raises(ValueError, match="not finite"):
        partial_sum(np.array([[np.inf]], np.float32), [1.0])
    with pytest.raises(ValueError, match="sum to > 0"):
        partial_sum(np.ones((1, 2), np.float32), [0.0]).mean()


def test_many_rows_carry_between_limbs():
    # 5000 rows of the largest digit: the block sums carry into new limbs.
    rows = np.full((5000, 3), np.float32(2.0**47 - 2.0**23), np.float32)
    rows[:, 1] *= -1
    rows[:, 2] = np.float32(1e-30)
    s = partial_sum(rows, np.full(5000, 7.0))
    assert s.value().tolist() == _fsum_columns(rows, [7.0] * 5000)


def test_edge_apply_sums_matches_one_sum():
    rng = np.random.default_rng(3)
    rows = (rng.normal(size=(9, 50)) * 10.0 ** rng.integers(-20, 20, (9, 50))).astype(
        np.float32
    )
    w = rng.integers(1, 600, 9).astype(float)
    model = rng.normal(size=50).astype(np.float32)
    parts = (partial_sum(rows[:4], w[:4]), None, partial_sum(rows[4:], w[4:]))
    new, count = apply_sums(model, parts)
    assert count == 9
    assert np.array_equal(new, (model + partial_sum(rows, w).mean()).astype(np.float32))


def _limb_path(monkeypatch):
    """Force every sum onto the limb path (no float64 fast path)."""
    import rayfl.exactsum.limbs as es

    monkeypatch.setattr(es, "_exact_running_sum", lambda x: None)


@settings(max_examples=150, deadline=None)
@given(data=stacks(), split=st.integers(0, 12))
def test_fast_path_gives_the_limb_paths_bits(data, split):
    # The oracle is the limb path (itself checked against fsum and Fraction
    # above): value, mean and a sum of two parts, mixing the paths.
    rows, weights = data
    fast = partial_sum(rows, weights)
    k = min(split, len(rows) - 1)
    parts = partial_sum(rows[:k], weights[:k]) + partial_sum(rows[k:], weights[k:])
    with pytest.MonkeyPatch.context() as mp:
        _limb_path(mp)
        slow = partial_sum(rows, weights)
        slow_parts = partial_sum(rows[:k], weights[:k]) + partial_sum(
            rows[k:], weights[k:]
        )
        want_value, want_mean = slow.value(), slow.mean()
        want_parts = slow_parts.mean()
    assert np.array_equal(fast.value(), want_value)
    assert np.array_equal(fast.mean().view(np.int32), want_mean.view(np.int32))
    assert np.array_equal(parts.mean().view(np.int32), want_parts.view(np.int32))
    # a fast sum added to a limb sum (as a pre-reduced host's sum may be)
    mixed = fast + slow_parts
    assert np.array_equal(mixed.value(), (slow + slow_parts).value())


def test_fast_path_fires_for_model_updates_and_not_for_cancellation():
    rng = np.random.default_rng(0)
    updates = (rng.normal(size=(4, 2410)) * 0.05).astype(np.float32)
    s = partial_sum(updates, [120.0, 150.0, 99.0, 178.0])
    assert s.exact64 is not None and s.limbs is None
    # 1e30 + 1 − 1e30: the float64 running sum loses the 1.0 → limb path
    c = exact_sum(np.array([[1e30], [1.0], [-1e30]]), [1.0, 1.0, 1.0])
    assert c.exact64 is None and c.value().tolist() == [1.0]
    # −0.0 rows sum to +0.0 on both paths
    z = partial_sum(np.array([[-0.0]], np.float32), [1.0])
    assert np.signbit(z.value()).tolist() == [False]


def test_group_running_sums_are_exact_sums_or_say_not():
    """group_running_sums (the star columns' lanes): each sum is exact_sum's, or flagged."""
    from rayfl.exactsum import group_running_sums

    rng = np.random.default_rng(0)
    lanes, k, dim = 40, 4, 50
    row = np.repeat(np.arange(lanes), k)
    keep = rng.random(len(row)) > 0.3
    keep[4:6] = True
    updates = (rng.normal(size=(len(row), dim)) * 1e-2).astype(np.float32)
    updates[5] *= 1e12  # lane 1 cannot be summed exactly in float64
    updates[8:12] = -0.0  # lane 2: −0.0 rows sum to +0.0
    keep[8:12] = True
    weights = rng.integers(20, 200, size=len(row)).astype(float)
    sel = np.flatnonzero(keep)
    count = np.bincount(row[sel], minlength=lanes)
    sums, exact = group_running_sums(row[sel], count, updates[sel], weights[sel])
    assert not exact[1] and exact.sum() == lanes - 1
    for lane in np.flatnonzero(exact):
        mine = sel[row[sel] == lane]
        oracle = exact_sum(updates[mine], weights[mine]).value() if len(mine) else 0.0
        np.testing.assert_array_equal(sums[lane], oracle)
    assert not np.signbit(sums[2]).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_group_running_sums_blocks_change_nothing(monkeypatch, dtype):
    """Cache blocks of a few groups give the one-block sums and flags, bit for bit."""
    import rayfl.exactsum.fast as ex

    rng = np.random.default_rng(3)
    groups, dim = 23, 37
    count = rng.integers(0, 5, size=groups)
    row = np.repeat(np.arange(groups), count)
    updates = np.round(rng.normal(size=(len(row), dim)) * 64) / 64  # exact sums
    updates[rng.random(len(row)) < 0.3] *= np.pi * 1e12  # inexact ones
    updates[rng.random(updates.shape) < 0.1] = -0.0
    updates[3, 0], updates[7, 1] = np.nan, np.inf
    updates = updates.astype(dtype)
    ones = dtype == np.float64  # the float64, weight-1 path (no multiply)
    weights = np.ones(len(row)) if ones else rng.integers(1, 300, len(row)) * 1.0
    whole = ex.group_running_sums(row, count, updates, weights)
    assert 0 < whole[1][count > 1].sum() < (count > 1).sum()  # both kinds occur
    monkeypatch.setattr(ex, "_BLOCK_BYTES", 8 * dim * 3)  # three groups a block
    blocks = ex.group_running_sums(row, count, updates, weights)
    np.testing.assert_array_equal(blocks[1], whole[1])
    np.testing.assert_array_equal(blocks[0], whole[0])
    assert (np.signbit(blocks[0]) == np.signbit(whole[0])).all()
    assert not np.signbit(whole[0][count == 0]).any()


def test_plain_divisions_equals_the_elementwise_rule():
    """plain_divisions (two reductions per row) == every non-zero quotient in range."""
    from rayfl.exactsum.fast import _PLAIN_RANGE, plain_divisions

    lo, hi = _PLAIN_RANGE
    rng = np.random.default_rng(1)
    totals = rng.normal(size=(12, 6)) * 10.0 ** rng.integers(-300, 300, size=(12, 1))
    totals[0] = 0.0  # all zero: plain
    totals[1, 2] = 5e-324  # a subnormal element
    totals[2, 0] = 1e300  # a quotient beyond hi for a small divisor
    totals[3, :3] = 0.0
    divisors = 10.0 ** rng.uniform(-5, 5, size=12)
    divisors[2] = 1e-30
    divisors[4] = 0.0  # outside the range
    divisors[5] = 2.0**961  # beyond hi
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        want = []
        for t, d in zip(totals, divisors, strict=True):
            q = np.abs(t[t != 0]) / d
            ok = lo <= d <= hi and (q.size == 0 or (q.min() >= lo and q.max() <= hi))
            want.append(bool(ok))
    assert plain_divisions(totals, divisors).tolist() == want
    assert want[0] and not want[1] and not want[2] and not want[4] and not want[5]
