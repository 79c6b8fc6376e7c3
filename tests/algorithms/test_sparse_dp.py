"""DP-SparFL's client update (spec seed_002 §2.3-2.4) against independent oracles."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from rayfl.algorithms.base import ClientContext
from rayfl.algorithms.config import SparseDPConfig
from rayfl.algorithms.sparse_dp import SparseDP, dp_sparse_sgd, random_mask
from rayfl.compression.payload import Payload
from rayfl.learning.models import FlatModel, build_model
from rayfl.privacy.pipeline import run_stages


def small_model() -> FlatModel:
    torch.manual_seed(0)
    return FlatModel(build_model("mlp", input_shape=(6,), num_classes=3, hidden=[5]))


def data(n: int = 40):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 6)).astype(np.float32), rng.integers(0, 3, n)


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9])
def test_rescaled_mask_is_unbiased_monte_carlo(keep):
    # Arrange: a fixed update g; decode (g ⊙ m)·(1/s) over many masks
    rng = np.random.default_rng(0)
    g = rng.normal(size=50).astype(np.float32)
    draws = 20_000
    total = np.zeros(50)
    total_biased = np.zeros(50)
    for _ in range(draws):
        m = random_mask(50, keep=keep, rng=rng)
        support = np.flatnonzero(m).astype(np.int32)
        decoded = Payload(50, g[support], support, scale=1.0 / keep).to_dense()
        total += decoded
        total_biased += Payload(50, g[support], support).to_dense()
    # Act
    mean, mean_biased = total / draws, total_biased / draws
    # Assert: E = g with rescale, s·g without; tolerance 5 MC standard errors
    stderr = np.abs(g) * np.sqrt((1 - keep) / keep / draws)
    assert np.all(np.abs(mean - g) <= 5 * stderr + 1e-6)
    stderr_biased = np.abs(g) * np.sqrt(keep * (1 - keep) / draws)
    assert np.all(np.abs(mean_biased - keep * g) <= 5 * stderr_biased + 1e-6)


def test_lemma1_masked_norm_monte_carlo():
    # Arrange: E‖g ⊙ m‖² = s‖g‖² (Appendix A)
    rng = np.random.default_rng(1)
    g = rng.normal(size=200)
    keep = 0.3
    # Act
    values = [
        np.sum((g * random_mask(200, keep=keep, rng=rng)) ** 2) for _ in range(5000)
    ]
    # Assert
    np.testing.assert_allclose(np.mean(values), keep * np.sum(g**2), rtol=0.02)


def test_noiseless_unclipped_step_equals_masked_full_batch_gd():
    # Arrange: σ̂ → 0, C huge, fixed batch = all samples: plain masked GD
    model = small_model()
    x, y = data()
    w0 = model.vector()
    mask = random_mask(model.spec.dim, keep=0.5, rng=np.random.default_rng(2))
    # Act
    w, _ = dp_sparse_sgd(
        model,
        w0,
        x,
        y,
        mask=mask,
        lr=0.1,
        batch_size=len(y),
        steps=3,
        clip_norm=1e9,
        noise_multiplier=0.0,
        sampling="fixed",
        rng=np.random.default_rng(3),
    )
    # Assert: an independent masked gradient descent with torch autograd
    oracle = small_model()
    oracle.load(w0)
    keep = torch.from_numpy(mask.astype(np.float32))
    for _ in range(3):
        loss = F.cross_entropy(oracle.module(torch.from_numpy(x)), torch.from_numpy(y))
        grads = torch.autograd.grad(loss, oracle.params)
        flat = torch.cat([g.reshape(-1) for g in grads])
        with torch.no_grad():
            oracle.flat.sub_(0.1 * flat * keep)
    np.testing.assert_allclose(w, oracle.vector(), atol=1e-5)
    assert np.all(w[~mask] == w0[~mask])


def test_noise_std_is_sigma_sqrt_s_c_over_b():
    # Arrange: huge σ̂ so the noise dominates; adjusted clip √s·C
    model = small_model()
    x, y = data(400)
    keep, clip, sigma, b, steps, lr = 0.5, 1.0, 500.0, 4, 50, 0.01
    mask = random_mask(model.spec.dim, keep=keep, rng=np.random.default_rng(4))
    w0 = model.vector()
    # Act
    w, _ = dp_sparse_sgd(
        model,
        w0,
        x,
        y,
        mask=mask,
        lr=lr,
        batch_size=b,
        steps=steps,
        clip_norm=np.sqrt(keep) * clip,
        noise_multiplier=sigma,
        sampling="poisson",
        rng=np.random.default_rng(5),
    )
    # Assert: Δ on kept coords ~ N(·, τ·(η σ̂ √s C / b)²), zero elsewhere
    delta = (w - w0)[mask]
    expected = lr * np.sqrt(steps) * sigma * np.sqrt(keep) * clip / b
    np.testing.assert_allclose(delta.std(), expected, rtol=0.1)
    assert np.all(w[~mask] == w0[~mask])


def test_client_update_uploads_values_plus_keep_map():
    # Arrange
    model = small_model()
    x, y = data()
    cfg = SparseDPConfig(local_steps=2, batch_size=4, rescale=True)
    ctx = ClientContext(
        client=0,
        round=0,
        global_vector=model.vector(),
        x_train=x,
        y_train=y,
        model=model,
        state={},
        controls={"sparsity": 0.5},
        rng=np.random.default_rng(6),
    )
    # Act
    update = SparseDP(cfg).client_update(ctx)
    payload, _ = run_stages(
        Payload(
            len(update.vector),
            update.vector[update.support],
            update.support,
            scale=update.scale,
        ),
        [],
        np.random.default_rng(0),
    )
    # Assert: bits = 32·k + abs(w) (§2.3), update zero off the mask, scale 1/s
    k = update.support.size
    dim = model.spec.dim
    assert payload.payload_bits == 32 * k + dim
    off = np.setdiff1d(np.arange(dim), update.support)
    assert np.all(update.vector[off] == 0)
    assert update.scale == 2.0 and update.weight == len(y)


def test_sparsity_out_of_range_is_rejected():
    model = small_model()
    x, y = data()
    ctx = ClientContext(
        client=3,
        round=0,
        global_vector=model.vector(),
        x_train=x,
        y_train=y,
        model=model,
        state={},
        controls={"sparsity": 0.0},
        rng=np.random.default_rng(0),
    )
    with pytest.raises(ValueError, match="client 3: sparsity"):
        SparseDP(SparseDPConfig()).client_update(ctx)
