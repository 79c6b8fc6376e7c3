"""The client host's uplink: local DP happens inside the client (trust boundary)."""

import numpy as np
import pytest

from rayfl.actors.client import ClientHost
from rayfl.actors.cloud import LinkOutcome, ServerHost
from rayfl.actors.setup import ActorSetup
from rayfl.config import load_config
from rayfl.data.federated import build_federated
from rayfl.learning.models import FlatModel, build_model
from rayfl.learning.train import local_sgd
from rayfl.privacy.clip import clip_by_l2_norm
from rayfl.seeding import rng_for
from rayfl.system import initial_vector

# rayfl's client hosts put and get objects: without a session Ray would start
# itself with its defaults (every CPU), so the module uses the shared one.
pytestmark = pytest.mark.usefixtures("ray_session")

CFG = {
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"kind": "mlp", "hidden": [32]},
    "algorithm": {"local_epochs": 1, "batch_size": 16, "lr": 0.1},
}


def _host(overrides, noise_std=0.0, server_noise_std=0.0):
    cfg = load_config(CFG, overrides)
    data = build_federated(cfg.data, seed=cfg.seed)
    setup = ActorSetup.from_config(
        cfg,
        input_shape=tuple(data.input_shape),
        num_classes=data.num_classes,
        noise_std=noise_std,
        server_noise_std=server_noise_std,
    )
    vector = initial_vector(cfg, tuple(data.input_shape), data.num_classes)
    return cfg, data, setup, vector


def test_local_dp_upload_is_clipped_update_plus_noise_of_configured_std():
    # Arrange
    sigma, clip = 0.05, 0.5
    cfg, data, setup, start = _host(
        [
            "privacy.mechanism=gaussian",
            f"privacy.clip_norm={clip}",
            f"privacy.noise_std={sigma}",
        ],
        noise_std=sigma,
    )
    host = ClientHost(data, [0, 1], setup)
    # Act: what the client returns is what enters the object store
    records, uploads, _ = host.train(3, start, [1])
    sent = uploads.payloads[0].to_dense()
    # Assert: recompute the clipped update independently of the pipeline
    fm = FlatModel(
        build_model("mlp", input_shape=data.input_shape, num_classes=10, hidden=(32,))
    )
    x, y = data.train(1)
    trained = local_sgd(
        fm,
        start,
        x,
        y,
        lr=0.1,
        batch_size=16,
        rng=rng_for(cfg.seed, "batch", round=3, client=1),
    )
    clipped, norm = clip_by_l2_norm(trained.vector - start, clip_norm=clip)
    assert norm > clip  # clipping was active
    residual = sent - clipped
    d = len(residual)
    np.testing.assert_allclose(residual.mean(), 0.0, atol=5 * sigma / np.sqrt(d))
    np.testing.assert_allclose(residual.std(), sigma, rtol=5 / np.sqrt(2 * d))
    assert not np.allclose(sent, clipped, atol=sigma / 10)  # nothing un-noised left


def test_central_dp_client_sends_clipped_update_and_server_adds_noise():
    sigma, clip = 0.2, 0.5
    cfg, data, setup, start = _host(
        [
            "privacy.mechanism=gaussian",
            f"privacy.clip_norm={clip}",
            f"privacy.noise_std={sigma}",
            "privacy.placement=cloud",
        ],
        server_noise_std=sigma,
    )
    host = ClientHost(data, [0, 1, 2, 3], setup)
    _, uploads, _ = host.train(0, start, [0, 1, 2, 3])
    dense = np.stack([p.to_dense() for p in uploads.payloads])
    np.testing.assert_array_less(np.linalg.norm(dense, axis=1), clip * (1 + 1e-5))
    server = ServerHost(setup)
    new, record = server.aggregate(0, start, None, uploads)
    w = uploads.weights / uploads.weights.sum()
    residual = new - (start + (w[:, None] * dense).sum(0))
    expected = sigma * w.max()  # sensitivity of the weighted mean (uplink.py note 2)
    np.testing.assert_allclose(residual.std(), expected, rtol=0.05)
    assert record["delivered"] == [0, 1, 2, 3]


