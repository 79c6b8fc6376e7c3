import numpy as np
import pytest
import torch

from rayfl.learning.aggregate import weighted_mean
from rayfl.learning.models import FlatModel, build_model
from rayfl.learning.train import batch_indices, evaluate, local_sgd


def _linear_data(n=200, d=5, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    w = rng.normal(size=(d, 3))
    y = (x @ w).argmax(1).astype(np.int64)
    return x, y


@pytest.mark.parametrize(
    ("n", "epochs", "steps", "expected"),
    [
        (10, 1, None, [4, 4, 2]),
        (10, 2, None, [4, 4, 2] * 2),
        (10, 1, 5, [4, 4, 2, 4, 4]),
    ],
    ids=["one-epoch", "two-epochs", "steps-cycle"],
)
def test_batch_indices_sizes(n, epochs, steps, expected):
    batches = batch_indices(
        n,
        batch_size=4,
        local_epochs=epochs,
        local_steps=steps,
        rng=np.random.default_rng(0),
    )
    assert [len(b) for b in batches] == expected
    # each epoch is a permutation
    np.testing.assert_array_equal(np.sort(np.concatenate(batches[:3])), np.arange(n))


def test_local_sgd_matches_torch_optim_sgd():
    # Oracle: torch.optim.SGD on a fresh copy with the same batches.
    x, y = _linear_data()
    fm = FlatModel(build_model("mlr", input_shape=(5,), num_classes=3))
    start = np.random.default_rng(1).normal(size=fm.spec.dim).astype(np.float32) * 0.1
    result = local_sgd(
        fm,
        start,
        x,
        y,
        lr=0.1,
        batch_size=16,
        local_epochs=2,
        rng=np.random.default_rng(7),
    )
    ref = torch.nn.Linear(5, 3)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(start[:15].reshape(3, 5)))
        ref.bias.copy_(torch.from_numpy(start[15:]))
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for idx in batch_indices(
        len(y),
        batch_size=16,
        local_epochs=2,
        local_steps=None,
        rng=np.random.default_rng(7),
    ):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(
            ref(torch.from_numpy(x[idx])), torch.from_numpy(y[idx])
        ).backward()
        opt.step()
    expected = np.concatenate(
        [ref.weight.detach().numpy().ravel(), ref.bias.detach().numpy()]
    )
    np.testing.assert_allclose(result.vector, expected, rtol=1e-5, atol=1e-6)
    assert result.steps == 2 * 13


def test_local_sgd_reduces_loss_and_prox_pulls_to_center():
    x, y = _linear_data()
    fm = FlatModel(build_model("mlr", input_shape=(5,), num_classes=3))
    start = np.zeros(fm.spec.dim, np.float32)
    loss0, _ = evaluate(fm, start, x, y)
    free = local_sgd(
        fm,
        start,
        x,
        y,
        lr=0.5,
        batch_size=20,
        local_epochs=5,
        rng=np.random.default_rng(0),
    )
    prox = local_sgd(
        fm,
        start,
        x,
        y,
        lr=0.5,
        batch_size=20,
        local_epochs=5,
        rng=np.random.default_rng(0),
        prox_weight=1.0,
    )
    loss1, acc1 = evaluate(fm, free.vector, x, y)
    assert loss1 < 0.6 * loss0 and acc1 > 0.8
    assert np.linalg.norm(prox.vector) < np.linalg.norm(free.vector)


def test_evaluate_hand_value():
    # zero model → uniform softmax → loss ln(3); accuracy = share of argmax 0 ties → class 0
    fm = FlatModel(build_model("mlr", input_shape=(2,), num_classes=3))
    x = np.ones((4, 2), np.float32)
    y = np.array([0, 1, 2, 0])
    loss, acc = evaluate(fm, np.zeros(9, np.float32), x, y)
    np.testing.assert_allclose(loss, np.log(3), rtol=1e-6)
    assert acc == 0.5
    assert all(np.isnan(evaluate(fm, np.zeros(9, np.float32), x[:0], y[:0])))


def test_weighted_mean_hand_values_and_errors():
    v = np.array([[1, 1], [3, 5]], np.float32)
    np.testing.assert_allclose(weighted_mean(v, np.array([1.0, 1.0])), [2, 3])
    np.testing.assert_allclose(weighted_mean(v, np.array([3.0, 1.0])), [1.5, 2])
    with pytest.raises(ValueError):
        weighted_mean(v, np.zeros(2))
