"""A resampled population with sampled evaluation, end to end (issue 37)."""

import numpy as np
import pytest

from rayfl.eval_sample import eval_sample
from rayfl.runner import run


@pytest.mark.slow  # a whole run (Ray start-up, two evaluations): ~1 min
def test_sampled_evaluation_of_a_population_larger_than_its_data(ray_session, tmp_path):
    n, k = 3000, 40  # digits has 1797 samples
    result = run(
        {
            "rounds": 2,
            "data": {
                "dataset": "digits",
                "num_clients": n,
                "population": "resampled",
                "samples_per_client": 6,
            },
            "model": {"kind": "mlr"},
            "scheduler": {"policy": "random", "clients_per_round": 10},
            "eval_clients": k,
            "output": {"dir": str(tmp_path), "progress": False, "plots": False},
        }
    )
    rounds, metrics = result.rounds, result.metrics
    assert (rounds["eval_clients"] == k).all()
    assert (rounds["global_acc_se"] > 0).all() and (rounds["global_acc_se"] < 0.2).all()
    for t in (0, 1):
        evaluated = metrics[(metrics["round"] == t) & metrics["test_acc"].notna()]
        expected = eval_sample(0, t, n, k)
        np.testing.assert_array_equal(np.sort(evaluated["client"]), expected)
    assert int(metrics[metrics["round"] == 0]["scheduled"].sum()) == 10
