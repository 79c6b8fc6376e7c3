"""Memory of a population grows with N, not N² (issue 37)."""

import tracemalloc

import numpy as np

from rayfl.actors.client import ClientHost
from rayfl.actors.setup import ActorSetup
from rayfl.config import load_config
from rayfl.data.federated import FederatedData


def _tiny_data(n: int) -> FederatedData:
    """N clients of one train and one test sample of 4 features each."""
    x = np.zeros((2 * n, 4), np.float32)
    y = np.zeros(2 * n, np.int64)
    starts = np.arange(0, 2 * n, 2, dtype=np.int64)
    return FederatedData(
        x=x,
        y=y,
        train_slices=np.stack([starts, starts + 1], axis=1),
        test_slices=np.stack([starts + 1, starts + 2], axis=1),
        num_classes=2,
        input_shape=(4,),
        name="tiny",
    )


def _no_ray(actor) -> None:
    """``mark_restarted`` without asking Ray (which would start a session)."""
    actor._state_lost = False


def _contexts_bytes(n: int) -> int:
    """Bytes allocated by one round's contexts for all N clients of one host."""
    cfg = load_config({"model": {"kind": "mlr"}})
    data = _tiny_data(n)
    setup = ActorSetup.from_config(
        cfg, input_shape=(4,), num_classes=2, noise_std=0.0, server_noise_std=0.0
    )
    host = ClientHost(data, list(range(n)), setup)
    vector = np.zeros(host.model.spec.dim, np.float32)
    tracemalloc.start()
    try:
        contexts = [host._context(0, vector, c, {}, 0.0) for c in range(n)]
        used, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(contexts) == n
    return used


def test_round_contexts_are_linear_in_the_population(monkeypatch):
    monkeypatch.setattr("rayfl.actors.client.mark_restarted", _no_ray)
    # A round's K contexts once each held an (N,) copy of the train sizes: K x N.
    small, large = _contexts_bytes(2000), _contexts_bytes(4000)
    assert 1.5 < large / small < 2.5, (small, large)
    assert small / 2000 < 4096, small  # per client, not per client pair
