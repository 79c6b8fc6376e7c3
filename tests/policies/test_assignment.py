"""Hungarian subchannel matching against brute force, and the action rules."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from policies.assignment import assign_subchannels, check_assignment


def brute_force_best(score: np.ndarray, clients: list[int]) -> float:
    """Max Σ score over all injective maps of min(n, K) subchannels to clients."""
    num_subchannels = score.shape[1]
    used = min(len(clients), num_subchannels)
    best = -np.inf
    for subchannels in itertools.combinations(range(num_subchannels), used):
        for chosen in itertools.permutations(clients, used):
            best = max(
                best, sum(score[c, k] for c, k in zip(chosen, subchannels, strict=True))
            )
    return best


def total(score: np.ndarray, assignment: np.ndarray, idle: int) -> float:
    return float(sum(score[c, k] for k, c in enumerate(assignment) if c != idle))


SMALL = [(3, 2), (4, 4), (6, 3), (2, 5), (7, 4)]


@pytest.mark.parametrize("prefilter", [True, False], ids=["prefilter", "full"])
@pytest.mark.parametrize("shape", SMALL, ids=[f"N{n}-K{k}" for n, k in SMALL])
def test_matches_brute_force_optimum(shape, prefilter):
    # Arrange
    rng = np.random.default_rng(sum(shape))
    for _ in range(20):
        score = rng.normal(-80.0, 10.0, shape)
        clients = sorted(rng.choice(shape[0], rng.integers(1, shape[0] + 1), False))
        # Act
        assignment = assign_subchannels(
            score, clients, idle=shape[0], prefilter=prefilter
        )
        # Assert
        used = assignment[assignment != shape[0]]
        assert set(used) <= set(clients) and len(set(used)) == used.size
        assert used.size == min(len(clients), shape[1])
        np.testing.assert_allclose(
            total(score, assignment, shape[0]),
            brute_force_best(score, clients),
            rtol=1e-12,
        )


SHAPES = [(50, 10), (300, 30), (1000, 100)]


@pytest.mark.parametrize("shape", SHAPES, ids=[f"N{n}-K{k}" for n, k in SHAPES])
@pytest.mark.parametrize("kind", ["iid", "path_loss", "integer_ties"])
def test_prefilter_equals_unfiltered_solve(shape, kind):
    # Arrange
    rng = np.random.default_rng(0)
    num_clients, num_subchannels = shape
    if kind == "iid":
        score = rng.normal(-80.0, 10.0, shape)
    elif kind == "path_loss":
        distance_km = rng.uniform(0.001, 0.0707, num_clients)
        path_loss_db = 128.1 + 37.6 * np.log10(distance_km)
        score = -path_loss_db[:, None] + 10 * np.log10(rng.exponential(1.0, shape))
    else:
        score = rng.integers(0, 4, shape).astype(float)
    clients = np.flatnonzero(rng.random(num_clients) < 0.7)
    # Act
    filtered = assign_subchannels(score, clients, idle=num_clients)
    unfiltered = assign_subchannels(score, clients, idle=num_clients, prefilter=False)
    # Assert: same optimum value; same assignment when the optimum is unique
    np.testing.assert_allclose(
        total(score, filtered, num_clients),
        total(score, unfiltered, num_clients),
        rtol=1e-12,
    )
    if kind != "integer_ties":
        np.testing.assert_array_equal(filtered, unfiltered)


def test_minimize_and_nonfinite_scores():
    # Arrange: client 1 has no link on subchannel 0 (-inf dB), nan on 1
    score = np.array([[1.0, 2.0], [-np.inf, np.nan], [3.0, 1.0]])
    # Act
    best = assign_subchannels(score, [0, 1, 2], idle=3)
    cheapest = assign_subchannels(np.abs(score[[0, 2]]), [0, 1], idle=3, maximize=False)
    # Assert
    np.testing.assert_array_equal(best, [2, 0])
    np.testing.assert_array_equal(cheapest, [0, 1])


def test_no_clients_all_idle():
    np.testing.assert_array_equal(
        assign_subchannels(np.zeros((3, 2)), [], idle=3), [3, 3]
    )


@pytest.mark.parametrize(
    ("score", "clients", "message"),
    [
        (np.zeros(3), [0], "2-D"),
        (np.zeros((3, 2)), [0, 0], "distinct"),
    ],
    ids=["1-D score", "repeated client"],
)
def test_bad_input_raises(score, clients, message):
    with pytest.raises(ValueError, match=message):
        assign_subchannels(score, clients, idle=3)


@pytest.mark.parametrize(
    ("assignment", "eligible", "message"),
    [
        ([0, 0], [1, 1, 1], "client 0 is on subchannels \\[0, 1\\]"),
        ([1, 3], [1, 0, 1], "subchannel 0: client 1 is ineligible"),
        ([4, 0], [1, 1, 1], "subchannel 0: client 4 outside \\[0, 3\\]"),
        ([3, 0], [1, 1, 1], "subchannels \\[0\\] idle"),
    ],
    ids=["twice", "ineligible", "out of range", "idle"],
)
def test_check_assignment_names_the_offender(assignment, eligible, message):
    with pytest.raises(ValueError, match=message):
        check_assignment(assignment, np.array(eligible, bool))


def test_check_assignment_allows_idle_when_few_eligible_or_allowed():
    check_assignment([3, 0], np.array([1, 0, 0], bool))
    check_assignment([3, 0], np.array([1, 1, 1], bool), require_full=False)
