import numpy as np
import pytest
import torch
import torch.nn.functional as F

from rayfl.learning.models import FlatModel, build_model, init_parameters
from rayfl.learning.train import batch_indices, local_sgd
from rayfl.learning.vectorized import choose_path, fast_local_sgd, local_sgd_many
from rayfl.learning.vectorized_plan import shared_rows

SHAPE = (1, 16, 16)  # the smallest images the CNN accepts
CLASSES = 10
TOL = {"rtol": 1e-5, "atol": 1e-5}


@pytest.fixture(autouse=True)
def _one_torch_thread():
    # as in a client actor (DESIGN.md); also keeps the tests fast on a busy machine
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _model(kind):
    fm = FlatModel(
        build_model(kind, input_shape=SHAPE, num_classes=CLASSES, hidden=(24,))
    )
    init_parameters(fm.module, torch.Generator().manual_seed(0))
    return fm


def _clients(fm, sizes, seed=1, shared=True):
    """Starts near the model's init and data; ``shared``: row slices of one array
    (as FederatedData gives them), else one array per client."""
    rng = np.random.default_rng(seed)
    base = fm.vector()
    starts = np.stack(
        [
            base + 0.05 * rng.standard_normal(base.shape).astype(np.float32)
            for _ in sizes
        ]
    )
    x = rng.random((sum(sizes), *SHAPE), dtype=np.float32)
    y = rng.integers(0, CLASSES, sum(sizes))
    bounds = np.cumsum([0, *sizes])
    data = [(x[a:b], y[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    if not shared:
        data = [(xi.copy(), yi.copy()) for xi, yi in data]
    return starts, data


def _rngs(m):
    return [np.random.default_rng([7, i]) for i in range(m)]


EQUAL = [24, 24, 24]
UNEQUAL = [24, 7, 17, 3]
CASES = [
    # kind, kernel, sizes, per-client lr, prox_weight, local_steps
    ("mlr", "auto", EQUAL, False, 0.0, None),
    ("mlr", "auto", UNEQUAL, True, 0.5, None),
    ("mlr", "vmap", UNEQUAL, True, 0.0, None),
    ("mlp", "auto", EQUAL, False, 0.0, None),
    ("mlp", "auto", UNEQUAL, True, 0.5, None),
    ("mlp", "auto", UNEQUAL, True, 0.0, 5),
    ("mlp", "vmap", UNEQUAL, False, 0.5, None),
    ("cnn", "auto", EQUAL, False, 0.0, None),
    ("cnn", "auto", UNEQUAL, True, 0.5, None),
]


@pytest.mark.parametrize(
    ("kind", "kernel", "sizes", "per_client_lr", "prox_weight", "local_steps"),
    CASES,
    ids=[
        f"{k}-{ker}-{'equal' if s is EQUAL else 'unequal'}"
        f"-{'lrs' if lrs else 'lr'}-prox{p}-{'steps' if st else 'epochs'}"
        for k, ker, s, lrs, p, st in CASES
    ],
)
def test_many_equals_per_client_loop(
    kind, kernel, sizes, per_client_lr, prox_weight, local_steps
):
    # Arrange
    fm = _model(kind)
    starts, data = _clients(fm, sizes)
    lrs = (
        np.linspace(0.05, 0.2, len(sizes))
        if per_client_lr
        else np.full(len(sizes), 0.1)
    )
    kwargs = dict(batch_size=8, local_epochs=2, local_steps=local_steps)
    loop_rngs, many_rngs = _rngs(len(sizes)), _rngs(len(sizes))
    # Act
    expected = [
        local_sgd(fm, s, x, y, lr=float(lr), rng=r, prox_weight=prox_weight, **kwargs)
        for s, (x, y), lr, r in zip(starts, data, lrs, loop_rngs, strict=True)
    ]
    lr_arg = lrs if per_client_lr else 0.1
    got = local_sgd_many(
        fm,
        starts,
        data,
        lr=lr_arg,
        rngs=many_rngs,
        prox_weight=prox_weight,
        kernel=kernel,
        **kwargs,
    )
    # Assert
    for e, g in zip(expected, got, strict=True):
        assert g.steps == e.steps
        np.testing.assert_allclose(g.vector, e.vector, **TOL)
        np.testing.assert_allclose(g.train_loss, e.train_loss, **TOL)
    # the rngs were consumed exactly as the loop consumed them
    assert [r.random() for r in many_rngs] == [r.random() for r in loop_rngs]


@pytest.mark.parametrize("max_clients", [1, 2], ids=["chunk1", "chunk2"])
def test_many_chunked_equals_unchunked(max_clients):
    fm = _model("mlp")
    starts, data = _clients(fm, UNEQUAL)
    kwargs = dict(lr=0.1, batch_size=8, prox_weight=0.2)
    whole = local_sgd_many(fm, starts, data, rngs=_rngs(4), **kwargs)
    chunked = local_sgd_many(
        fm, starts, data, rngs=_rngs(4), max_clients=max_clients, **kwargs
    )
    for a, b in zip(whole, chunked, strict=True):
        np.testing.assert_allclose(b.vector, a.vector, **TOL)


@pytest.mark.parametrize("kernel", ["matmul", "vmap"])
def test_many_separate_arrays_equal_row_slices(kernel):
    # one gather over a shared buffer vs one gather per client: same batches
    fm = _model("mlp")
    starts, shared = _clients(fm, UNEQUAL)
    _, separate = _clients(fm, UNEQUAL, shared=False)
    kwargs = dict(lr=0.1, batch_size=8, kernel=kernel)
    a = local_sgd_many(fm, starts, shared, rngs=_rngs(4), **kwargs)
    b = local_sgd_many(fm, starts, separate, rngs=_rngs(4), **kwargs)
    for ra, rb in zip(a, b, strict=True):
        np.testing.assert_array_equal(rb.vector, ra.vector)


def test_shared_rows_rejects_non_row_slices():
    base = np.zeros((6, 4), np.float32)
    assert shared_rows([base[0:2], base[2:4]]) is not None
    assert shared_rows([base[0:2, :2], base[2:4, :2]]) is None  # not contiguous
    assert shared_rows([base[0:2], np.zeros((2, 4), np.float32)]) is None


def test_many_client_without_samples_keeps_its_start():
    fm = _model("mlr")
    starts, data = _clients(fm, [10, 0])
    got = local_sgd_many(fm, starts, data, lr=0.1, batch_size=4, rngs=_rngs(2))
    assert got[1].steps == 0 and got[1].train_loss == 0.0
    np.testing.assert_array_equal(got[1].vector, starts[1])


def _dp_sgd_reference(fm, start, x, y, *, lr, rng, clip_norm, prox_weight):
    """Oracle: per-sample autograd, clip each gradient, average, step, prox."""
    fm.load(start)
    center = torch.from_numpy(start.copy())
    for idx in batch_indices(
        len(y), batch_size=4, local_epochs=1, local_steps=None, rng=rng
    ):
        acc = [torch.zeros_like(p) for p in fm.params]
        for j in idx:
            out = fm.module(torch.from_numpy(x[j : j + 1]))
            loss = F.cross_entropy(out, torch.from_numpy(y[j : j + 1]))
            grads = torch.autograd.grad(loss, fm.params)
            norm = float(torch.sqrt(sum(g.square().sum() for g in grads)))
            factor = min(1.0, clip_norm / max(norm, 1e-12))
            for a, g in zip(acc, grads, strict=True):
                a += factor * g
        with torch.no_grad():
            for p, a in zip(fm.params, acc, strict=True):
                p -= lr * a / len(idx)
            fm.flat -= lr * prox_weight * (fm.flat - center)
    return fm.vector()


CLIP_CASES = [
    ("mlr", "auto", 0.0),
    ("mlp", "auto", 0.3),
    ("mlp", "vmap", 0.0),
    ("cnn", "auto", 0.3),
]


@pytest.mark.parametrize(
    ("kind", "kernel", "prox_weight"),
    CLIP_CASES,
    ids=[f"{k}-{ker}-prox{p}" for k, ker, p in CLIP_CASES],
)
def test_many_per_sample_clipping_equals_oracle(kind, kernel, prox_weight):
    # Arrange
    fm = _model(kind)
    starts, data = _clients(fm, [10, 6])
    lrs = np.array([0.2, 0.1])
    clip_norm = 0.3
    # Act
    expected = [
        _dp_sgd_reference(
            fm, s, x, y, lr=lr, rng=r, clip_norm=clip_norm, prox_weight=prox_weight
        )
        for s, (x, y), lr, r in zip(starts, data, lrs, _rngs(2), strict=True)
    ]
    kwargs = dict(lr=lrs, batch_size=4, prox_weight=prox_weight, kernel=kernel)
    got = local_sgd_many(fm, starts, data, rngs=_rngs(2), clip_norm=clip_norm, **kwargs)
    unclipped = local_sgd_many(fm, starts, data, rngs=_rngs(2), **kwargs)
    # Assert
    for e, g, u in zip(expected, got, unclipped, strict=True):
        np.testing.assert_allclose(g.vector, e, **TOL)
        assert np.abs(u.vector - e).max() > 1e-4  # clipping was active


FAST_CASES = [
    ("mlr", 0.0, None),
    ("mlp", 0.5, None),
    ("mlp", 0.0, 7),
    ("cnn", 0.0, None),
]


@pytest.mark.parametrize(
    ("kind", "prox_weight", "local_steps"),
    FAST_CASES,
    ids=[f"{k}-prox{p}-steps{s}" for k, p, s in FAST_CASES],
)
def test_fast_local_sgd_equals_local_sgd(kind, prox_weight, local_steps):
    fm = _model(kind)
    starts, ((x, y),) = _clients(fm, [27])
    center = starts[0] + 0.1
    kwargs = dict(
        lr=0.1,
        batch_size=8,
        local_epochs=2,
        local_steps=local_steps,
        prox_weight=prox_weight,
        prox_center=center,
    )
    expected = local_sgd(fm, starts[0], x, y, rng=np.random.default_rng(3), **kwargs)
    got = fast_local_sgd(fm, starts[0], x, y, rng=np.random.default_rng(3), **kwargs)
    assert got.steps == expected.steps
    np.testing.assert_allclose(got.vector, expected.vector, **TOL)
    np.testing.assert_allclose(got.train_loss, expected.train_loss, **TOL)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"starts": np.zeros((1, 3), np.float32)}, "starts"),
        ({"lr": [0.1, 0.2, 0.3]}, "lr"),
        ({"kernel": "fused"}, "kernel"),
        ({"clip_norm": 0.0}, "clip_norm"),
    ],
    ids=["starts-shape", "lr-length", "kernel", "clip-norm"],
)
def test_many_rejects_bad_input(kwargs, match):
    fm = _model("mlr")
    starts, data = _clients(fm, [4, 4])
    args = dict(starts=starts, lr=0.1, kernel="auto") | kwargs
    with pytest.raises(ValueError, match=match):
        local_sgd_many(fm, datasets=data, batch_size=2, rngs=_rngs(2), **args)


