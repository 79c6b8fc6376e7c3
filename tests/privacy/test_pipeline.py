from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rayfl.compression.config import CompressionConfig
from rayfl.compression.payload import Payload
from rayfl.privacy.config import PrivacyConfig
from rayfl.privacy.pipeline import (
    ClipStage,
    NoiseStage,
    QuantizeStage,
    ServerNoise,
    SparsifyStage,
    add_server_noise,
    build_client_stages,
    run_stages,
)

finite = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False, width=32)


@st.composite
def chains(
    draw: st.DrawFn,
) -> tuple[np.ndarray, PrivacyConfig, CompressionConfig, float]:
    dim = draw(st.integers(1, 300))
    vector = draw(arrays(np.float32, dim, elements=finite))
    mechanism = draw(st.sampled_from(["none", "gaussian", "quantized_gaussian"]))
    privacy = PrivacyConfig(
        mechanism=mechanism,
        clip_norm=draw(st.floats(1e-3, 1e3)),
        # no noise: no placement (mechanism none refuses the noise fields)
        placement="client"
        if mechanism == "none"
        else draw(st.sampled_from(["client", "edge", "cloud"])),
    )
    bits = draw(st.one_of(st.none(), st.integers(1, 32)))
    compression = CompressionConfig(
        quantize_bits=bits,
        stochastic=draw(st.booleans()),
        quantize_range=draw(st.sampled_from(["clip", "minmax"])),
        sparsify_fraction=draw(st.one_of(st.just(1.0), st.floats(0.01, 1.0))),
        topk=draw(st.booleans()),
        sparsify_rescale=draw(st.booleans()),
    )
    noise_std = draw(st.one_of(st.just(0.0), st.floats(1e-4, 10.0)))
    return vector, privacy, compression, noise_std


@settings(max_examples=150, deadline=None)
@given(chain=chains(), seed=st.integers(0, 2**32 - 1))
def test_random_stage_chains_keep_invariants(
    chain: tuple[np.ndarray, PrivacyConfig, CompressionConfig, float], seed: int
) -> None:
    # Arrange
    vector, privacy, compression, noise_std = chain
    stages = build_client_stages(privacy, compression, noise_std=noise_std)
    dim = vector.shape[0]
    # Act
    payload, metrics = run_stages(vector, stages, np.random.default_rng(seed))
    clipped, _ = stages[0](vector, np.random.default_rng(seed))
    # Assert: shapes, finiteness, clip bound before noise
    dense = payload.to_dense()
    assert dense.shape == (dim,) and dense.dtype == np.float32
    assert np.all(np.isfinite(dense))
    assert isinstance(stages[0], ClipStage)
    assert np.linalg.norm(np.asarray(clipped, np.float64)) <= privacy.clip_norm * (
        1 + 1e-6
    )
    # Assert: payload bits follow the config
    bits = compression.quantize_bits or 32
    if compression.sparsify_fraction == 1.0:
        assert payload.indices is None
        assert payload.payload_bits == bits * dim
    else:
        kept = payload.values.shape[0]
        index_bits = min(kept * math.ceil(math.log2(dim)), dim)
        assert payload.payload_bits == bits * kept + index_bits
    assert metrics["payload_bits"] == payload.payload_bits
    if compression.quantize_bits is not None:
        assert payload.codes is not None
        assert int(payload.codes.max(initial=0)) < 2**compression.quantize_bits


def test_client_chain_order_is_clip_noise_sparsify_quantize() -> None:
    # Arrange
    privacy = PrivacyConfig(mechanism="gaussian", clip_norm=3.0, epsilon=1.0)
    compression = CompressionConfig(quantize_bits=16, sparsify_fraction=0.5)
    # Act
    stages = build_client_stages(privacy, compression, noise_std=0.5)
    # Assert: seed 000 uplink range is +-(C + 3 sigma)
    assert [type(s) for s in stages] == [
        ClipStage,
        NoiseStage,
        SparsifyStage,
        QuantizeStage,
    ]
    assert stages[3].value_range == (-4.5, 4.5)  # type: ignore[attr-defined]


@pytest.mark.parametrize("placement", ["edge", "cloud"])
def test_server_placement_drops_client_noise_and_narrows_range(placement: str) -> None:
    privacy = PrivacyConfig(
        mechanism="gaussian", clip_norm=3.0, epsilon=1.0, placement=placement
    )
    stages = build_client_stages(
        privacy, CompressionConfig(quantize_bits=8), noise_std=0.5
    )
    assert [type(s) for s in stages] == [ClipStage, QuantizeStage]
    assert stages[1].value_range == (-3.0, 3.0)  # type: ignore[attr-defined]


def test_no_mechanism_keeps_clipping_when_clip_norm_set() -> None:
    # seed 001 §2.4 item 6: clipping stays on at eps = inf
    stages = build_client_stages(
        PrivacyConfig(clip_norm=2.0), CompressionConfig(), noise_std=1.0
    )
    assert [type(s) for s in stages] == [ClipStage]


