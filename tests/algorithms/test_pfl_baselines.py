"""pFedMe, Per-FedAvg, FedAMP, FedALA, APPLE: one round against hand computations.

Every oracle is written independently with numpy on a multinomial logistic
regression (MLR) whose flat layout is ``nn.Linear``'s (weight rows, then bias),
with full-batch steps so the batch order cannot matter.
"""

import numpy as np
import pytest

from rayfl.algorithms.apple import APPLE, apple_lambda, apple_local
from rayfl.algorithms.base import ClientContext
from rayfl.algorithms.config import (
    APPLEConfig,
    FedALAConfig,
    FedAMPConfig,
    PerFedAvgConfig,
    PFedMeConfig,
)
from rayfl.algorithms.fedala import FedALA
from rayfl.algorithms.fedamp import FedAMP, attention_weights, cloud_models
from rayfl.algorithms.perfedavg import PerFedAvg
from rayfl.algorithms.pfedme import PFedMe
from rayfl.algorithms.registry import make_algorithm
from rayfl.config import load_config
from rayfl.learning.aggregate import partial_sum
from rayfl.learning.models import FlatModel, build_model

D, K, N = 4, 3, 6  # features, classes, samples


def _data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, D)).astype(np.float32)
    y = np.array([0, 1, 2, 0, 1, 1], dtype=np.int64)
    return x, y


def _model():
    return FlatModel(build_model("mlr", input_shape=(D,), num_classes=K))


def _vec(seed, scale=0.5):
    dim = K * D + K
    return (np.random.default_rng(seed).normal(size=dim) * scale).astype(np.float64)


def grad_np(v, x, y):
    """Mean cross-entropy gradient of the MLR at flat v = [W (K×D) row-major, b]."""
    w, b = v[: K * D].reshape(K, D), v[K * D :]
    logits = x.astype(np.float64) @ w.T + b
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    err = p - np.eye(K)[y]
    return np.concatenate([(err.T @ x / len(y)).reshape(-1), err.mean(axis=0)])


def _ctx(omega, state=None, *, download=None, round=0, client=0, seed=0, **kw):
    x, y = _data()
    return ClientContext(
        client=client,
        round=round,
        global_vector=np.asarray(omega, np.float32),
        x_train=x,
        y_train=y,
        model=_model(),
        state={} if state is None else state,
        controls={},
        rng=np.random.default_rng(seed),
        download=download,
        **kw,
    )


def test_registry_builds_every_baseline_from_yaml_kind():
    for kind, cls in [
        ("pfedme", PFedMe),
        ("perfedavg", PerFedAvg),
        ("fedamp", FedAMP),
        ("fedala", FedALA),
        ("apple", APPLE),
    ]:
        cfg = load_config({"algorithm": {"kind": kind}})
        assert isinstance(make_algorithm(cfg.algorithm), cls)


def test_pfedme_one_round_matches_hand_computation():
    # Arrange: R = 2 local rounds, K = 2 inner steps, full batches
    x, y = _data()
    omega = _vec(1)
    eta, plr, lam = 0.3, 0.05, 15.0
    cfg = PFedMeConfig(
        lr=eta, personal_lr=plr, lam=lam, inner_steps=2, local_steps=2,
        batch_size=N, beta=0.5,
    )  # fmt: skip
    w, theta = omega.copy(), omega.copy()
    for _ in range(2):
        for _ in range(2):
            theta = theta - plr * (grad_np(theta, x, y) + lam * (theta - w))
        w = w - eta * lam * (w - theta)
    # Act
    ctx = _ctx(omega)
    algo = PFedMe(cfg)
    update = algo.client_update(ctx)
    new = algo.combine(ctx.global_vector, partial_sum(update.vector[None], [1.0]))
    # Assert: upload w_n, keep θ_n, server ω ← (1 − β)ω + βw
    np.testing.assert_allclose(update.vector, w, atol=2e-6)
    np.testing.assert_allclose(ctx.state["personal"], theta, atol=2e-6)
    np.testing.assert_allclose(new, 0.5 * omega + 0.5 * w, atol=2e-6)
    assert (
        algo.eval_vectors(ctx.global_vector, ctx.state)["personal"]
        is ctx.state["personal"]
    )


