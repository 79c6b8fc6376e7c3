"""Baselines at their limiting hyper-parameters equal FedAvg or local training.

Runs the client and server hosts of the engine without Ray (the same code the
actors run), several rounds, full participation, and compares against our FedAvg
run with the same seed or against local SGD written out with the engine's batch
generators. Also: the personalized-download path with client-side DP.
"""

import numpy as np
import pytest

from rayfl.actors.client import ClientHost
from rayfl.actors.cloud import ServerHost
from rayfl.actors.setup import ActorSetup
from rayfl.algorithms.registry import algorithm_class
from rayfl.config import load_config
from rayfl.data.federated import build_federated
from rayfl.learning.models import FlatModel, build_model
from rayfl.learning.train import local_sgd
from rayfl.seeding import rng_for
from rayfl.system import initial_vector, pack_clients

# rayfl's client hosts put and get objects: without a session Ray would start
# itself with its defaults (every CPU), so the module uses the shared one.
pytestmark = pytest.mark.usefixtures("ray_session")

CLIENTS, ROUNDS = 4, 3


def _config(algorithm, **extra):
    return load_config(
        {
            "seed": 3,
            "rounds": ROUNDS,
            "data": {
                "dataset": "digits",
                "num_clients": CLIENTS,
                "partition": "iid",
                "max_samples_per_client": 80,
            },
            "model": {"kind": "mlp", "hidden": [16]},
            "algorithm": {"batch_size": 20, "lr": 0.1, **algorithm},
            **extra,
        }
    )


def _run(cfg, *, per_actor=2, noise_std=0.0):
    """Return (ω after ROUNDS rounds, per-client eval rows, hosts) of full rounds."""
    data = build_federated(cfg.data, seed=cfg.seed)
    setup = ActorSetup.from_config(
        cfg,
        input_shape=tuple(data.input_shape),
        num_classes=data.num_classes,
        noise_std=noise_std,
    )
    omega = initial_vector(cfg, tuple(data.input_shape), data.num_classes)
    hosts = [ClientHost(data, g, setup) for g in pack_clients(CLIENTS, per_actor)]
    server = ServerHost(setup)
    personalized = algorithm_class(cfg.algorithm).personalized_downloads
    for t in range(ROUNDS):
        clients = list(range(CLIENTS))
        down = server.downloads(t, omega, clients, CLIENTS) if personalized else {}
        uploads = [
            h.train(t, omega, h.clients, None, {c: down[c] for c in h.clients})
            if personalized
            else h.train(t, omega, h.clients)
            for h in hosts
        ]
        omega, _ = server.aggregate(t, omega, None, *(u[1] for u in uploads))
    evals = [row for h in hosts for row in h.evaluate(omega)]
    return omega, evals, data


def _personal(evals):
    return np.array([r["personal_acc"] for r in evals])


@pytest.mark.parametrize(
    "algorithm, fedavg",
    [
        # FedALA, p = 0: θ̂ = Θ every round
        ({"kind": "fedala", "layer_idx": 0}, {}),
        # Per-FedAvg, α → 0: meta steps are SGD steps of size β on FedAvg's batches
        ({"kind": "perfedavg", "lr": 1e-12, "beta": 0.1}, {}),
        # pFedMe, K = R = 1: one step of size η·λ·η_p = 0.5·2·0.1
        (
            {"kind": "pfedme", "lr": 0.5, "lam": 2.0, "personal_lr": 0.1,
             "inner_steps": 1, "local_steps": 1},
            {"local_steps": 1},
        ),
        # APPLE, η₂ = 0 (p = 1/N), one local step, equal-size clients
        ({"kind": "apple", "dr_lr": 0.0, "local_steps": 1}, {"local_steps": 1}),
    ],
    ids=["fedala-p0", "perfedavg-alpha0", "pfedme-K1R1", "apple-drlr0"],
)  # fmt: skip
def test_limit_is_fedavg(algorithm, fedavg):
    # Arrange
    base, _, data = _run(_config({"kind": "fedavg", **fedavg}))
    assert len(set(data.num_train.tolist())) == 1  # equal sizes (APPLE's limit)
    # Act
    omega, _, _ = _run(_config(algorithm))
    # Assert: same global model as FedAvg after 3 rounds (float32 rounding only)
    np.testing.assert_allclose(omega, base, rtol=1e-4, atol=2e-6)
    assert np.abs(base - initial_vector(_config({}), (64,), 10)).max() > 1e-3


def test_fedamp_lambda_zero_is_local_training():
    # Arrange: local SGD of each client from ω⁰ with the engine's batch generators
    cfg = _config({"kind": "fedamp", "lam": 0.0, "alpha_k": 1.0, "sigma": 1.0})
    _, evals, data = _run(cfg)
    omega0 = initial_vector(cfg, tuple(data.input_shape), data.num_classes)
    model = FlatModel(
        build_model("mlp", input_shape=(64,), num_classes=10, hidden=[16])
    )
    # Act
    for c in range(CLIENTS):
        w = omega0
        x, y = data.train(c)
        for t in range(ROUNDS):
            w = local_sgd(
                model, w, x, y, lr=0.1, batch_size=20,
                rng=rng_for(cfg.seed, "batch", round=t, client=c),
            ).vector  # fmt: skip
        # Assert: the personal model is client c's purely local model
        from rayfl.learning.train import evaluate

        acc = evaluate(model, w, *data.test(c))[1]
        assert evals[c]["personal_acc"] == pytest.approx(acc, abs=1e-9)


def test_fedamp_couples_clients_when_lambda_positive():
    local = _personal(_run(_config({"kind": "fedamp", "lam": 0.0}))[1])
    coupled = _run(
        _config({"kind": "fedamp", "lam": 1.0, "alpha_k": 0.3, "sigma": 100.0})
    )[1]
    assert not np.array_equal(local, _personal(coupled))


@pytest.mark.parametrize("kind", ["fedamp", "apple"])
def test_personalized_downloads_are_packing_independent_under_dp(kind):
    # Client-side DP (clip + Gaussian noise in the client host), two packings
    cfg = _config(
        {"kind": kind},
        privacy={"mechanism": "gaussian", "clip_norm": 5.0, "noise_std": 0.05},
    )
    a, ev_a, _ = _run(cfg, per_actor=1, noise_std=0.05)
    b, ev_b, _ = _run(cfg, per_actor=3, noise_std=0.05)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(_personal(ev_a), _personal(ev_b))
    clean, _, _ = _run(cfg, per_actor=2, noise_std=0.0)
    assert not np.array_equal(a, clean)  # the noise reached the server's models