def test_matmul_kernel_rejects_cnn():
    fm = _model("cnn")
    starts, data = _clients(fm, [4])
    with pytest.raises(ValueError, match="matmul"):
        local_sgd_many(
            fm, starts, data, lr=0.1, batch_size=2, rngs=_rngs(1), kernel="matmul"
        )


@pytest.mark.parametrize(
    ("kind", "dim", "batch_size", "num_clients"),
    [
        ("mlr", 7850, 32, 1),
        ("mlr", 7850, 32, 10_000),
        ("mlp", 159_010, 32, 100),
        ("mlp", 159_010, 256, 2),
        ("cnn", 582_026, 32, 10),
        ("custom", 1000, 8, 50),
    ],
    ids=["mlr-1", "mlr-10k", "mlp-100", "mlp-big-batch", "cnn-10", "custom"],
)
def test_choose_path_returns_a_valid_path(kind, dim, batch_size, num_clients):
    assert choose_path(kind, dim, batch_size, num_clients) in ("loop", "vectorized")


def test_choose_path_single_client_is_loop():
    assert choose_path("mlp", 159_010, 32, 1) == "loop"


@pytest.mark.parametrize("kind", ["mlr", "mlp"])
def test_matmul_kernel_is_independent_of_stack_partners(kind):
    # trainer: auto relies on this (Implementation details 9): a client's result
    # must be bit-identical whichever other clients share its stack or chunk, so
    # that packing clients differently into actors cannot change any metric.
    fm = _model(kind)
    sizes = [37, 64, 5, 120, 64, 90, 33, 71]
    starts, data = _clients(fm, sizes)
    lrs = np.linspace(0.02, 0.2, len(sizes))

    def run(idx, max_clients=None):
        res = local_sgd_many(
            fm,
            starts[idx],
            [data[i] for i in idx],
            lr=lrs[idx],
            batch_size=16,
            rngs=[np.random.default_rng(100 + i) for i in idx],
            kernel="matmul",
            max_clients=max_clients,
            slot=16,
        )
        return {i: r.vector for i, r in zip(idx, res, strict=True)}

    everyone = run(np.arange(len(sizes)))
    for idx, chunk in [
        ([2], None),
        ([6, 1, 3], None),
        ([0, 4, 5, 7], 2),
        (list(range(len(sizes))), 3),
    ]:
        for i, vec in run(np.asarray(idx), chunk).items():
            assert np.array_equal(vec, everyone[i]), (idx, i)


