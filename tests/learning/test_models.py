import numpy as np
import pytest
import torch

from rayfl.learning.models import FlatModel, ModelSpec, build_model, init_parameters


@pytest.mark.parametrize(
    ("kind", "shape", "hidden", "expected"),
    [
        ("mlr", (1, 28, 28), (100,), 7_850),
        ("mlp", (1, 28, 28), (100,), 79_510),
        ("mlp", (1, 28, 28), (200,), 159_010),
        ("cnn", (1, 28, 28), (100,), 582_026),
        ("cnn", (3, 32, 32), (100,), 878_538),
    ],
    ids=["mlr-784", "dnn-784-100", "mlp-784-200", "cnn-fmnist", "cnn-cifar10"],
)
def test_parameter_counts_match_spec_seed000(kind, shape, hidden, expected):
    model = build_model(kind, input_shape=shape, num_classes=10, hidden=hidden)
    assert ModelSpec.of(model).dim == expected


def test_cnn_rejects_tiny_images():
    with pytest.raises(ValueError, match="at least 16"):
        build_model("cnn", input_shape=(1, 8, 8), num_classes=10)


def test_flat_model_round_trip_and_views():
    # Arrange
    fm = FlatModel(build_model("mlp", input_shape=(6,), num_classes=3, hidden=(4,)))
    vec = np.random.default_rng(0).normal(size=fm.spec.dim).astype(np.float32)
    # Act
    fm.load(vec)
    # Assert: parameters are views of the flat tensor, in spec order
    np.testing.assert_array_equal(fm.vector(), vec)
    w0 = fm.module[1].weight.detach().numpy()
    np.testing.assert_array_equal(w0.reshape(-1), vec[: w0.size])
    out = fm.module(torch.ones(2, 6))
    assert out.shape == (2, 3)


def test_init_is_deterministic_per_seed():
    vecs = []
    for seed in (1, 1, 2):
        m = build_model("mlp", input_shape=(10,), num_classes=3)
        init_parameters(m, torch.Generator().manual_seed(seed))
        vecs.append(FlatModel(m).vector())
    np.testing.assert_array_equal(vecs[0], vecs[1])
    assert not np.array_equal(vecs[0], vecs[2])
    # default-like scale: Kaiming-uniform(a=√5) on fan_in 10 → |w| ≤ 1/√10
    assert np.abs(vecs[0][:30]).max() <= 1 / np.sqrt(10) + 1e-6


def test_initial_vector_reuses_a_module_yet_equals_a_fresh_one():
    """initial_vector keeps one module per architecture: each seed's ω⁰ is a fresh init's."""
    import torch

    from rayfl.config import load_config
    from rayfl.learning.models import FlatModel, build_model, init_parameters
    from rayfl.seeding import torch_seed_for
    from rayfl.system import initial_vector

    for model in ({"kind": "mlp", "hidden": [8]}, {"kind": "mlr"}):
        for seed in (0, 3, 0):
            cfg = load_config({"seed": seed, "model": model})
            fresh = build_model(
                cfg.model.kind, input_shape=(6,), num_classes=3, hidden=cfg.model.hidden
            )
            init_parameters(
                fresh, torch.Generator().manual_seed(torch_seed_for(seed, "init"))
            )
            expected = FlatModel(fresh).vector()
            assert np.array_equal(initial_vector(cfg, (6,), 3), expected)


def test_initial_vector_leaves_torchs_global_generator_alone(monkeypatch):
    """Building the module (a process's first call) draws nothing from torch's global RNG.

    RLlib samples the driver's actions from that generator: a draw on the first
    call only gave the first train-policy of a process other returns.
    """
    import rayfl.system
    from rayfl.config import load_config

    monkeypatch.setattr(rayfl.system, "_INIT_MODELS", {})  # a fresh process
    cfg = load_config({"model": {"kind": "mlp", "hidden": [8]}})
    before = torch.get_rng_state()
    rayfl.system.initial_vector(cfg, (6,), 3)
    assert torch.equal(torch.get_rng_state(), before)
