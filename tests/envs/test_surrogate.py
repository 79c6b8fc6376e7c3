"""The surrogate's recency term (envs.surrogate): ages and the loss it adds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from envs.surrogate import SurrogateDynamics


def _dynamics(recency: float, seed: int = 0) -> SurrogateDynamics:
    return SurrogateDynamics(
        np.full(4, 0.25), 10, 0.0, np.random.default_rng(seed), recency_weight=recency
    )


def test_zero_recency_keeps_the_old_stream():
    old = SurrogateDynamics(np.full(4, 0.25), 10, 0.0, np.random.default_rng(3))
    new = _dynamics(0.0, seed=3)
    for clients in ([0, 1], [2], [3, 0]):
        a = old.step(np.array(clients), np.zeros(len(clients)))
        b = new.step(np.array(clients), np.zeros(len(clients)))
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(old.client_loss(), new.client_loss())


def test_ages_and_recency_loss_follow_the_closed_form():
    dyn = _dynamics(0.4, seed=1)
    assert np.all((dyn.drift >= 0) & (dyn.drift <= 0.8))
    before = dyn.client_loss()  # age 0: no recency term yet
    np.testing.assert_allclose(
        before,
        dyn.floor + dyn.gap + dyn.heterogeneity,
    )
    for _ in range(3):
        dyn.step(np.array([0]), np.zeros(1))
    np.testing.assert_array_equal(dyn.age, [0, 3, 3, 3])
    expected = (
        dyn.floor
        + dyn.gap
        + dyn.heterogeneity * np.exp(-dyn.uploads / dyn.participation_scale)
        + dyn.drift * (1 - np.exp(-dyn.age / dyn.recency_scale))
    )
    np.testing.assert_allclose(dyn.client_loss(), expected)
    # The absent clients carry (1 − e^{−3}) of their drift, the delivered one none.
    extra = dyn.client_loss() - (
        dyn.floor
        + dyn.gap
        + dyn.heterogeneity * np.exp(-dyn.uploads / dyn.participation_scale)
    )
    np.testing.assert_allclose(extra[1:], dyn.drift[1:] * (1 - math.exp(-3)))
    assert extra[0] == 0


def test_bad_recency_parameters_are_refused():
    with pytest.raises(ValueError, match="recency"):
        _dynamics(-0.1)


def test_the_surrogate_prices_the_downlink_as_the_engine_does():
    """The surrogate's uplink knows abs(w): with ``downlink_latency`` the broadcast
    time 32·abs(w)/rate is part of each scheduled client's latency, as in emulate.

    Before, the surrogate built its ledger without the model size, so the
    downlink term was silently dropped and the ``latency`` reward differed
    between surrogate and emulate for the same schedule.
    """
    from envs.star.scheduling import WirelessFLEnv

    def latency(downlink: bool) -> np.ndarray:
        env = WirelessFLEnv(
            mode="surrogate",
            overrides=[f"wireless.downlink_latency={str(downlink).lower()}"],
        )
        env.reset(seed=4)
        assert env.backend.uplink.model_dim == env.backend.dim > 0
        _, _, _, _, info = env.step(np.array([0, 1, 2, 3]))
        return info["latency_s"][:4]

    without, with_downlink = latency(False), latency(True)
    assert (without > 0).all()
    assert (with_downlink > without).all()