def test_auto_vectorizes_only_linear_stacks_with_small_batches():
    from rayfl.learning.vectorized import auto_vectorizes

    assert auto_vectorizes(_model("mlr"), 32)
    assert auto_vectorizes(_model("mlp"), 64)
    assert not auto_vectorizes(_model("mlp"), 65)
    assert not auto_vectorizes(_model("cnn"), 32)


def test_slot_smaller_than_a_batch_is_rejected():
    fm = _model("mlr")
    starts, data = _clients(fm, [20])
    with pytest.raises(ValueError, match="slot"):
        local_sgd_many(
            fm,
            starts,
            data,
            lr=0.1,
            batch_size=16,
            rngs=[np.random.default_rng(0)],
            slot=8,
        )


@pytest.mark.parametrize("window_bytes", [1, 4096, 16 << 20])
def test_windows_hold_each_clients_batches_in_its_slots(window_bytes, monkeypatch):
    """iter_windows against a per-(client, step) loop: indices, weights, padding, windows."""
    from rayfl.learning import vectorized_plan as vp

    monkeypatch.setattr(vp, "WINDOW_BYTES", window_bytes)
    rng = np.random.default_rng(3)
    sizes = [0, 7, 40, 33, 1, 16, 90]
    for local_steps in (None, 5):
        ok_sizes = [max(1, n) for n in sizes] if local_steps else sizes
        plan = vp.plan_batches(
            ok_sizes,
            batch_size=8,
            local_epochs=2,
            local_steps=local_steps,
            rngs=[np.random.default_rng(i) for i in range(len(sizes))],
        )
        data = [
            (rng.normal(size=(n, 3)).astype(np.float32), rng.integers(0, 4, n))
            for n in ok_sizes
        ]
        covered = 0
        for win in vp.iter_windows(plan, data, scratch=vp.WindowScratch()):
            assert win.start == covered
            covered = win.stop
            for step in range(win.start, win.stop):
                k = plan.active(step)
                x, y, w = win.batch(step, k, plan.slot)
                for i in range(k):
                    b = plan.batches[i][step]
                    xi, yi = data[plan.order[i]]
                    assert torch.equal(x[i, : len(b)], torch.from_numpy(xi[b]))
                    assert torch.equal(y[i, : len(b)], torch.from_numpy(yi[b]))
                    assert (w[i, : len(b)] == np.float32(1.0 / len(b))).all()
                    assert (w[i, len(b) :] == 0).all()
        assert covered == plan.num_steps