def test_clip_range_without_clip_norm_raises() -> None:
    with pytest.raises(
        ValueError, match="compression.quantize_range='clip' needs privacy.clip_norm"
    ):
        build_client_stages(
            PrivacyConfig(), CompressionConfig(quantize_bits=8), noise_std=0.0
        )


def test_run_stages_is_deterministic_for_a_seed() -> None:
    # Arrange
    privacy = PrivacyConfig(mechanism="gaussian", clip_norm=1.0, epsilon=1.0)
    compression = CompressionConfig(
        quantize_bits=8, stochastic=True, sparsify_fraction=0.3
    )
    stages = build_client_stages(privacy, compression, noise_std=0.1)
    vector = np.linspace(-1, 1, 1000)
    # Act
    first, _ = run_stages(vector, stages, np.random.default_rng(7))
    second, _ = run_stages(vector, stages, np.random.default_rng(7))
    # Assert
    np.testing.assert_array_equal(first.to_dense(), second.to_dense())


def test_dense_chain_without_compression_returns_dense_payload() -> None:
    payload, metrics = run_stages(
        [3.0, 4.0], [ClipStage(1.0)], np.random.default_rng(0)
    )
    assert isinstance(payload, Payload) and payload.indices is None
    np.testing.assert_allclose(payload.to_dense(), [0.6, 0.8], rtol=1e-6)
    np.testing.assert_allclose(
        [metrics["update_norm"], metrics["clip_scale"]], [5.0, 0.2], rtol=1e-6
    )


def test_server_noise_wraps_an_aggregator() -> None:
    # Arrange: mean of two constant updates is 1.0; noise std 0.3 on 1e6 coordinates
    dim = 1_000_000
    updates = [np.zeros(dim, np.float32), np.full(dim, 2.0, np.float32)]
    wrapped = ServerNoise(lambda ups: np.mean(ups, axis=0), noise_std=0.3)
    # Act
    noisy = wrapped(updates, rng=np.random.default_rng(0)).astype(np.float64)
    # Assert
    np.testing.assert_allclose((noisy - 1.0).std(), 0.3, rtol=5 / math.sqrt(2 * dim))
    np.testing.assert_allclose((noisy - 1.0).mean(), 0.0, atol=5 * 0.3 / math.sqrt(dim))
    unchanged = add_server_noise(
        np.ones(3), noise_std=0.0, rng=np.random.default_rng(0)
    )
    assert unchanged.tolist() == [1.0, 1.0, 1.0]


def test_noise_stage_rejects_a_payload() -> None:
    with pytest.raises(TypeError, match="noise stage needs a dense vector"):
        NoiseStage(1.0)(Payload.dense([1.0]), np.random.default_rng(0))


@pytest.mark.parametrize("per_layer", [False, True])
def test_clip_is_whole_vector_unless_per_layer_is_asked_for(per_layer):
    # Two layers: (3, 4) with norm 5 and (0,) — flat clipping to C = 5 keeps the
    # vector; per-layer clipping to C/√2 scales the first layer down.
    privacy = PrivacyConfig(clip_norm=5.0, mechanism="none", clip_per_layer=per_layer)
    stages = build_client_stages(
        privacy, CompressionConfig(), noise_std=0.0, layer_offsets=[0, 2, 3]
    )
    assert stages[0].offsets == ((0, 2, 3) if per_layer else None)
    out, _ = stages[0](
        np.array([3.0, 4.0, 0.0], dtype=np.float32), np.random.default_rng(0)
    )
    expected = [3.0, 4.0, 0.0] if not per_layer else [3 / 2**0.5, 4 / 2**0.5, 0.0]
    np.testing.assert_allclose(np.asarray(out, dtype=np.float64), expected, rtol=1e-6)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_diverged_model_is_sent_as_all_nan_not_quantized_garbage(bad) -> None:
    """A NaN/inf upload must not reach the quantizer: it would map NaN to a
    finite level (−(C + 3σ)) that the server cannot reject."""
    stages = build_client_stages(
        PrivacyConfig(clip_norm=1.0, mechanism="gaussian", noise_multiplier=0.5),
        CompressionConfig(quantize_bits=8, quantize_range="clip"),
        noise_std=0.5,
    )
    x = np.linspace(-1.0, 1.0, 10).astype(np.float32)
    x[3] = bad
    payload, metrics = run_stages(x, stages, np.random.default_rng(0))
    dense = payload.to_dense()
    assert dense.shape == (10,)
    assert np.isnan(dense).all()  # nothing of the finite coordinates leaks
    assert metrics["non_finite_upload"] == 1.0
    ok, ok_metrics = run_stages(np.nan_to_num(x), stages, np.random.default_rng(0))
    assert np.isfinite(ok.to_dense()).all()
    assert "non_finite_upload" not in ok_metrics
