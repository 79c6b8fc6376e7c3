"""Oracle tests of compute heterogeneity and the round deadline (issue 48 groundwork).

- f_i follows its configured distribution (KS test against scipy's, 4,000
  clients) and does not depend on which other clients are drawn;
- the deadline drops exactly the uploads whose compute plus airtime exceeds
  it (a brute-force check over every case, ties arrive).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rayfl.wireless.compute import cpu_frequencies, deadline_misses

CLIENTS = range(4000)


@pytest.mark.parametrize(
    ("kind", "params", "law"),
    [
        ("uniform", {"low": 0.5e9, "high": 2e9}, stats.uniform(0.5e9, 1.5e9)),
        (
            "lognormal",
            {"median": 1e9, "sigma": 0.5},
            stats.lognorm(s=0.5, scale=1e9),
        ),
    ],
)
def test_cpu_frequencies_follow_their_distribution(kind, params, law):
    f = cpu_frequencies(3, CLIENTS, kind, **params)
    assert stats.kstest(f, law.cdf).pvalue > 1e-3
    # and not another one: the KS test has the power to tell
    assert stats.kstest(f * 1.1, law.cdf).pvalue < 1e-6


def test_a_clients_frequency_does_not_depend_on_the_others():
    everyone = cpu_frequencies(9, range(10), "lognormal", median=1e9, sigma=0.3)
    some = cpu_frequencies(9, [7, 2], "lognormal", median=1e9, sigma=0.3)
    assert some.tolist() == [everyone[7], everyone[2]]
    assert (cpu_frequencies(1, range(3), "constant", value=2e9) == 2e9).all()


@pytest.mark.parametrize(
    ("kind", "params", "message"),
    [
        ("gamma", {"k": 1.0}, "kind must be one of"),
        ("uniform", {"low": 2e9, "high": 1e9}, "low <= high"),
        ("lognormal", {"median": -1.0, "sigma": 0.1}, "must be > 0"),
        ("constant", {"value": 1e9, "extra": 1.0}, "constant takes value"),
    ],
)
def test_bad_distributions_are_refused_in_one_line(kind, params, message):
    with pytest.raises(ValueError, match=message):
        cpu_frequencies(0, range(2), kind, **params)


def test_the_deadline_drops_exactly_the_late_uploads():
    rng = np.random.default_rng(0)
    compute = rng.uniform(0, 2, 1000).round(1)  # rounded: many exact ties
    airtime = rng.uniform(0, 1, 1000).round(1)
    deadline = 1.5
    late = deadline_misses(compute, airtime, deadline)
    expected = [c + a > deadline for c, a in zip(compute, airtime, strict=True)]
    assert late.tolist() == expected
    assert 0 < late.sum() < 1000
    assert not deadline_misses([1.0], [0.5], 1.5)[0]  # on time at the deadline
    with pytest.raises(ValueError, match="deadline_s must be > 0"):
        deadline_misses([1.0], [0.5], 0.0)