@pytest.mark.parametrize("shared", [False, True])
def test_plan_draws_batch_indices_of_every_client(shared):
    """The flat plan against ``batch_indices`` client by client (one shared rng too)."""
    from rayfl.learning import vectorized_plan as vp
    from rayfl.learning.train import batch_indices

    cases = np.random.default_rng(5)
    for trial in range(60):
        m = int(cases.integers(1, 7))
        sizes = cases.integers(0, 30, m).tolist()
        batch, epochs = int(cases.integers(1, 10)), int(cases.integers(1, 4))
        steps = None if trial % 2 else int(cases.integers(1, 12))
        if steps:
            sizes = [max(1, n) for n in sizes]

        def rngs(trial=trial, m=m):
            if shared:
                return [np.random.default_rng(trial)] * m
            return [np.random.default_rng(100 * trial + i) for i in range(m)]

        plan = vp.plan_batches(
            sizes, batch_size=batch, local_epochs=epochs, local_steps=steps, rngs=rngs()
        )
        want = [
            batch_indices(
                n, batch_size=batch, local_epochs=epochs, local_steps=steps, rng=r
            )
            for n, r in zip(sizes, rngs(), strict=True)
        ]
        assert plan.steps.tolist() == sorted((len(w) for w in want), reverse=True)
        for pos, client in enumerate(plan.order):
            got = plan.batches[pos]
            assert [b.tolist() for b in got] == [b.tolist() for b in want[client]]
        for first in range(m):
            sub = plan.chunk(first, 2)
            assert [b.tolist() for bs in sub.batches for b in bs] == [
                b.tolist() for bs in plan.batches[first : first + 2] for b in bs
            ]
