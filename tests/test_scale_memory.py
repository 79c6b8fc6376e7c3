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


def _digits_host(clients, reduce_in_actor):
    from rayfl.data.federated import build_federated

    cfg = load_config(
        {
            "data": {"dataset": "digits", "num_clients": 6, "partition": "iid"},
            "model": {"kind": "mlr"},
            "algorithm": {"batch_size": 8, "lr": 0.1},
        }
    )
    data = build_federated(cfg.data, seed=cfg.seed)
    setup = ActorSetup.from_config(
        cfg,
        input_shape=tuple(data.input_shape),
        num_classes=data.num_classes,
        noise_std=0.0,
        server_noise_std=0.0,
        reduce_in_actor=reduce_in_actor,
    )
    host = ClientHost(data, clients, setup)
    return host, np.zeros(host.model.spec.dim, np.float32)


def test_chunked_training_gives_the_same_uploads(monkeypatch):
    # Training a host's clients 2 at a time (memory O(chunk)) changes no bit.
    monkeypatch.setattr("rayfl.actors.client.mark_restarted", _no_ray)
    clients = [0, 1, 2, 3, 4]
    for reduce in (True, False):
        host, start = _digits_host(clients, reduce)
        whole = host.train(0, start, clients)
        monkeypatch.setattr("rayfl.actors.client.TRAIN_CHUNK", 2)
        host, start = _digits_host(clients, reduce)
        chunked = host.train(0, start, clients)
        monkeypatch.undo()
        monkeypatch.setattr("rayfl.actors.client.mark_restarted", _no_ray)
        assert [r["train_loss"] for r in whole[0]] == [
            r["train_loss"] for r in chunked[0]
        ]
        a, b = whole[1], chunked[1]
        np.testing.assert_array_equal(a.clients, b.clients)
        np.testing.assert_array_equal(a.weights, b.weights)
        if reduce:
            np.testing.assert_array_equal(a.partial.mean(), b.partial.mean())
            assert a.partial.count == b.partial.count == 5
        else:
            for p, q in zip(a.payloads, b.payloads, strict=True):
                np.testing.assert_array_equal(p.to_dense(), q.to_dense())


def test_state_snapshot_is_columnar_and_restores():
    from rayfl.actors.state import ClientStateStore, StateSnapshot

    store = ClientStateStore(list(range(1000)))
    for c in range(0, 1000, 7):
        store[c]["local_updates"] = c
        store[c]["rate"] = c / 2
    store[3]["personal"] = np.ones(4, np.float32)
    store[5]["tag"] = "odd"  # fits no column
    assert not store.other.keys() - {5}  # counters are columns, not dicts
    assert store.scalars["local_updates"].dtype == np.int64
    snap = store.snapshot()
    assert isinstance(snap, StateSnapshot)
    store[7]["local_updates"] = -1  # the snapshot does not move
    again = ClientStateStore(list(range(1000)))
    again.load(snap)
    assert again[7]["local_updates"] == 7 and again[14]["rate"] == 7.0
    assert again[5]["tag"] == "odd" and again[3]["personal"][0] == 1.0
    expected = {c for c in range(0, 1000, 7)} | {3, 5}
    assert set(again.export()) == expected
    repacked = ClientStateStore([14, 999, 5])  # another packing of the clients
    repacked.load(snap)
    assert set(repacked.export()) == {14, 5}
