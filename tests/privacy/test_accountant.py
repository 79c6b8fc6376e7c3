from __future__ import annotations

import math
import warnings

import dp_accounting
import numpy as np
import pytest
from dp_accounting import pld, rdp

import rayfl.privacy.accountant as accountant_module
from rayfl.privacy.accountant import PrivacyLedger

CASES = [(1.0, 0.01, 1000), (0.7, 0.05, 100), (2.0, 1.0, 20), (5.0, 0.1, 5)]


def _independent_epsilon(
    z: float, q: float, steps: int, delta: float, backend: str = "rdp"
) -> float:
    accountant = rdp.RdpAccountant() if backend == "rdp" else pld.PLDAccountant()
    event = dp_accounting.GaussianDpEvent(z)
    if q < 1:
        event = dp_accounting.PoissonSampledDpEvent(q, event)
    accountant.compose(dp_accounting.SelfComposedDpEvent(event, steps))
    return float(accountant.get_epsilon(delta))


@pytest.mark.parametrize(
    ("noise_multiplier", "sample_rate", "steps"),
    CASES,
    ids=[f"z={z}-q={q}-T={t}" for z, q, t in CASES],
)
def test_epsilon_matches_independent_dp_accounting(
    noise_multiplier: float, sample_rate: float, steps: int
) -> None:
    # Arrange
    ledger = PrivacyLedger(2)
    # Act
    for _ in range(steps):
        ledger.record([0], noise_multiplier=noise_multiplier, sample_rate=sample_rate)
    epsilon = ledger.epsilon(1e-5)
    # Assert
    expected = _independent_epsilon(noise_multiplier, sample_rate, steps, 1e-5)
    np.testing.assert_allclose(epsilon[0], expected, rtol=1e-2)
    assert epsilon[1] == 0.0


@pytest.mark.parametrize(
    ("noise_multiplier", "sample_rate", "steps"),
    CASES,
    ids=[f"z={z}-q={q}-T={t}" for z, q, t in CASES],
)
def test_epsilon_matches_opacus(
    noise_multiplier: float, sample_rate: float, steps: int
) -> None:
    accountants = pytest.importorskip("opacus.accountants")
    # Arrange
    ledger = PrivacyLedger(1)
    ledger.record(
        [0], noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps
    )
    opacus = accountants.RDPAccountant()
    opacus.history = [(noise_multiplier, sample_rate, steps)]
    # Act
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "optimal order is the largest"
        expected = opacus.get_epsilon(1e-5)
    # Assert: the two libraries use different order grids, so 1%
    np.testing.assert_allclose(ledger.epsilon(1e-5)[0], expected, rtol=1e-2)


def test_pld_backend_matches_independent_pld_and_analytic_gaussian() -> None:
    # Arrange: q = 1, 10 releases of z = 4 equal one Gaussian of z = 4/sqrt(10)
    ledger = PrivacyLedger(1, accountant="pld")
    ledger.record([0], noise_multiplier=4.0, sample_rate=1.0, steps=10)
    # Act
    epsilon = ledger.epsilon(1e-5)[0]
    # Assert
    np.testing.assert_allclose(
        epsilon, _independent_epsilon(4.0, 1.0, 10, 1e-5, "pld"), rtol=1e-2
    )
    exact = dp_accounting.get_epsilon_gaussian(4.0 / math.sqrt(10), 1e-5)
    np.testing.assert_allclose(epsilon, exact, rtol=1e-2)


def test_q1_rdp_is_an_upper_bound_on_the_exact_gaussian() -> None:
    # Arrange: deterministic scheduler, sample_rate = 1 (no amplification)
    ledger = PrivacyLedger(1)
    for _ in range(30):
        ledger.record([0], noise_multiplier=2.0, sample_rate=1.0)
    # Act
    epsilon = ledger.epsilon(1e-5)[0]
    # Assert: RDP of the Gaussian alpha T/(2 z^2), dp-accounting's conversion, fine grid
    orders = np.linspace(1.001, 100, 200_000)
    closed_form = (
        orders * 30 / 8
        + np.log((orders - 1) / orders)
        - (math.log(1e-5) + np.log(orders)) / (orders - 1)
    ).min()
    np.testing.assert_allclose(epsilon, closed_form, rtol=1e-2)
    assert epsilon >= dp_accounting.get_epsilon_gaussian(2.0 / math.sqrt(30), 1e-5)


