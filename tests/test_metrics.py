import numpy as np
import pytest

from rayfl.metrics import (
    jain_index,
    round_summary,
    weighted_mean_of,
    worst_fraction_mean,
)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([5, 5, 5, 5], 1.0),
        ([1, 0, 0, 0], 0.25),
        ([1, 2, 3], 36 / 42),
        ([2, 4], 36 / 40),
        ([1, 1, np.nan], 1.0),
        ([0, 0], 1.0),
    ],
    ids=["equal", "one-of-four", "1-2-3", "2-4", "nan-ignored", "all-zero"],
)
def test_jain_index_hand_values(values, expected):
    np.testing.assert_allclose(jain_index(values), expected, rtol=1e-12)


def test_jain_index_rejects_negative():
    with pytest.raises(ValueError, match="non-negative"):
        jain_index([1.0, -1.0])


def test_worst_fraction_and_weighted_mean():
    x = np.arange(1.0, 11.0)  # 10 values → worst 10% is one value
    assert worst_fraction_mean(x) == 10.0
    assert worst_fraction_mean(x, higher_is_worse=False) == 1.0
    assert worst_fraction_mean(x, fraction=0.25) == np.mean([8, 9, 10])
    assert weighted_mean_of([1.0, 0.0], [1, 3]) == 0.25


def test_round_summary_weights_by_test_size():
    evals = [
        {"client": 0, "test_loss": 1.0, "test_acc": 1.0, "eval_train_loss": 1.0},
        {"client": 1, "test_loss": 3.0, "test_acc": 0.0, "eval_train_loss": 1.0},
    ]
    s = round_summary(evals, [3, 1])
    assert s["global_acc"] == 0.75
    assert s["mean_acc"] == 0.5
    assert s["max_loss"] == 3.0
    assert s["jain_train_loss"] == 1.0
    assert s["eval_acc"] == s["global_acc"]


def test_round_summary_jain_of_regularised_pl_losses_only_when_logged():
    plain = [
        {"client": c, "test_loss": 1.0, "test_acc": 0.5, "eval_train_loss": 1.0}
        for c in range(3)
    ]
    assert "jain_train_reg_loss" not in round_summary(plain, [1, 1, 1])
    reg = [
        {**e, "eval_train_reg_loss": v, "eval_train_pl_objective": 2.0}
        for e, v in zip(plain, [1.0, 2.0, 3.0], strict=True)
    ]
    s = round_summary(reg, [1, 1, 1])
    assert s["jain_train_reg_loss"] == pytest.approx(36 / (3 * 14))
    assert s["jain_train_pl_objective"] == 1.0
    assert s["jain_train_loss"] == 1.0  # the plain cross-entropy reading is unchanged