def test_perfedavg_one_round_and_personalization_match_hand_computation():
    x, y = _data()
    omega = _vec(2)
    alpha, beta = 0.4, 0.2
    cfg = PerFedAvgConfig(lr=alpha, beta=beta, local_steps=2, batch_size=N)
    w = omega.copy()
    for _ in range(2):
        adapted = w - alpha * grad_np(w, x, y)
        w = w - beta * grad_np(adapted, x, y)  # FO-MAML: gradient at w′, step at w
    algo = PerFedAvg(cfg)
    ctx = _ctx(omega)
    update = algo.client_update(ctx)
    np.testing.assert_allclose(update.vector, w - omega, atol=2e-6)  # upload Δ
    personal = algo.eval_vectors_for(_ctx(omega))["personal"]
    np.testing.assert_allclose(
        personal, omega - alpha * grad_np(omega, x, y), atol=2e-6
    )


def test_fedamp_attention_and_cloud_models_match_definition():
    rng = np.random.default_rng(3)
    w = rng.normal(size=(4, 5)) * 0.3
    alpha_k, sigma = 0.2, 0.7
    xi = np.zeros((4, 4))
    for i in range(4):
        for j in range(4):
            if i != j:
                d2 = float(np.sum((w[i] - w[j]) ** 2))
                xi[i, j] = alpha_k * np.exp(-d2 / sigma) / sigma
        xi[i, i] = 1.0 - xi[i].sum()
    np.testing.assert_allclose(attention_weights(w, alpha_k=alpha_k, sigma=sigma), xi)
    np.testing.assert_allclose(
        cloud_models(w, alpha_k=alpha_k, sigma=sigma), xi @ w, rtol=1e-6, atol=1e-7
    )


def test_fedamp_one_round_matches_hand_computation():
    # Arrange: the server holds uploads of clients 1, 2; client 0 has its w_0
    x, y = _data()
    lr, alpha_k, lam, sigma = 0.3, 0.5, 0.4, 2.0
    cfg = FedAMPConfig(
        lr=lr, alpha_k=alpha_k, lam=lam, sigma=sigma, local_steps=1, batch_size=N
    )
    algo = FedAMP(cfg)
    w0_server, w0_own, w1, w2 = _vec(4), _vec(5), _vec(6), _vec(7)
    store = {
        "init": np.zeros(K * D + K, np.float32),
        "uploads": {0: w0_server.astype(np.float32), 1: w1, 2: w2},
    }
    xi = [
        alpha_k * np.exp(-np.sum((w0_server - wj) ** 2) / sigma) / sigma
        for wj in (w1, w2)
    ]
    u0 = xi[0] * w1 + xi[1] * w2 + (1 - sum(xi)) * w0_own  # own exact w_0
    g = w0_own - lr * grad_np(w0_own, x, y)
    expected = g - lr * (lam / alpha_k) * (g - u0)  # gradient step, then proximal
    # Act
    down = algo.server_downloads(3, store["init"], store, [0], 3)[0]
    ctx = _ctx(
        np.zeros(K * D + K), {"personal": w0_own.astype(np.float32)}, download=down.data
    )
    update = algo.client_update(ctx)
    # Assert
    assert down.num_elements == K * D + K + 1  # m_0 and ξ_00
    np.testing.assert_allclose(down.data["self_weight"], 1 - sum(xi), rtol=1e-6)
    np.testing.assert_allclose(update.vector, expected, atol=3e-6)
    np.testing.assert_array_equal(ctx.state["personal"], update.vector)


def test_fedamp_first_download_carries_the_initial_model():
    algo = FedAMP(FedAMPConfig())
    omega0 = np.ones(K * D + K, np.float32)
    down = algo.server_downloads(0, omega0, {}, [0, 1], 3)
    # all clients at ω⁰: ξ = α_K/σ each, m = 2 ξ ω⁰, and the start model ω⁰
    xi = 5e-3 / 0.1
    np.testing.assert_allclose(down[0].data["message"], 2 * xi * omega0, rtol=1e-6)
    np.testing.assert_array_equal(down[1].data["start"], omega0)
    assert down[0].num_elements == 2 * (K * D + K) + 1


