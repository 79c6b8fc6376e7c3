"""WPFL's Dithering baseline end to end, and Table III's bits in metrics.parquet."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rayfl.actors.client import ClientHost
from rayfl.actors.setup import ActorSetup
from rayfl.compression.dithering import DitheredPayload
from rayfl.config import load_config
from rayfl.data.federated import build_federated
from rayfl.privacy.wpfl_mechanisms import mechanism_noise
from rayfl.system import initial_vector
from rayfl.uplink import UplinkModel
from tests.configs import WPFL_PRIVACY

# All tests here use the shared Ray session (tests/conftest.py): the module then runs
# with the other Ray modules instead of starting Ray again at its first Ray test.
pytestmark = pytest.mark.usefixtures("ray_session")

CFG = {
    "seed": 3,
    "data": {"dataset": "digits", "num_clients": 10, "partition": "iid"},
    "model": {"kind": "mlr"},
    "algorithm": {
        "kind": "wpfl",
        "lr": 0.1,
        "personal_lr": 0.1,
        "local_steps": 3,
        "personal_steps": 3,
        "batch_size": 16,
        "dp_mechanism": "dithering",
    },
    "scheduler": {"policy": "round_robin"},
    "wireless": {"num_subchannels": 4, "effects": "bit_flip"},
    "privacy": WPFL_PRIVACY,
    "compression": {"quantize_bits": None},
    "ray": {"num_cpus": 2},
    "output": {"plots": False, "progress": False},
}


def test_mechanism_noise_gives_the_laplace_scale():
    noise = mechanism_noise(
        "dithering",
        epsilon=1.0,
        delta=1e-3,
        max_uploads=20,
        clip_norm=7.0,
        num_train=[3000, 2625],
        sample_rate=0.01,
    )
    assert noise.noise_std == 0.0  # no Gaussian stage
    assert noise.sensitivity == pytest.approx(2 * 7 / 2625)
    assert noise.laplace_scale == pytest.approx(noise.sensitivity * 20 / 1.0)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"compression.quantize_bits": 16}, "quantize_bits=null"),
        ({"privacy.epsilon": None}, "finite privacy.epsilon"),
        # refused by the config itself now (noise fields with mechanism none)
        ({"privacy.mechanism": "none"}, r"privacy.mechanism is 'none' \(no noise\)"),
        ({"privacy.max_uploads": None}, "max_uploads"),
        ({"compression.sparsify_fraction": 0.5}, "sparsify_fraction=1"),
    ],
)
def test_config_refuses_bad_combinations(override, message):
    with pytest.raises(ValueError, match=message):
        UplinkModel(load_config(CFG, override), num_train=[50] * 10)


def test_uplink_model_adds_no_gaussian_and_flips_bits():
    uplink = UplinkModel(load_config(CFG), num_train=[50] * 10)
    assert uplink.noise_std == 0.0 and uplink.coded_uploads
    proposed = load_config(
        CFG,
        {"algorithm.dp_mechanism": "proposed", "compression.quantize_bits": 16},
    )
    assert not UplinkModel(proposed, num_train=[50] * 10).coded_uploads


def test_client_uploads_dithered_indices_with_laplace_error():
    cfg = load_config(CFG)
    data = build_federated(cfg.data, seed=cfg.seed)
    vector = initial_vector(cfg, tuple(data.input_shape), data.num_classes)
    host = ClientHost(
        data,
        [0, 1],
        ActorSetup.from_config(
            cfg, input_shape=tuple(data.input_shape), num_classes=data.num_classes
        ),
    )
    records, bundle, _ = host.train(1, vector, [0, 1])
    b = 2 * 3.0 / int(np.min(data.num_train)) * 2 / 1.0  # Δs·T0/ε
    for record, payload in zip(records, bundle.payloads, strict=True):
        assert isinstance(payload, DitheredPayload)
        assert payload.laplace_scale == pytest.approx(b)
        assert record["dither_laplace_scale"] == pytest.approx(b)
        # honest size: Σ w_i, logged as the link's payload and as bits/param
        assert record["bits"] == record["payload_bits"] == payload.payload_bits
        assert record["dither_index_bits"] == pytest.approx(
            payload.payload_bits / payload.dim
        )
        assert 1.0 <= record["effective_quantization_bits"] <= 1 + 32
        assert record["effective_bits_per_parameter"] <= record["dither_index_bits"]
    # the decoded upload is the clipped model x plus Laplace(b) noise; x is the
    # upload of the same clients without dithering (clip only, same training)
    plain = load_config(CFG, {"algorithm.dp_mechanism": "none"})
    twin = ClientHost(
        data,
        [0, 1],
        ActorSetup.from_config(
            plain, input_shape=tuple(data.input_shape), num_classes=data.num_classes
        ),
    )
    _, clipped, _ = twin.train(1, vector, [0, 1])
    noise, half_step = [], []
    for p, x in zip(bundle.payloads, clipped.payloads, strict=True):
        assert x.codes is None and np.linalg.norm(x.values) <= 3.0 + 1e-4
        noise.append(p.values.astype(np.float64) - x.values)
        half_step.append(p.draws()[0] / 2)
    noise = np.concatenate(noise)
    assert np.all(np.abs(noise) <= np.concatenate(half_step) + 1e-6)
    assert stats.kstest(noise, stats.laplace(scale=b).cdf).pvalue > 1e-3


def test_a_diverged_model_is_passed_on_for_the_server_to_reject():
    from rayfl.algorithms.registry import make_algorithm
    from rayfl.compression.payload import Payload

    cfg = load_config(CFG)
    algo = make_algorithm(cfg.algorithm)
    algo.bind(privacy=cfg.privacy, seed=cfg.seed)
    diverged = Payload.dense(np.array([np.nan, 1.0], np.float32))
    assert algo.encode_upload(diverged, None) is diverged  # cloud drops non-finite


def _bits_columns(result):
    up = result.metrics[result.metrics["scheduled"]]
    return up, result.metrics[~result.metrics["scheduled"]]


def _small(tmp_path):
    """One round: 6 clients, 4 subchannels, T0 = 1."""
    return {
        "output.dir": str(tmp_path),
        "privacy.max_uploads": 1,
        "data.num_clients": 6,
        "rounds": 1,
    }


def test_proposed_run_writes_effective_bits_to_metrics_parquet(ray_session, tmp_path):
    import rayfl

    # Table III's B_q/B_o of the 16-bit codes reach metrics.parquet
    proposed = rayfl.run(
        CFG,
        _small(tmp_path)
        | {"algorithm.dp_mechanism": "proposed", "compression.quantize_bits": 16},
    )
    up, idle = _bits_columns(proposed)
    assert len(up) == 4 and len(idle) == 2
    bq, bo = up["effective_quantization_bits"], up["effective_overhead_bits"]
    assert ((bq > 0) & (bq <= 16)).all() and ((bo >= 0) & (bo <= 4)).all()
    assert (up["effective_bits_per_parameter"] <= 16).all()
    assert idle["effective_quantization_bits"].isna().all()
    assert up["dither_index_bits"].isna().all()


@pytest.mark.slow
def test_dithering_run_end_to_end(ray_session, tmp_path):
    import rayfl

    dithered = rayfl.run(CFG, _small(tmp_path))
    up, _ = _bits_columns(dithered)
    assert len(up) == 4 and up["dither_index_bits"].between(2, 32).all()
    np.testing.assert_allclose(up["bits"], up["dither_index_bits"] * 650)  # MLR d
    assert up["delivered"].all()  # bit flips, never a CRC drop
    assert np.isfinite(dithered.rounds["personal_acc"].dropna()).all()
