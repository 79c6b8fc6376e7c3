"""Populations generated on demand: data.population=resampled (issue 37)."""

import numpy as np
import pytest

from rayfl.config import load_config
from rayfl.data.federated import build_federated
from rayfl.data.synthetic import make_synthetic


def _data(dataset, n, **extra):
    section = {"dataset": dataset, "num_clients": n, "population": "resampled"}
    cfg = load_config({"data": section | extra})
    return build_federated(cfg.data, seed=cfg.seed)


def test_more_clients_than_samples_store_only_their_sizes():
    data = _data("digits", 100_000, samples_per_client=8)  # the pool has 1797
    assert data.num_clients == 100_000
    assert len(data.y) == 1797  # the pool, stored once
    assert (data.num_train == 6).all() and (data.num_test == 2).all()
    x_tr, y_tr = data.train(99_999)
    x_te, y_te = data.test(99_999)
    assert x_tr.shape == (6, *data.input_shape) and len(x_te) == 2
    # the same client is the same samples whenever (and wherever) it is asked
    np.testing.assert_array_equal(data.train(99_999)[0], x_tr)
    # and they are pool samples
    pool = {row.tobytes() for row in data.x}
    assert all(row.tobytes() in pool for row in np.concatenate([x_tr, x_te]))


def test_clients_differ_and_the_seed_decides():
    a = _data("digits", 50)
    b = _data("digits", 50)
    assert not np.array_equal(a.train(0)[1], a.train(1)[1])
    np.testing.assert_array_equal(a.train(7)[0], b.train(7)[0])


def test_a_client_draws_distinct_samples():
    data = _data("digits", 10, samples_per_client=40)
    x = np.concatenate([data.train(3)[0], data.test(3)[0]])
    assert len({row.tobytes() for row in x}) == 40


def test_lazy_synthetic_is_fedprox_synthetic():
    data = _data("synthetic", 1_000_000, max_samples_per_client=80)
    assert data.x.size == 0 and data.num_clients == 1_000_000
    sizes = data.num_train + data.num_test
    assert sizes.min() >= 50 and sizes.max() <= 80
    x, y = data.train(123_456)
    assert x.shape == (data.num_train[123_456], 60) and y.max() < 10
    # one client of the stored generator has the same law: x's per-feature
    # variance is Σ_jj = j^(-1.2) around v_k
    big = make_synthetic(
        num_clients=1,
        alpha=1,
        beta=1,
        rng=np.random.default_rng(0),
        min_samples=4000,
        max_samples=4000,
    )[0][0]
    lazy = data.source.draw(data.x, data.y, 5, 4000)[0]
    np.testing.assert_allclose(lazy.var(axis=0), big.var(axis=0), rtol=0.15)


def test_the_cap_and_its_message():
    with pytest.raises(ValueError, match="population=resampled"):
        load_config({"data": {"dataset": "digits", "num_clients": 5000}})
    with pytest.raises(ValueError, match="samples_per_client"):
        load_config({"data": {"population": "resampled", "samples_per_client": 1}})
