"""pFedWN core: EM mixture weights (eqs. 9–10) and the target's eq. 1."""

from __future__ import annotations

import numpy as np
import pytest

from rayfl.algorithms.pfedwn import aggregate_target, em_step, fit_mixture_weights


def mixture_losses(true_weights, *, num_samples, seed, num_classes=10):
    """Target data drawn from the neighbors' label distributions in known shares.

    Neighbor m's predictive distribution p_m(y) is a random categorical (its
    "model"); each target sample picks z ~ π_true, then y ~ p_z. The loss matrix
    is L_im = −log p_m(y_i), what the neighbor models' cross-entropy would give.
    """
    rng = np.random.default_rng(seed)
    m = len(true_weights)
    dists = rng.dirichlet(np.full(num_classes, 0.3), size=m)
    z = rng.choice(m, size=num_samples, p=true_weights)
    y = np.array([rng.choice(num_classes, p=dists[k]) for k in z])
    return -np.log(dists[:, y].T + 1e-12)


@pytest.mark.parametrize(
    "true_weights",
    [[0.6, 0.3, 0.1], [0.25, 0.25, 0.25, 0.25], [0.05, 0.15, 0.5, 0.3]],
    ids=["skewed", "uniform", "four"],
)
def test_em_recovers_known_mixture_weights(true_weights):
    # Arrange
    losses = mixture_losses(true_weights, num_samples=20_000, seed=0)
    # Act
    result = fit_mixture_weights(losses, tol=1e-7, max_iter=5000)
    # Assert
    np.testing.assert_allclose(result.weights, true_weights, atol=0.03)
    np.testing.assert_allclose(result.weights.sum(), 1.0, rtol=1e-12)
    assert np.all(result.history >= 0)


def test_em_log_likelihood_never_decreases():
    losses = mixture_losses([0.5, 0.2, 0.3], num_samples=3000, seed=1)
    result = fit_mixture_weights(losses, tol=0.0, max_iter=100)
    assert np.all(np.diff(result.log_likelihood) >= -1e-12)
    assert not result.converged and result.iterations == 100


def test_em_step_is_stable_for_huge_losses():
    # Losses of hundreds of nats underflow exp(−L); the log-space E-step does not.
    losses = np.array([[700.0, 705.0], [800.0, 790.0], [900.0, 900.5]])
    new, loglik = em_step(np.log([0.5, 0.5]), losses)
    assert np.all(np.isfinite(new)) and np.isfinite(loglik)
    np.testing.assert_allclose(np.exp(new).sum(), 1.0)
    # Sample 0 favours neighbor 0 (by e^5), sample 1 neighbor 1 (by e^10).
    q0 = 1 / (1 + np.exp(-5.0))
    q1 = 1 / (1 + np.exp(-10.0))
    q2 = 1 / (1 + np.exp(-0.5))
    np.testing.assert_allclose(np.exp(new)[0], (q0 + (1 - q1) + q2) / 3, rtol=1e-9)


@pytest.mark.parametrize("stop", ["l1", "loglik"])
def test_stopping_rules_fire(stop):
    losses = mixture_losses([0.7, 0.3], num_samples=2000, seed=2)
    result = fit_mixture_weights(losses, tol=1e-4, stop=stop)
    assert result.converged and result.iterations < 500


def test_aggregation_alpha_one_keeps_own_model():
    own = np.array([1.0, -2.0], np.float32)
    out = aggregate_target(own, [[5.0, 5.0]], [1.0], alpha=1.0)
    np.testing.assert_array_equal(out, own)


def test_aggregation_is_eq1_with_renormalised_weights():
    own = np.array([1.0, 0.0], np.float32)
    neighbors = np.array([[3.0, 3.0], [0.0, 6.0]])
    out = aggregate_target(own, neighbors, [0.2, 0.6], alpha=0.25)
    mix = (0.25 * neighbors[0] + 0.75 * neighbors[1]) * 0.75
    np.testing.assert_allclose(out, 0.25 * own + mix, rtol=1e-6)


def test_aggregation_without_arrivals_keeps_own_model():
    own = np.array([1.0, 2.0], np.float32)
    out = aggregate_target(own, np.zeros((0, 2)), [], alpha=0.3)
    np.testing.assert_array_equal(out, own)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="alpha"):
        aggregate_target(np.zeros(2, np.float32), [[1.0, 1.0]], [1.0], alpha=1.5)
    with pytest.raises(ValueError, match="loss_matrix"):
        em_step(np.log([0.5, 0.5]), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="prior"):
        fit_mixture_weights(np.zeros((3, 2)), prior=[1.0, 0.0])
