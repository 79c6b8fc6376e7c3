import numpy as np
import pytest

from rayfl.algorithms.base import ClientContext
from rayfl.algorithms.config import FedAvgConfig, FedProxConfig
from rayfl.algorithms.fedavg import FedAvg
from rayfl.algorithms.fedprox import FedProx
from rayfl.learning.models import FlatModel, build_model


def _contexts(model, n_clients=4, seed=0):
    rng = np.random.default_rng(seed)
    start = rng.normal(size=model.spec.dim).astype(np.float32) * 0.1
    ctxs = []
    for c in range(n_clients):
        n = 40 + 10 * c
        x = rng.normal(size=(n, 6)).astype(np.float32)
        y = rng.integers(0, 3, size=n)
        ctxs.append(
            ClientContext(
                c, 0, start, x, y, model, {}, {}, np.random.default_rng([seed, c])
            )
        )
    return ctxs


def _fresh(ctxs):
    return [
        ClientContext(
            c.client,
            c.round,
            c.global_vector,
            c.x_train,
            c.y_train,
            c.model,
            {},
            dict(c.controls),
            np.random.default_rng([0, c.client]),
        )
        for c in ctxs
    ]


@pytest.mark.parametrize(
    "cls, cfg_cls, extra",
    [(FedAvg, FedAvgConfig, {}), (FedProx, FedProxConfig, {"mu": 0.1})],
    ids=["fedavg", "fedprox"],
)
def test_trainers_agree(cls, cfg_cls, extra):
    model = FlatModel(build_model("mlp", input_shape=(6,), num_classes=3, hidden=(8,)))
    ctxs = _contexts(model)
    out = {}
    for trainer in ("autograd", "fast", "vectorized"):
        algo = cls(cfg_cls(trainer=trainer, batch_size=16, lr=0.1, **extra))
        out[trainer] = algo.client_update_many(_fresh(ctxs))
    for trainer in ("fast", "vectorized"):
        for a, b in zip(out["autograd"], out[trainer], strict=True):
            np.testing.assert_allclose(a.vector, b.vector, rtol=1e-5, atol=1e-6)
            assert a.weight == b.weight


def test_fedprox_mu_zero_is_fedavg_and_large_mu_stays_home():
    model = FlatModel(build_model("mlr", input_shape=(6,), num_classes=3))
    ctxs = _contexts(model, n_clients=1)
    avg = FedAvg(FedAvgConfig(trainer="autograd")).client_update(_fresh(ctxs)[0])
    prox0 = FedProx(FedProxConfig(trainer="autograd", mu=0.0)).client_update(
        _fresh(ctxs)[0]
    )
    prox = FedProx(FedProxConfig(trainer="autograd", mu=5.0)).client_update(
        _fresh(ctxs)[0]
    )
    np.testing.assert_array_equal(avg.vector, prox0.vector)
    assert np.linalg.norm(prox.vector) < np.linalg.norm(avg.vector)
