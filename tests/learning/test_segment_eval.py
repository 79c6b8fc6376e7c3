"""evaluate_segments: one forward pass, each segment's evaluate() to float32 rounding."""

import numpy as np
import pytest

from rayfl.learning.models import FlatModel, build_model
from rayfl.learning.segment_eval import evaluate_segments
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
