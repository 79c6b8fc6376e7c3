"""evaluate_segments: one forward pass, each segment's evaluate() to float32 rounding."""

import numpy as np
import pytest

from rayfl.learning.models import FlatModel, build_model
from rayfl.learning.segment_eval import evaluate_segments, evaluate_segments_many
from rayfl.learning.train import evaluate


@pytest.mark.parametrize(
    ("kind", "hidden"), [("mlr", []), ("mlp", [16])], ids=["mlr", "mlp"]
)
def test_each_segment_equals_evaluate_on_it_alone(kind, hidden):
    # Arrange: segments of 5, 0 (empty), 13 and 1 rows; chunks of 4 rows
    rng = np.random.default_rng(0)
    model = FlatModel(build_model(kind, input_shape=(6,), num_classes=3, hidden=hidden))
    vector = rng.normal(0, 0.5, size=model.spec.dim).astype(np.float32)
    x = rng.normal(size=(19, 6)).astype(np.float32)
    y = rng.integers(0, 3, size=19)
    bounds = [0, 5, 5, 18, 19]
    # Act
    loss, acc = evaluate_segments(model, vector, x, y, bounds, batch_size=4)
    # Assert: the oracle is evaluate() on each segment alone
    for s, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        want = evaluate(model, vector, x[a:b], y[a:b], batch_size=4)
        if a == b:
            assert np.isnan(loss[s]) and np.isnan(acc[s])
        else:
            np.testing.assert_allclose(loss[s], want[0], rtol=1e-6)
            assert acc[s] == want[1]


@pytest.mark.parametrize(
    ("kind", "hidden", "input_shape"),
    [
        ("mlr", [], (6,)),
        ("mlp", [16, 8], (6,)),
        ("mlp", [5], (2, 3)),
        ("cnn", [], None),
    ],
    ids=["mlr", "mlp2", "mlp-2d-input", "cnn-fallback"],
)
def test_many_models_equal_evaluate_of_each_alone(kind, hidden, input_shape):
    # Arrange: 5 models, segments of 5, 0 (empty), 13 and 1 rows
    rng = np.random.default_rng(1)
    if kind == "cnn":
        input_shape = (1, 16, 16)
    model = FlatModel(
        build_model(kind, input_shape=input_shape, num_classes=3, hidden=hidden)
    )
    vectors = rng.normal(0, 0.5, size=(5, model.spec.dim)).astype(np.float32)
    x = rng.normal(size=(19, *input_shape)).astype(np.float32)
    y = rng.integers(0, 3, size=19)
    bounds = [0, 5, 5, 18, 19]
    # float32 rounding: the CNN's convolutions run on batches of other sizes than
    # evaluate()'s chunks of 4, and oneDNN picks its kernel (and summation order)
    # by batch size; a 2.3e-6 relative difference on a loss of 118 was seen in CI
    rtol = 1e-5 if kind == "cnn" else 1e-6
    # Act
    loss, acc = evaluate_segments_many(model, vectors, x, y, bounds)
    # Assert: the oracle is evaluate() of each model on each segment alone
    assert loss.shape == acc.shape == (5, 4)
    for m, vector in enumerate(vectors):
        for s, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            if a == b:
                assert np.isnan(loss[m, s]) and np.isnan(acc[m, s])
                continue
            want = evaluate(model, vector, x[a:b], y[a:b], batch_size=4)
            np.testing.assert_allclose(loss[m, s], want[0], rtol=rtol)
            assert acc[m, s] == want[1]


def test_first_argmax_breaks_ties_and_nans_as_torch_argmax():
    import torch

    from rayfl.learning.segment_eval import _first_argmax

    rng = np.random.default_rng(2)
    logits = torch.from_numpy(rng.integers(0, 3, size=(4, 5, 50)).astype(np.float32))
    assert torch.equal(_first_argmax(logits), logits.argmax(dim=-2))  # many ties
    logits[1, 3, 7] = float("nan")
    assert torch.equal(_first_argmax(logits), logits.argmax(dim=-2))