def test_heterogeneous_clients_get_their_own_epsilon() -> None:
    # Arrange: client 0 uploads 5 times, client 1 20 times, client 2 never
    ledger = PrivacyLedger(3)
    for round_index in range(20):
        clients = [0, 1] if round_index < 5 else [1]
        ledger.record(clients, noise_multiplier=1.5, sample_rate=1.0)
    # Act
    epsilon = ledger.epsilon(1e-5)
    # Assert
    np.testing.assert_array_equal(ledger.upload_count, [5, 20, 0])
    np.testing.assert_allclose(
        epsilon[0], _independent_epsilon(1.5, 1.0, 5, 1e-5), rtol=1e-2
    )
    np.testing.assert_allclose(
        epsilon[1], _independent_epsilon(1.5, 1.0, 20, 1e-5), rtol=1e-2
    )
    assert epsilon[2] == 0.0 and epsilon[1] > epsilon[0] > 0


def test_mixed_history_matches_composed_events() -> None:
    # Arrange: a client whose noise changes mid-run (e.g. a decaying learning rate)
    ledger = PrivacyLedger(1)
    ledger.record([0], noise_multiplier=1.0, sample_rate=0.1, steps=50)
    ledger.record([0], noise_multiplier=3.0, sample_rate=1.0)
    ledger.record([0], noise_multiplier=1.0, sample_rate=0.1, steps=50)
    accountant = rdp.RdpAccountant()
    sampled = dp_accounting.PoissonSampledDpEvent(
        0.1, dp_accounting.GaussianDpEvent(1.0)
    )
    accountant.compose(dp_accounting.SelfComposedDpEvent(sampled, 100))
    accountant.compose(dp_accounting.GaussianDpEvent(3.0))
    # Act / Assert
    np.testing.assert_allclose(
        ledger.epsilon(1e-5)[0], accountant.get_epsilon(1e-5), rtol=1e-6
    )


def test_no_noise_release_gives_infinite_epsilon() -> None:
    ledger = PrivacyLedger(1)
    ledger.record([0], noise_multiplier=0.0, sample_rate=1.0)
    assert ledger.epsilon(1e-5)[0] == math.inf


def test_identical_histories_cost_one_computation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Arrange: 1,000 clients with the same 10 releases
    calls = []
    original = accountant_module._history_epsilon

    def counting(*args: object, **kwargs: object) -> float:
        calls.append(args)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(accountant_module, "_history_epsilon", counting)
    ledger = PrivacyLedger(1000)
    for _ in range(10):
        ledger.record(np.arange(1000), noise_multiplier=1.0, sample_rate=1.0)
    # Act
    epsilon = ledger.epsilon(1e-5)
    ledger.epsilon(1e-5)
    # Assert
    assert len(calls) == 1
    assert np.all(epsilon == epsilon[0])


def test_consecutive_identical_releases_are_run_length_compressed() -> None:
    ledger = PrivacyLedger(2)
    for _ in range(7):
        ledger.record([0, 1], noise_multiplier=1.0, sample_rate=1.0)
    ledger.record([1], noise_multiplier=2.0, sample_rate=1.0)
    entries = ledger.state_dict()["entries"]
    np.testing.assert_array_equal(
        entries, [[0, 1.0, 1.0, 1, 7], [1, 1.0, 1.0, 1, 7], [1, 2.0, 1.0, 1, 1]]
    )


def test_state_dict_round_trip() -> None:
    # Arrange
    ledger = PrivacyLedger(3)
    ledger.record([0, 2], noise_multiplier=1.0, sample_rate=0.1, steps=60)
    ledger.record([2], noise_multiplier=2.0, sample_rate=1.0)
    # Act
    restored = PrivacyLedger(3)
    restored.load_state_dict({k: np.asarray(v) for k, v in ledger.state_dict().items()})
    # Assert
    np.testing.assert_array_equal(restored.upload_count, ledger.upload_count)
    np.testing.assert_allclose(restored.epsilon(1e-5), ledger.epsilon(1e-5), rtol=0)
    restored.record([0], noise_multiplier=1.0, sample_rate=0.1, steps=60)
    assert restored.state_dict()["entries"].shape == (3, 5)


