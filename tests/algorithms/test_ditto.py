"""Ditto / DP-Ditto client and server halves (spec seed_001 §2.3, Algorithm 1)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from rayfl.algorithms.base import ClientContext
from rayfl.algorithms.config import FedAvgConfig
from rayfl.algorithms.ditto import Ditto, DittoConfig, personal_sgd
from rayfl.algorithms.fedavg import FedAvg
from rayfl.learning.models import FlatModel, build_model
from rayfl.learning.train import batch_indices, local_sgd

INPUT, CLASSES = (6,), 3


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, *INPUT)).astype(np.float32)
    y = rng.integers(0, CLASSES, size=n).astype(np.int64)
    return x, y


def _flat(kind="mlp"):
    return FlatModel(
        build_model(kind, input_shape=INPUT, num_classes=CLASSES, hidden=(5,))
    )


def _vector(dim, seed, scale=0.3):
    return (np.random.default_rng(seed).normal(size=dim) * scale).astype(np.float32)


def _ctx(model, omega, x, y, state, *, seed=0, controls=None, client=0, round=0):
    return ClientContext(
        client=client,
        round=round,
        global_vector=omega,
        x_train=x,
        y_train=y,
        model=model,
        state=state,
        controls=controls or {},
        rng=np.random.default_rng(seed),
    )


def _oracle_module(vector):
    module = build_model("mlp", input_shape=INPUT, num_classes=CLASSES, hidden=(5,))
    vector_to_parameters(torch.from_numpy(vector.copy()), module.parameters())
    return module


def _pl_objective(module, omega, xb, yb, lam):
    # f_n(ϖ; ω) = (1 − λ/2) F_n(ϖ) + (λ/2)‖ϖ − ω‖², eq. 3a of seed 001.
    theta = parameters_to_vector(module.parameters())
    loss = F.cross_entropy(module(torch.from_numpy(xb)), torch.from_numpy(yb))
    prox = torch.sum((theta - torch.from_numpy(omega)) ** 2)
    return (1 - lam / 2) * loss + (lam / 2) * prox


@pytest.mark.parametrize("lam", [0.0, 0.3, 1.0, 2.0], ids=lambda v: f"lam={v}")
def test_personal_step_is_autograd_gradient_of_pl_objective(lam):
    # Arrange
    x, y = _data()
    fm = _flat()
    varpi, omega, lr = _vector(fm.spec.dim, 1), _vector(fm.spec.dim, 2), 0.5
    module = _oracle_module(varpi)
    grads = torch.autograd.grad(
        _pl_objective(module, omega, x, y, lam), list(module.parameters())
    )
    expected = varpi - lr * torch.cat([g.reshape(-1) for g in grads]).numpy()
    # Act: one full-batch step
    result = personal_sgd(
        fm,
        varpi,
        omega,
        x,
        y,
        lr=lr,
        lam=lam,
        batch_size=len(y),
        local_steps=1,
        rng=np.random.default_rng(0),
    )
    # Assert
    np.testing.assert_allclose(result.vector, expected, rtol=0, atol=2e-6)
    assert result.steps == 1


def test_personal_sgd_matches_torch_sgd_on_pl_objective_over_minibatches():
    # Arrange: oracle is torch.optim.SGD on f_n with the same batches
    x, y = _data(n=37)
    fm = _flat()
    varpi, omega, lam, lr = _vector(fm.spec.dim, 3), _vector(fm.spec.dim, 4), 0.7, 0.2
    module = _oracle_module(varpi)
    opt = torch.optim.SGD(module.parameters(), lr=lr)
    for idx in batch_indices(
        len(y),
        batch_size=8,
        local_epochs=2,
        local_steps=None,
        rng=np.random.default_rng(5),
    ):
        opt.zero_grad()
        _pl_objective(module, omega, x[idx], y[idx], lam).backward()
        opt.step()
    expected = parameters_to_vector(module.parameters()).detach().numpy()
    # Act
    result = personal_sgd(
        fm,
        varpi,
        omega,
        x,
        y,
        lr=lr,
        lam=lam,
        batch_size=8,
        local_epochs=2,
        rng=np.random.default_rng(5),
    )
    # Assert
    np.testing.assert_allclose(result.vector, expected, rtol=0, atol=1e-5)
    assert result.steps == 10


def test_personal_sgd_rejects_lambda_outside_zero_two():
    x, y = _data()
    fm = _flat()
    v = _vector(fm.spec.dim, 0)
    with pytest.raises(ValueError, match="lam must be in \\[0, 2\\]"):
        personal_sgd(
            fm, v, v, x, y, lr=0.1, lam=2.5, batch_size=8, rng=np.random.default_rng(0)
        )


def _simulate(algorithm, rounds, clients, omega0, fm, *, seed=0):
    """Run full-participation rounds by hand; return globals and client states."""
    states = [{} for _ in clients]
    omega, history = omega0, [omega0]
    for t in range(rounds):
        updates = [
            algorithm.client_update(
                _ctx(
                    fm,
                    omega,
                    x,
                    y,
                    states[n],
                    seed=seed + 100 * t + n,
                    client=n,
                    round=t,
                )
            )
            for n, (x, y) in enumerate(clients)
        ]
        omega = algorithm.server_update(
            omega,
            np.stack([u.vector for u in updates]),
            np.array([u.weight for u in updates]),
        )
        history.append(omega)
    return history, states


def test_lambda_two_reduces_to_fedavg():
    # Arrange: λ = 2 and η_L = 1/2 put ϖ exactly on the received global model
    clients = [_data(n=30, seed=s) for s in range(3)]
    fm = _flat()
    omega0 = _vector(fm.spec.dim, 9)
    common = {"lr": 0.1, "batch_size": 8}
    ditto = Ditto(
        DittoConfig(lam=2.0, personal_lr=0.5, aggregation="data_weighted", **common)
    )
    fedavg = FedAvg(FedAvgConfig(**common))
    # Act
    d_hist, d_states = _simulate(ditto, 3, clients, omega0, fm)
    f_hist, _ = _simulate(fedavg, 3, clients, omega0, fm)
    # Assert: the global model is FedAvg's, and every PL model sits on ω^{T−1}
    for ours, theirs in zip(d_hist, f_hist, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
    for state in d_states:
        np.testing.assert_allclose(state["personal"], d_hist[-2], rtol=0, atol=1e-6)


@pytest.mark.parametrize("personal_lr", [0.1, 0.3], ids=["eta=0.1", "eta=0.3"])
def test_lambda_two_contracts_personal_towards_global(personal_lr):
    # ϖ ← ω + (1 − 2η_L)^S (ϖ − ω) when the loss weight 1 − λ/2 is 0.
    x, y = _data(n=24)
    fm = _flat()
    omega, varpi = _vector(fm.spec.dim, 1), _vector(fm.spec.dim, 2)
    algo = Ditto(DittoConfig(lam=2.0, personal_lr=personal_lr, batch_size=8))
    state = {"personal": varpi}
    algo.client_update(_ctx(fm, omega, x, y, state))
    expected = omega + (1 - 2 * personal_lr) ** 3 * (varpi - omega)
    np.testing.assert_allclose(state["personal"], expected, rtol=0, atol=1e-6)


def test_lambda_zero_is_local_training_and_ignores_the_global_model():
    # Arrange
    x, y = _data(n=30)
    fm = _flat()
    varpi = _vector(fm.spec.dim, 5)
    algo = Ditto(DittoConfig(lam=0.0, lr=0.1, personal_lr=0.2, batch_size=8))
    # Act: two different (e.g. differently noised) global models
    outs = []
    for seed in (6, 7):
        state = {"personal": varpi.copy()}
        algo.client_update(_ctx(fm, _vector(fm.spec.dim, seed), x, y, state, seed=3))
        outs.append(state["personal"])
    # Assert: plain SGD on F_n from ϖ with the PL batches (drawn after the FL ones)
    rng = np.random.default_rng(3)
    batch_indices(len(y), batch_size=8, local_epochs=1, local_steps=None, rng=rng)
    local = local_sgd(_flat(), varpi, x, y, lr=0.2, batch_size=8, rng=rng)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], local.vector, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    ("clip_target", "uploads_delta"),
    [("model", False), ("update", True)],
    ids=["model", "update"],
)
def test_upload_and_uniform_server_average(clip_target, uploads_delta):
    # Arrange
    x, y = _data(n=20)
    fm = _flat()
    omega = _vector(fm.spec.dim, 1)
    algo = Ditto(DittoConfig(lr=0.1, batch_size=8, clip_target=clip_target))
    trained = local_sgd(
        _flat(), omega, x, y, lr=0.1, batch_size=8, rng=np.random.default_rng(0)
    )
    # Act
    update = algo.client_update(_ctx(fm, omega, x, y, {}))
    received = np.stack([update.vector, update.vector + 1.0]).astype(np.float32)
    new = algo.server_update(omega, received, np.array([update.weight, 1.0]))
    # Assert: the upload is u (eq. 5 clips it) or u − ω; the mean has p_n = 1/N
    assert algo.uploads_delta is uploads_delta
    assert update.weight == 1.0
    sent = trained.vector - omega if uploads_delta else trained.vector
    np.testing.assert_allclose(update.vector, sent, rtol=0, atol=1e-6)
    base = omega if uploads_delta else 0.0
    np.testing.assert_allclose(new, base + sent + 0.5, rtol=0, atol=1e-5)


def test_personal_model_starts_at_first_received_global_and_is_kept():
    x, y = _data(n=20)
    fm = _flat()
    omega = _vector(fm.spec.dim, 1)
    algo = Ditto(DittoConfig(lam=2.0, personal_lr=0.5, batch_size=8))
    state: dict = {}
    assert algo.eval_vectors(omega, state)["personal"] is omega
    algo.client_update(_ctx(fm, omega, x, y, state))
    assert state["personal"].dtype == np.float32
    np.testing.assert_allclose(state["personal"], omega, rtol=0, atol=1e-7)
    vectors = algo.eval_vectors(omega + 1, state)
    assert vectors["personal"] is state["personal"]


def test_controls_override_the_config_per_client():
    # The scheduler's per-client λ_n, η_P (seed 000) reach the PL step.
    x, y = _data(n=20)
    fm = _flat()
    omega, varpi = _vector(fm.spec.dim, 1), _vector(fm.spec.dim, 2)
    algo = Ditto(DittoConfig(lam=0.0, personal_lr=0.01, batch_size=8))
    state = {"personal": varpi}
    algo.client_update(
        _ctx(fm, omega, x, y, state, controls={"lam": 2.0, "personal_lr": 0.5})
    )
    np.testing.assert_allclose(state["personal"], omega, rtol=0, atol=1e-7)


def test_paper_gd_step_mode_takes_one_full_batch_step():
    # Alg. 1 line 5: u = ω − η_G ∇F_n(ω), full batch.
    x, y = _data(n=25)
    fm = _flat()
    omega = _vector(fm.spec.dim, 1)
    module = _oracle_module(omega)
    loss = F.cross_entropy(module(torch.from_numpy(x)), torch.from_numpy(y))
    grad = torch.autograd.grad(loss, list(module.parameters()))
    expected = omega - 0.3 * torch.cat([g.reshape(-1) for g in grad]).numpy()
    algo = Ditto(DittoConfig(lr=0.3, local_mode="paper_gd_step", local_epochs=5))
    update = algo.client_update(_ctx(fm, omega, x, y, {}))
    np.testing.assert_allclose(update.vector, expected, rtol=0, atol=2e-6)
    assert update.metrics["steps"] == 1.0
    assert update.metrics["personal_steps"] == 1.0


def test_config_defaults_and_declared_controls():
    cfg = DittoConfig(lr=0.02)
    assert cfg.personal_lr == 0.02
    assert DittoConfig(lr=0.02, personal_lr=0.1).personal_lr == 0.1
    for name, (low, high) in Ditto.controls.items():
        assert low <= getattr(cfg, name) <= high
    with pytest.raises(ValueError, match="lam"):
        DittoConfig(lam=2.5)
    with pytest.raises(ValueError, match="personal_lr"):
        DittoConfig(personal_lr=-1.0)