def test_fedala_one_round_matches_hand_computation():
    # Arrange: not the first ALA → one epoch of one full batch (s = 100 %)
    x, y = _data()
    theta_old, big_theta = _vec(8), _vec(9)
    eta, lr = 2.0, 0.3
    cfg = FedALAConfig(
        layer_idx=1, rand_percent=100, eta=eta, lr=lr, local_steps=1, batch_size=N
    )
    cut = K * D  # p = 1: only the bias is adaptive
    w_old = np.full(K, 0.5)
    diff = big_theta[cut:] - theta_old[cut:]
    start = np.concatenate([big_theta[:cut], theta_old[cut:] + diff * w_old])
    w_new = np.clip(w_old - eta * grad_np(start, x, y)[cut:] * diff, 0.0, 1.0)
    hat = np.concatenate([big_theta[:cut], theta_old[cut:] + diff * w_new])
    trained = hat - lr * grad_np(hat, x, y)
    state = {
        "personal": theta_old.astype(np.float32),
        "ala_weights": w_old.astype(np.float32),
        "ala_started": True,
    }
    # Act
    update = FedALA(cfg).client_update(_ctx(big_theta, state))
    # Assert
    np.testing.assert_allclose(state["ala_weights"], w_new, atol=1e-6)
    np.testing.assert_allclose(update.vector, trained, atol=3e-6)


@pytest.mark.parametrize("p_grad", ["exact", "layer_mean"])
def test_apple_one_step_matches_hand_computation(p_grad):
    x, y = _data()
    cores = np.stack([_vec(10), _vec(11), _vec(12)])
    p = np.array([0.5, 0.3, 0.2])
    p0 = np.array([0.2, 0.3, 0.5])
    lr, dr_lr, mu, lam, own = 0.1, 0.05, 0.7, 0.6, 1
    theta = p @ cores
    g = grad_np(theta, x, y)
    if p_grad == "exact":
        dp = cores @ g
    else:
        dp = np.array(
            [((g * c)[: K * D].mean() + (g * c)[K * D :].mean()) / 2 for c in cores]
        )
    p_new = p - dr_lr * (dp + lam * mu * (p - p0))
    core = cores[own] - lr * 3 * p[own] * g
    new_cores = cores.copy()
    new_cores[own] = core
    # Act
    c, pn, th, _, steps = apple_local(
        _model(), cores.astype(np.float32), own, p, p0, x, y,
        lr=lr, dr_lr=dr_lr, mu=mu, lam=lam, p_grad=p_grad, batch_size=N,
        local_steps=1, rng=np.random.default_rng(0),
    )  # fmt: skip
    # Assert
    assert steps == 1
    np.testing.assert_allclose(c, core, atol=2e-6)
    np.testing.assert_allclose(pn, p_new, atol=1e-6)
    np.testing.assert_allclose(th, p_new @ new_cores, atol=2e-6)


def test_apple_client_uses_its_own_core_and_download_size():
    cfg = APPLEConfig(local_steps=1, batch_size=N, dr_lr=0.0)
    algo = APPLE(cfg)
    omega0 = _vec(13).astype(np.float32)
    store = {"uploads": {2: _vec(14).astype(np.float32)}}
    down = algo.server_downloads(0, omega0, store, [0, 1], 3)
    assert down[0].data is down[1].data  # one shared stack of the 3 cores
    assert down[0].num_elements == 2 * len(omega0)
    np.testing.assert_array_equal(down[0].data["cores"][1], omega0)  # never uploaded
    own = _vec(15).astype(np.float32)
    ctx = _ctx(omega0, {"core": own}, download=down[1].data, client=1, num_rounds=5)
    update = algo.client_update(ctx)
    x, y = _data()
    cores = np.stack([omega0, own, store["uploads"][2]]).astype(np.float64)
    g = grad_np(cores.mean(axis=0), x, y)
    np.testing.assert_allclose(update.vector, own - cfg.lr * g, atol=2e-6)


def test_apple_lambda_schedule():
    assert apple_lambda(0, 10, 1.0) == 1.0
    assert apple_lambda(5, 10, 1.0) == pytest.approx(0.5)
    assert apple_lambda(2, 10, 0.4) == pytest.approx((np.cos(np.pi / 2) + 1) / 2)
    assert apple_lambda(4, 10, 0.4) == 0.0
