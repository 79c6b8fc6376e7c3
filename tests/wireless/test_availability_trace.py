"""Tests of availability traces (rayfl.wireless.availability_trace, issue 48).

- The shipped sample (examples/availability_trace.csv) is exactly what its
  documented command writes, reads back to the on/off chain it was made from
  (the oracle: OnOffAvailability with seed 0, means 8 and 4), and round-trips
  through write_csv;
- hand-written traces: several intervals per client, overlaps, [start, end)
  bounds, absent clients (never/always), replay with a period, any subset of
  clients;
- malformed files raise ValueError naming the file, line and rule.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rayfl.wireless.availability_trace import (
    AvailabilityTrace,
    main,
    read_trace,
    trace_from_series,
)
from rayfl.wireless.dynamics import OnOffAvailability

SAMPLE = Path(__file__).parents[2] / "examples" / "availability_trace.csv"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


def test_the_shipped_sample_is_the_on_off_chain_its_command_writes(tmp_path):
    # Arrange
    chain = OnOffAvailability(0, range(20), mean_on=8.0, mean_off=4.0)
    expected = np.stack([chain.available(t) for t in range(50)])
    # Act
    main([str(tmp_path / "again.csv")])
    trace = read_trace(SAMPLE, num_clients=20)
    got = np.stack([trace.available(t) for t in range(50)])
    # Assert
    assert (tmp_path / "again.csv").read_bytes() == SAMPLE.read_bytes()
    np.testing.assert_array_equal(got, expected)
    assert not trace.available(50).any()  # after its last round: unreachable
    assert 0.5 < got.mean() < 0.85  # ≈ 8 / 12 reachable


def test_a_trace_round_trips_through_its_csv(tmp_path):
    # Arrange
    on = np.random.default_rng(1).random((30, 7)) < 0.6
    trace = trace_from_series(on)
    # Act
    trace.write_csv(tmp_path / "t.csv")
    back = read_trace(tmp_path / "t.csv", num_clients=7)
    # Assert
    for t in range(30):
        np.testing.assert_array_equal(back.available(t), on[t])
    np.testing.assert_array_equal(back.client, trace.client)


def test_intervals_bounds_absent_clients_and_period(tmp_path):
    # Arrange: client 0 twice (overlapping), client 2 once, client 1 absent
    path = _write(tmp_path, "client,start,end,note\n0,2,5,x\n2,0,1,y\n0,4,6,z\n")
    # Act
    never = read_trace(path, num_clients=3)
    always = read_trace(path, num_clients=3, absent="always")
    daily = read_trace(path, num_clients=3, period_rounds=6)
    # Assert
    series = np.stack([never.available(t) for t in range(7)])
    np.testing.assert_array_equal(series[:, 0], [0, 0, 1, 1, 1, 1, 0])  # [2, 6)
    np.testing.assert_array_equal(series[:, 2], [1, 0, 0, 0, 0, 0, 0])
    assert not series[:, 1].any() and never.missing.tolist() == [1]
    assert always.available(3).tolist() == [True, True, False]
    np.testing.assert_array_equal(daily.available(6 * 9 + 2), never.available(2))
    assert never.available(0, clients=[2, 0]).tolist() == [True, False]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("client,begin,end\n0,1,2\n", r"trace.csv: the trace needs .*missing start"),
        ("client,start,end\n0,1,2\n0,5,3\n", r"trace.csv:3: end must be > start"),
        ("client,start,end\n0,4,4\n", r"trace.csv:2: end must be > start"),
        ("client,start,end\n0,-1,2\n", r"trace.csv:2: start must be a non-negative"),
        ("client,start,end\n0,1.5,2\n", r"trace.csv:2: start must be a non-negative"),
        ("client,start,end\n0,1\n", r"trace.csv:2: end must be a non-negative"),
        ("client,start,end\n3,0,2\n", r"trace.csv:2: client must be in \[0, 3\)"),
        ("", r"missing client, start, end \(header: none\)"),
    ],
    ids=["column", "reversed", "empty", "negative", "float", "short", "id", "blank"],
)
def test_malformed_files_are_named(tmp_path, text, match):
    with pytest.raises(ValueError, match=match):
        read_trace(_write(tmp_path, text), num_clients=3)


def test_period_and_constructor_checks(tmp_path):
    path = _write(tmp_path, "client,start,end\n0,0,9\n")
    with pytest.raises(ValueError, match=r":2: end must be <= period_rounds 5"):
        read_trace(path, num_clients=1, period_rounds=5)
    with pytest.raises(ValueError, match="end must be > start"):
        AvailabilityTrace(2, np.array([0]), np.array([3]), np.array([1]))
    with pytest.raises(ValueError, match="absent must be"):
        read_trace(path, num_clients=1, absent="sometimes")  # type: ignore[arg-type]
