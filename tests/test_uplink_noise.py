"""Per-client DP-Ditto noise: σ_n with Δs_n = 2C/abs(D_n) (seed 001 eqs. 6-8)."""

from __future__ import annotations

import numpy as np
import pytest

from rayfl.actors.client import ClientHost
from rayfl.actors.setup import ActorSetup
from rayfl.config import load_config
from rayfl.data.federated import build_federated
from rayfl.privacy.gaussian import dp_ditto_noise_std
from rayfl.system import initial_vector
from rayfl.uplink import UplinkModel, UplinkSections

# rayfl's client hosts put and get objects: without a session Ray would start
# itself with its defaults (every CPU), so the module uses the shared one.
pytestmark = pytest.mark.usefixtures("ray_session")

CFG = {
    "rounds": 10,
    "data": {
        "dataset": "digits",
        "num_clients": 4,
        "partition": "size_skew",
        "size_distribution": "linear",
    },
    "model": {"kind": "mlr"},
    "algorithm": {"kind": "ditto", "local_steps": 1, "batch_size": 8},
    "privacy": {
        "mechanism": "gaussian",
        "calibration": "dp_ditto",
        "epsilon": 1.0,
        "delta": 0.01,
        "clip_norm": 1.0,
    },
}


def test_each_client_gets_the_sigma_of_its_own_dataset_size():
    cfg = load_config(CFG)
    sizes = np.array([100, 200, 300, 400])
    uplink = UplinkModel(cfg, num_train=sizes)
    expected = [
        dp_ditto_noise_std(
            clip_norm=1.0,
            dataset_size=int(m),
            num_rounds=10,
            num_clients=4,
            epsilon=1.0,
            delta=0.01,
        )
        for m in sizes
    ]
    np.testing.assert_allclose(uplink.client_noise_std, expected, rtol=1e-12)
    # the ledger accounts each client at z_n = σ_n/(2C) (C = 1): Δ = 2C is the
    # sensitivity the whole-model clip enforces, not the paper's Δs_n = 2C/|D_n|
    np.testing.assert_allclose(
        uplink.client_noise_multiplier, uplink.client_noise_std / 2.0, rtol=1e-12
    )
    assert len(set(uplink.client_noise_multiplier.tolist())) == 4


def test_explicit_noise_std_keeps_one_sigma():
    cfg = load_config(CFG, {"privacy.noise_std": 0.1})
    uplink = UplinkModel(cfg, num_train=[100, 200, 300, 400])
    assert uplink.client_noise_std is None and uplink.noise_std == 0.1


def test_client_host_adds_each_clients_own_noise():
    cfg = load_config(CFG, {"algorithm.lr": 1e-9})
    data = build_federated(cfg.data, seed=cfg.seed)
    sigmas = (0.5, 0.05, 0.5, 0.05)
    setup = ActorSetup.from_config(
        cfg,
        input_shape=tuple(data.input_shape),
        num_classes=data.num_classes,
        noise_std=0.2,
        client_noise_std=sigmas,
    )
    vector = initial_vector(cfg, tuple(data.input_shape), data.num_classes) * 0
    host = ClientHost(data, [0, 1, 2, 3], setup)
    _, bundle, _ = host.train(0, vector, [0, 1, 2, 3])
    for client, payload in zip(bundle.clients, bundle.payloads, strict=True):
        noise = payload.to_dense()  # ω = 0 and lr ≈ 0: the upload is the noise
        np.testing.assert_allclose(np.std(noise), sigmas[client], rtol=0.15)


def test_uplink_model_from_sections_equals_the_run_config_adapter():
    cfg = load_config(CFG, {"seed": 3})
    sizes = [100, 200, 300, 400]
    sections = UplinkSections.of(cfg)
    built = [
        UplinkModel(sections, num_train=sizes),
        UplinkModel(cfg, num_train=sizes),  # a whole config is narrowed too
    ]
    assert (sections.seed, sections.rounds, sections.privacy) == (3, 10, cfg.privacy)
    assert all(u.sections == sections for u in built)
    for u in built[1:]:
        np.testing.assert_array_equal(u.client_noise_std, built[0].client_noise_std)
    # another round count changes the dp_ditto calibration: the field is read
    longer = UplinkModel(
        UplinkSections(**{**vars(sections), "rounds": 20}), num_train=sizes
    )
    assert np.all(longer.client_noise_std > built[0].client_noise_std)