def test_server_drops_lost_packets_and_rejects_non_finite_updates():
    cfg, data, setup, start = _host([])
    host = ClientHost(data, [0, 1, 2], setup)
    _, uploads, _ = host.train(0, start, [0, 1, 2])
    link = LinkOutcome(np.array([0, 1, 2]), np.zeros(3), np.array([True, False, True]))
    server = ServerHost(setup)
    poisoned = uploads.payloads[2].to_dense().copy()
    poisoned[5] = np.nan
    from rayfl.actors.messages import Uploads
    from rayfl.compression.payload import Payload

    bad = Uploads(
        uploads.clients,
        (*uploads.payloads[:2], Payload.dense(poisoned)),
        uploads.weights,
    )
    new, record = server.aggregate(0, start, link, bad)
    assert record == {"delivered": [0], "rejected": [2], "reasons": {2: "non_finite"}}
    np.testing.assert_allclose(new, start + uploads.payloads[0].to_dense(), rtol=1e-6)


@pytest.mark.parametrize("bits", [8, 16], ids=["8-bit", "16-bit"])
def test_bit_flip_effects_corrupt_quantized_payload_at_eq14_rate(bits):
    cfg, data, setup, start = _host(
        [
            "privacy.clip_norm=1.0",
            f"compression.quantize_bits={bits}",
            "wireless.effects=bit_flip",
        ]
    )
    host = ClientHost(data, [0], setup)
    _, uploads, _ = host.train(0, start, [0])
    payload = uploads.payloads[0]
    ber = 1e-3
    server = ServerHost(setup)
    new, _ = server.aggregate(
        0, start, LinkOutcome(np.array([0]), np.array([ber]), np.array([True])), uploads
    )
    changed = np.mean(~np.isclose(new - start, payload.to_dense(), atol=1e-7))
    expected = 1 - (1 - ber) ** bits  # eq. (14) of seed_000
    d = payload.dim
    assert abs(changed - expected) < 5 * np.sqrt(expected / d) + 1e-3


def test_pre_reduced_uploads_aggregate_bit_for_bit_like_per_client_uploads():
    # Arrange: the same clients, once summed in their actors, once sent one by one
    cfg, data, setup, start = _host([])
    import dataclasses

    reduced = dataclasses.replace(setup, reduce_in_actor=True)
    plain_hosts = [ClientHost(data, [0, 1], setup), ClientHost(data, [2, 3], setup)]
    reduced_hosts = [
        ClientHost(data, [0], reduced),
        ClientHost(data, [1, 2, 3], reduced),
    ]
    # Act
    plain = [h.train(0, start, h.clients)[1] for h in plain_hosts]
    summed = [h.train(0, start, h.clients)[1] for h in reduced_hosts]
    new_plain, rec_plain = ServerHost(setup).aggregate(0, start, None, *plain)
    new_summed, rec_summed = ServerHost(reduced).aggregate(0, start, None, *summed)
    # Assert
    assert all(u.partial is not None and u.payloads == () for u in summed)
    np.testing.assert_array_equal(new_plain, new_summed)
    want = {"delivered": [0, 1, 2, 3], "rejected": [], "reasons": {}}
    assert rec_plain == rec_summed == want


def test_setup_from_sections_alone_trains_and_aggregates_like_the_run_config():
    # Arrange: one setup from the run config, one from its sections by hand
    # (the setup has no whole-config field: the hosts read only sections)
    cfg, data, setup, start = _host(
        ["privacy.mechanism=gaussian", "privacy.clip_norm=0.5", "seed=7"],
        noise_std=0.05,
    )
    sections = ActorSetup(
        tuple(data.input_shape),
        data.num_classes,
        0.05,
        model=cfg.model,
        algorithm=cfg.algorithm,
        privacy=cfg.privacy,
        compression=cfg.compression,
        wireless=cfg.wireless,
        seed=cfg.seed,
        rounds=cfg.rounds,
    )
    # Act
    runs = []
    for s in (setup, sections):
        _, uploads, _ = ClientHost(data, [0, 1], s).train(2, start, [0, 1])
        runs.append(ServerHost(s).aggregate(2, start, None, uploads)[0])
    # Assert
    assert sections == setup and (setup.seed, setup.rounds) == (7, cfg.rounds)
    assert not hasattr(setup, "config") and sections.privacy.clip_norm == 0.5
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], start)
