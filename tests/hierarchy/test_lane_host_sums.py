"""The hierarchy lane host's batched job sums equal one ``partial_sum`` per job."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from rayfl.hierarchy.lanes_host import job_sums, weight_total
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


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_edge_means_equal_apply_sums(seed: int) -> None:
    """The lanes' columnar edge averages equal ``EdgeHost``'s ``apply_sums``.

    Three "hosts" each pack their jobs' sums (:func:`pack_sums`); a pair's jobs
    are spread over the hosts, some with no upload, some on the limb path, and
    one pair has no job at all.
    """
    from rayfl.hierarchy.edge import apply_sums
    from rayfl.hierarchy.lanes_edges import EdgeSums, edge_means
    from rayfl.hierarchy.lanes_host import pack_sums

    rng = np.random.default_rng(seed)
    dim, num_pairs = 17, 13
    models = rng.standard_normal((num_pairs, dim)).astype(np.float32)
    pairs, packs = [], []
    for host in range(3):
        jobs = _jobs(rng, dim)
        mine = [int(p) for p in rng.integers(0, num_pairs - 1, len(jobs))]
        if host == 1:  # a pair's weights that are not all integers
            jobs[0] = ([rng.standard_normal(dim).astype(np.float32)], [0.5])
        pairs.append(mine)
        packs.append(pack_sums(jobs))
    unpacked = [p.unpack() for p in packs]
    # Act
    jobs = [[(p, 0, 0) for p in mine] for mine in pairs]  # lane p, one edge
    sums = EdgeSums.from_replies(jobs, packs, range(num_pairs), 1)
    got, counts = edge_means(sums, models)
    # Assert
    assert got.dtype == np.float32 and len(counts) == num_pairs
    limb = 0
    for k in range(num_pairs):
        parts = tuple(
            s
            for mine, sums in zip(pairs, unpacked, strict=True)
            for p, s in zip(mine, sums, strict=True)
            if p == k
        )
        want, want_count = apply_sums(models[k], parts)
        np.testing.assert_array_equal(got[k], want)
        assert counts[k] == want_count
        limb += any(s is not None and s.exact64 is None for s in parts)
    assert counts[-1] == 0  # the pair without jobs keeps its model
    assert limb > 0  # pairs with limb sums took apply_sums


def test_edge_means_weight_totals_as_fractions() -> None:
    """Integer weight sums summed as int64 equal ``float(weight_total(...))``."""
    from rayfl.hierarchy.lanes_edges import _weight_totals

    weights = [Fraction(3), Fraction(2**52), Fraction(5), Fraction(1, 3), Fraction(7)]
    for count in ([1, 1, 1, 1, 1], [2, 1, 2], [3, 2]):
        got = _weight_totals(weights, np.array(count))
        ends = np.cumsum(count).tolist()
        want = [
            float(weight_total(weights[a:b]))
            for a, b in zip([0, *ends[:-1]], ends, strict=True)
        ]
        assert got.tolist() == want
    big = [Fraction(2**52), Fraction(2**52 + 1)]  # the int64 sum would round
    assert _weight_totals(big, np.array([2])).tolist() == [float(2**53 + 1)]


@pytest.mark.parametrize(
    "values",
    [
        [],
        [1.0, 1.0, 1.0],
        [56.0, 300.0, 2.0**60],
        [0.5, 3.0, 1e-300],
        [Fraction(3), Fraction(5), Fraction(7, 2)],
        [Fraction(3), 2.0, Fraction(1, 3)],
        [2.0, 0.1],
    ],
    ids=["empty", "ones", "counts", "fractional", "fractions", "mixed", "late"],
)
def test_weight_total_equals_the_fraction_sum(values: list) -> None:
    # Arrange
    want = sum(
        (v if isinstance(v, Fraction) else Fraction(float(v)) for v in values),
        Fraction(0),
    )
    # Act
    got = weight_total(values)
    # Assert
    assert isinstance(got, Fraction)
    assert got == want


def test_reduce_jobs_clips_and_noises_as_one_device_at_a_time():
    """All jobs at once against clip_by_l2_norm and normal(0, σ), upload by upload.

    Bit for bit: the clipped, noised rows, the records (norm, clip scale, σ,
    rejection) and the kept weights; one upload is non-finite.
    """
    from rayfl.hierarchy.lanes_host import SegmentJob, reduce_jobs
    from rayfl.privacy.clip import clip_by_l2_norm
    from rayfl.seeding import rng_for

    rng = np.random.default_rng(7)
    specs = [
        (3, 0.5, 0.2, False),
        (0, None, 0.0, True),
        (2, None, 0.3, False),
        (4, 2.0, 0.0, True),
        (1, 0.1, 0.05, False),
    ]
    jobs = [
        SegmentJob(
            lane=j,
            row=j,
            edge=0,
            period=3,
            clients=list(range(n)),
            lr=0.1,
            steps=2,
            clip_norm=c,
            noise_std=s,
            equal_weights=eq,
        )
        for j, (n, c, s, eq) in enumerate(specs)
    ]
    vectors = [
        [rng.normal(size=6).astype(np.float32) for _ in range(n)] for n, *_ in specs
    ]
    vectors[2][1][4] = np.inf
    weights = [[float(rng.integers(5, 50)) for _ in range(n)] for n, *_ in specs]
    keys = [
        (j, c) for j, job in enumerate(jobs) if job.noise_std > 0 for c in job.clients
    ]

    def gens():
        for j, c in keys:
            yield rng_for(10 + j, "hier_device_noise", round=3, client=c)

    records = [[{} for _ in vs] for vs in vectors]
    got = reduce_jobs(jobs, records, vectors, weights, gens())
    want_records, noise = [], gens()
    for job, vs, ws, (rows, kept) in zip(jobs, vectors, weights, got, strict=True):
        want_rows, want_kept = [], []
        for i, v in enumerate(vs):
            rec = {}
            if job.clip_norm is not None:
                v, norm = clip_by_l2_norm(v, clip_norm=job.clip_norm)
                rec["update_norm"] = norm
                rec["clip_scale"] = min(1.0, job.clip_norm / norm) if norm > 0 else 1.0
            if job.noise_std > 0:
                v = (v + next(noise).normal(0.0, job.noise_std, size=v.shape)).astype(
                    np.float32
                )
            rec["device_noise_std"] = job.noise_std
            if not np.isfinite(v).all():
                rec["rejected"] = "non_finite"
            else:
                want_rows.append(v)
                want_kept.append(1.0 if job.equal_weights else ws[i])
            want_records.append(rec)
        assert [r.tobytes() for r in rows] == [r.tobytes() for r in want_rows]
        assert kept == want_kept
    assert [r for recs in records for r in recs] == want_records
    assert sum(len(rows) for rows, _ in got) == sum(n for n, *_ in specs) - 1


def test_normal_rows_are_each_generators_normal():
    """What the lanes' batched noise (devices and edges) draws, bit for bit."""
    from rayfl.seeding import normal_rows, rng_for

    stds = [1e-300, 1e-3, 0.7, 3.0]
    keys = [(1, c) for c in range(len(stds))]
    got = normal_rows(
        (rng_for(s, "hier_edge_noise", round=2, client=c) for s, c in keys), stds, 999
    )
    for (s, c), std, row in zip(keys, stds, got, strict=True):
        want = rng_for(s, "hier_edge_noise", round=2, client=c).normal(0.0, std, 999)
        assert row.tobytes() == want.tobytes()


def test_packed_sums_cross_a_pickle_as_one_array() -> None:
    """A host's packed sums: the exact ones in one array, the same sums after pickling."""
    import pickle

    from rayfl.hierarchy.lanes_host import pack_sums

    parts = _jobs(np.random.default_rng(5), dim=9)
    packed = pack_sums(parts)
    fast = [j for j, k in enumerate(packed.at) if k >= 0]
    assert packed.rows.shape == (len(fast), 9) and packed.others  # both kinds
    back = pickle.loads(pickle.dumps(packed, protocol=5)).unpack()
    for (rows, weights), s in zip(parts, back, strict=True):
        if not rows:
            assert s is None
            continue
        want = partial_sum(np.stack(rows), weights)
        assert s is not None and s.weight == want.weight and s.count == want.count
        np.testing.assert_array_equal(s.value(), want.value())
        assert (s.exact64 is None) == (want.exact64 is None)