def test_eligible_applies_upload_cap_and_per_client_budget() -> None:
    # Arrange
    ledger = PrivacyLedger(3)
    for _ in range(4):
        ledger.record([0, 1], noise_multiplier=1.0, sample_rate=1.0)
    spent = ledger.epsilon(1e-5)[0]
    # Act
    capped = ledger.eligible(max_uploads=4)
    budgeted = ledger.eligible(epsilon_budget=[spent * 2, spent / 2, 1.0], delta=1e-5)
    # Assert: cap is Upsilon < T0 (seed 000 [AMBIG-8])
    np.testing.assert_array_equal(capped, [False, False, True])
    np.testing.assert_array_equal(budgeted, [True, False, True])
    with pytest.raises(ValueError, match="needs delta"):
        ledger.eligible(epsilon_budget=1.0)


# Seed 002 §10.2: T-hat (participations before the quit rule stops a client) for
# tau = 60 steps per participation, |D_i| = 1000, delta = 1e-3.
T_HAT = [(0.6, 10, 6.0, 17), (0.6, 20, 10.0, 12), (0.5, 5, 4.0, 3), (0.6, 5, 2.0, 1)]


@pytest.mark.parametrize(
    ("sigma_hat", "batch_size", "budget", "expected"),
    T_HAT,
    ids=[f"sigma={s}-b={b}-eps={e:g}" for s, b, e, _ in T_HAT],
)
def test_quit_rule_reproduces_seed_002_participation_table(
    sigma_hat: float, batch_size: int, budget: float, expected: int
) -> None:
    # Arrange
    ledger = PrivacyLedger(1)
    release = {
        "noise_multiplier": sigma_hat,
        "sample_rate": batch_size / 1000,
        "steps": 60,
    }
    # Act: upload while one more participation stays within the budget
    while ledger.eligible(
        epsilon_budget=budget,
        delta=1e-3,
        next_noise_multiplier=release["noise_multiplier"],
        next_sample_rate=release["sample_rate"],
        next_steps=release["steps"],
    )[0]:
        ledger.record([0], **release)  # type: ignore[arg-type]
    # Assert
    assert ledger.upload_count[0] == expected


def test_record_rejects_bad_input() -> None:
    ledger = PrivacyLedger(2)
    with pytest.raises(ValueError, match=r"client ids must be in \[0, 2\)"):
        ledger.record([2], noise_multiplier=1.0, sample_rate=1.0)
    with pytest.raises(ValueError, match="sample_rate in"):
        ledger.record([0], noise_multiplier=1.0, sample_rate=0.0)


def test_per_client_noise_multipliers_are_accounted_per_client():
    # Arrange: DP-Ditto's σ_n gives each client its own z_n = σ_n/(2C)
    ledger = PrivacyLedger(3)
    z = np.array([0.8, 1.6, 3.2])
    # Act
    for _ in range(5):
        ledger.record([0, 1, 2], noise_multiplier=z, sample_rate=1.0)
    eps = ledger.epsilon(1e-5)
    # Assert: each client equals a one-client ledger at its own z; a prospective
    # budget check with per-client z matches ε after one more release
    for client, value in enumerate(z):
        single = PrivacyLedger(1)
        for _ in range(5):
            single.record([0], noise_multiplier=float(value), sample_rate=1.0)
        assert eps[client] == pytest.approx(single.epsilon(1e-5)[0], rel=1e-12)
    after = PrivacyLedger(3)
    for _ in range(6):
        after.record([0, 1, 2], noise_multiplier=z, sample_rate=1.0)
    budget = after.epsilon(1e-5)[1]
    allowed = ledger.eligible(
        epsilon_budget=budget, delta=1e-5, next_noise_multiplier=z
    )
    assert allowed.tolist() == [False, True, True]
    with pytest.raises(ValueError, match="noise_multiplier >= 0"):
        ledger.record([0, 1], noise_multiplier=[1.0, -1.0], sample_rate=1.0)
