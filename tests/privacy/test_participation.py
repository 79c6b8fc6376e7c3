"""T̂_i, β_i and the quit rule of DP-SparFL (spec seed_002 §2.5, eqs. 6, 12, 13)."""

from __future__ import annotations

import numpy as np
import pytest

from rayfl.privacy.accountant import PrivacyLedger
from rayfl.privacy.participation import (
    LocalDPSGD,
    draw_epsilon_budgets,
    max_participations,
    participation_targets,
)

# Spec §10.2 (Opacus orders, eq. 13): σ̂ = 0.6, abs(b) = 10, abs(D) = 1000, τ = 60.
SPEC_TABLE = {2.0: 0, 3.0: 2, 4.0: 5, 6.0: 17, 8.0: 32, 10.0: 51}


@pytest.mark.parametrize("epsilon", sorted(SPEC_TABLE))
def test_max_participations_matches_the_spec_table(epsilon):
    # Act
    t_hat = max_participations(
        epsilon, noise_multiplier=0.6, sample_rate=0.01, steps=60, delta=1e-3
    )
    # Assert: within one participation (dp-accounting's orders differ from Opacus')
    assert abs(t_hat - SPEC_TABLE[epsilon]) <= 1


def test_fast_epsilon_equals_the_ledger_accountant():
    # Arrange
    dp = LocalDPSGD(0.5, np.array([0.004, 0.002, 0.01]), 60, np.full(3, 9.0), 1e-3)
    ledger = PrivacyLedger(3)
    dp.record(ledger, [0, 1, 1, 2, 2, 2])
    # Act / Assert: linear RDP composition = dp-accounting's RdpAccountant
    np.testing.assert_allclose(
        dp.epsilon(ledger.upload_count), ledger.epsilon(1e-3), rtol=1e-10
    )


def test_a_client_never_exceeds_its_budget():
    # Arrange: 12 clients, ε_i ~ U[2, 10], greedy scheduling of every eligible one
    n = 12
    budgets = draw_epsilon_budgets(n, low=2.0, high=10.0, rng=np.random.default_rng(0))
    sizes = np.random.default_rng(1).choice([300, 600, 1800, 2100], n)
    dp = LocalDPSGD(0.5, 4 / sizes, 60, budgets, 1e-3)
    ledger = PrivacyLedger(n)
    t_hat = dp.max_participations()
    # Act
    for _ in range(int(t_hat.max()) + 3):
        eligible = np.flatnonzero(dp.eligible(ledger))
        dp.record(ledger, eligible)
    # Assert: the full accountant's ε ≤ ε_i, and each client used exactly T̂_i
    spent = ledger.epsilon(1e-3)
    assert np.all(spent <= budgets)
    np.testing.assert_array_equal(ledger.upload_count, t_hat)
    one_more = [
        max_participations(b, noise_multiplier=0.5, sample_rate=q, steps=60, delta=1e-3)
        for b, q in zip(budgets, 4 / sizes, strict=True)
    ]
    np.testing.assert_array_equal(one_more, t_hat)


def test_participation_targets_eq12():
    # Arrange / Act
    beta = participation_targets([10, 20, 30, 40], num_subchannels=2)
    # Assert: β_i = N T̂_i / Σ T̂, summing to N when none is capped
    np.testing.assert_allclose(beta, [0.2, 0.4, 0.6, 0.8])
    np.testing.assert_allclose(beta.sum(), 2.0)
    np.testing.assert_allclose(
        participation_targets([1, 0, 100], num_subchannels=2),
        [0.0198, 0.0, 1.0],
        atol=1e-3,
    )
