"""Independent privacy oracle: every reported ε against dp-accounting, from the config.

This module deliberately imports nothing from ``rayfl.privacy``: the oracle
re-types the papers' noise formulas and builds its own dp-accounting events
(RDP and PLD) from the config, the documented sensitivity and adjacency, and the
releases counted in metrics.parquet. It then checks, per client:

* reported ε ≥ the oracle's ε (RDP and PLD), and within 3 % of the oracle's RDP
  ε (so a ledger that is too pessimistic fails too);
* the noise the real code path adds (client uplink, H2FDP device, trusted edge)
  has the calibrated std within 3 %;
* amplification by subsampling appears only where records are Poisson-sampled
  (DP-SparFL), whose batches have the Poisson mean and variance;
* configs that claim a sample rate anywhere else, or a sensitivity the code
  does not enforce, are refused.

The documented rule (``rayfl/privacy/sensitivity.py``), re-stated here:
whole update clipped to C → Δ = 2C, q = 1 (any two datasets of a client);
Poisson DP-SGD → Δ = C, q = b/|D_i| (add/remove one); fixed-batch DP-SGD →
Δ = 2C, q = 1 (replace one); H2FDP device step clipped to η·s·G → Δ = 2η·s·G,
trusted edge mean → Δ = 2η·s·G/s_c.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from types import SimpleNamespace

import dp_accounting
import numpy as np
import pandas as pd
import pytest
from dp_accounting import pld, rdp
from scipy.optimize import brentq
from scipy.special import ndtr

import rayfl
from rayfl.config import ConfigError, load_config
from rayfl.data.federated import build_federated
from tests.configs import WPFL_ALGORITHM, WPFL_PRIVACY

BASE = {
    "seed": 5,
    "rounds": 3,
    "eval_every": 3,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"kind": "mlr"},
    "ray": {"num_cpus": 2},
    "output": {"plots": False, "progress": False},
}


# ------------------------------------------------------------------ the oracle
def _event(z: float, count: int, q: float = 1.0) -> dp_accounting.DpEvent:
    step: dp_accounting.DpEvent = dp_accounting.GaussianDpEvent(z)
    if q < 1.0:
        step = dp_accounting.PoissonSampledDpEvent(q, step)
    return dp_accounting.SelfComposedDpEvent(step, count)


@functools.cache
def oracle_epsilon(
    z: float, count: int, delta: float, *, q: float = 1.0, backend: str = "rdp"
) -> float:
    """ε of ``count`` Gaussian steps of multiplier z (Poisson-sampled at q < 1).

    PLD uses a 1e-3 discretisation: still a pessimistic (upper) bound, so
    ``reported ≥ oracle`` stays a valid check, in seconds instead of minutes.
    """
    if count == 0:
        return 0.0
    accountant = (
        rdp.RdpAccountant()
        if backend == "rdp"
        else pld.PLDAccountant(value_discretization_interval=1e-3)
    )
    accountant.compose(_event(z, count, q))
    return float(accountant.get_epsilon(delta))


def _check(reported: float, z: float, count: int, delta: float, q: float = 1.0):
    """reported ≥ oracle (RDP and PLD) and ≤ 1.03 × oracle RDP.

    PLD is skipped where ε is large (z ≪ 1): its discretisation would need
    gigabytes, and RDP ≥ PLD is then no news.
    """
    eps_rdp = oracle_epsilon(z, count, delta, q=q)
    assert reported >= eps_rdp * (1 - 1e-6), (reported, eps_rdp)
    assert reported <= eps_rdp * 1.03, (reported, eps_rdp)
    if eps_rdp < 30:
        eps_pld = oracle_epsilon(z, count, delta, q=q, backend="pld")
        assert reported >= eps_pld * (1 - 1e-6), (reported, eps_pld)


def _run(tree: dict, tmp_path: Path):
    result = rayfl.run(tree, {"output.dir": str(tmp_path)})
    summary = json.loads((result.run_dir / "summary.json").read_text())
    metrics = pd.read_parquet(result.run_dir / "metrics.parquet")
    return result, summary["privacy"], metrics


def _uploads(metrics: pd.DataFrame, num_clients: int) -> np.ndarray:
    """Releases per client counted from the per-client rows (scheduled rounds)."""
    scheduled = metrics[metrics["scheduled"].astype(bool)]
    counts = scheduled.groupby("client")["round"].nunique()
    return counts.reindex(range(num_clients), fill_value=0).to_numpy()


def _num_train(tree: dict) -> np.ndarray:
    cfg = load_config(tree)
    return np.asarray(build_federated(cfg.data, seed=cfg.seed).num_train)


# paper formulas, re-typed
def dp_ditto_sigma(clip, size, rounds, clients, eps, delta):
    """The DP-Ditto paper's eq. 8: σ_n = (2C/|D_n|)·√(2TN ln(1/δ))/(εN)."""
    return (
        (2 * clip / size)
        * math.sqrt(2 * rounds * clients * math.log(1 / delta))
        / (eps * clients)
    )


def wpfl_sigma(eps, delta, t0, clip, bits, q):
    """The WPFL paper's Theorem 1 (eq. 23-24) solved for σ_DP."""

    def tail(x):
        return float(ndtr(-x))

    def excess(s):
        e = (clip + 3 * s) / ((1 << bits) - 1)
        p1p = tail((2 * clip + 3 * s - e) / s)
        p1 = p1p - tail((2 * clip + 3 * s + e) / s)
        p = (1 - q) * p1 + q * (1 - 2 * tail(e / s))
        pp = (1 - q) * p1p + q * tail((3 * s - e) / s)
        g = math.exp(eps / t0)
        return t0 * max(p - p1 * g, pp - p1p * g) - delta

    hi = 10.0
    while excess(hi) > 0:
        hi *= 10
    return brentq(excess, 1e-7, hi, xtol=1e-12, rtol=1e-12)


# ------------------------------------------------------------------ flat runs
FEDAVG = {
    **BASE,
    "algorithm": {"kind": "fedavg", "local_steps": 2, "batch_size": 16, "lr": 0.1},
    "scheduler": {"policy": "round_robin"},
    "wireless": {"num_subchannels": 2},
    "privacy": {
        "mechanism": "gaussian",
        "calibration": "accountant",
        "epsilon": 4.0,
        "delta": 1e-5,
        "clip_norm": 1.5,
    },
}


DITTO = {
    **BASE,
    "data": {
        "dataset": "digits",
        "num_clients": 4,
        "partition": "size_skew",
        "size_distribution": "linear",
    },
    "algorithm": {"kind": "ditto", "local_steps": 2, "batch_size": 8},
    "scheduler": {"policy": "all"},
    "privacy": {
        "mechanism": "gaussian",
        "calibration": "dp_ditto",
        "epsilon": 10.0,
        "delta": 0.01,
        "clip_norm": 2.0,
    },
}

WPFL = {
    **BASE,
    "algorithm": WPFL_ALGORITHM,
    "scheduler": {"policy": "round_robin"},
    "wireless": {"num_subchannels": 2},
    "privacy": WPFL_PRIVACY,
    "compression": {"quantize_bits": 16},
}


@pytest.mark.parametrize("placement", ["client", "cloud"])
def test_dp_fedavg_epsilon_matches_the_oracle(ray_session, tmp_path, placement):
    tree = {**FEDAVG, "privacy": {**FEDAVG["privacy"], "placement": placement}}
    _, privacy, metrics = _run(tree, tmp_path)
    clip, delta, rounds = 1.5, 1e-5, tree["rounds"]
    # σ: our own calibration, z for `rounds` plain Gaussian releases at Δ = 2C
    z = dp_accounting.calibrate_dp_mechanism(
        rdp.RdpAccountant,
        lambda s: _event(s, rounds),
        4.0,
        delta,
    )
    assert privacy["noise_std"] == pytest.approx(z * 2 * clip, rel=1e-6)
    assert privacy["noise_multiplier"] == pytest.approx(z, rel=1e-6)
    assert privacy["ledger_sample_rate"] == 1.0
    uploads = _uploads(metrics, 4)
    assert uploads.tolist() == privacy["uploads_per_client"] and uploads.max() >= 1
    for client, eps in enumerate(privacy["epsilon_per_client"]):
        _check(eps, z, int(uploads[client]), delta)
    # the calibration keeps every client within the target
    assert max(privacy["epsilon_per_client"]) <= 4.0 * (1 + 1e-6)


def test_dp_ditto_per_client_epsilon_matches_the_oracle(ray_session, tmp_path):
    tree = DITTO
    _, privacy, metrics = _run(tree, tmp_path)
    sizes = _num_train(tree)
    assert len(set(sizes.tolist())) == 4  # per-client σ_n really differ
    sigma = [dp_ditto_sigma(2.0, m, 3, 4, 10.0, 0.01) for m in sizes]
    np.testing.assert_allclose(privacy["noise_std_per_client"], sigma, rtol=1e-9)
    z = np.asarray(sigma) / (2 * 2.0)  # Δ = 2C, not the paper's 2C/|D_n|
    np.testing.assert_allclose(privacy["noise_multiplier_per_client"], z, rtol=1e-9)
    uploads = _uploads(metrics, 4)
    assert uploads.tolist() == [3] * 4
    for client, eps in enumerate(privacy["epsilon_per_client"]):
        _check(eps, float(z[client]), int(uploads[client]), 0.01)


def test_wpfl_epsilon_matches_the_oracle(ray_session, tmp_path):
    tree = WPFL
    _, privacy, metrics = _run(tree, tmp_path)
    sigma = wpfl_sigma(1.0, 1e-3, 2, 3.0, 16, 0.01)  # the paper's q: σ only
    assert privacy["noise_std"] == pytest.approx(sigma, rel=1e-6)
    z = sigma / (2 * 3.0)
    assert privacy["ledger_sample_rate"] == 1.0
    uploads = _uploads(metrics, 4)
    assert uploads.tolist() == privacy["uploads_per_client"]
    for client, eps in enumerate(privacy["epsilon_per_client"]):
        _check(eps, z, int(uploads[client]), 1e-3)
    # the paper's nominal ε is labelled as such, not as the guarantee
    assert "not a guarantee" in privacy["epsilon_target_meaning"]


SPARSE = {
    **BASE,
    "data": {
        "dataset": "digits",
        "num_clients": 4,
        "partition": "size_skew",
        "size_distribution": "linear",
    },
    "algorithm": {
        "kind": "sparse_dp",
        "local_steps": 5,
        "batch_size": 4,
        "lr": 0.05,
        "clip_norm": 1.0,
        "noise_multiplier": 1.0,
        "epsilon_min": 50.0,
        "epsilon_max": 60.0,
    },
    "scheduler": {"policy": "all"},
}


@pytest.mark.parametrize("sampling", ["poisson", "fixed"])
def test_dp_sparfl_epsilon_matches_the_oracle(ray_session, tmp_path, sampling):
    tree = {**SPARSE, "algorithm": {**SPARSE["algorithm"], "sampling": sampling}}
    _, privacy, metrics = _run(tree, tmp_path)
    sizes = _num_train(tree)
    delta = load_config(tree).privacy.delta
    uploads = _uploads(metrics, 4)
    assert uploads.min() >= 1
    for client, eps in enumerate(privacy["epsilon_per_client"]):
        steps = int(uploads[client]) * 5
        if sampling == "poisson":  # add/remove one, Δ = C, q_i = b/|D_i|
            _check(eps, 1.0, steps, delta, q=min(1.0, 4 / sizes[client]))
        else:  # replace one, Δ = 2C, no amplification
            _check(eps, 0.5, steps, delta)
    if sampling == "fixed":
        assert privacy["ledger_sample_rate"] == 1.0
        assert privacy["ledger_adjacency"] == "replace one record"
    else:  # the ledger's add/remove-one bound; |D_i| is the upload's weight
        assert privacy["ledger_adjacency"] == "add/remove one record"
    assert privacy["adjacency"] == "replace one record"


# ------------------------------------------------------------------ H2FDP
HIER = {
    **BASE,
    "data": {"dataset": "digits", "num_clients": 8, "partition": "iid"},
    "algorithm": {"kind": "fedavg", "batch_size": 16, "lr": 0.05},
    "topology": {
        "kind": "hierarchical",
        "num_edges": 2,
        "trusted_edges": [0],
        "tau": 3,
        "local_period": 3,  # τ = m: one release (the global one) per round
        "weighting": "equal",
        "edge_eval": False,
        "lr": {"mode": "constant"},
        "dp": {"epsilon": 2.0, "delta": 1e-5, "grad_bound": 1.0},
    },
}


@pytest.mark.slow  # ~20 s on a loaded 2-core machine
def test_h2fdp_trusted_and_untrusted_epsilon_match_the_oracle(ray_session, tmp_path):
    result, privacy, _ = _run(HIER, tmp_path)
    sizes = _num_train(HIER)
    q = min(1.0, 16 / sizes.mean())  # eq. 15's q: sets σ only
    rounds = HIER["rounds"]
    # eq. 15: σ = c q Δ √(L ln(1/δ))/ε with Δ = 2ητG (device) or 2ητG/s_c (edge);
    # the released step is clipped to ητG, so z = σ/Δ = c q √(L ln(1/δ))/ε
    z = 1.5 * q * math.sqrt(rounds * math.log(1e5)) / 2.0
    assert privacy["ledger_sample_rate"] == 1.0
    assert privacy["noise_multiplier_min"] == pytest.approx(z, rel=1e-9)
    assert privacy["noise_multiplier_max"] == pytest.approx(z, rel=1e-9)
    by_obs = privacy["epsilon_per_client_by_observer"]
    trusted = [0, 1, 2, 3]  # contiguous assignment: edge 0 holds devices 0-3
    for client in range(8):
        for observer in ("edge", "cloud", "peers"):
            eps = by_obs[observer][client]
            if observer == "edge" and client in trusted:
                assert eps == 0.0  # a trusted edge is no adversary
            else:
                _check(eps, z, rounds, 1e-5)


# ------------------------------------------------------------------ noise std
def _expected_sigma(name: str, sizes: np.ndarray) -> np.ndarray:
    """σ per client from the config alone (the oracle's formulas)."""
    if name == "fedavg":
        z = dp_accounting.calibrate_dp_mechanism(
            rdp.RdpAccountant, lambda s: _event(s, FEDAVG["rounds"]), 4.0, 1e-5
        )
        return np.full(len(sizes), z * 2 * 1.5)
    if name == "ditto":
        return np.array([dp_ditto_sigma(2.0, m, 3, 4, 10.0, 0.01) for m in sizes])
    return np.full(len(sizes), wpfl_sigma(1.0, 1e-3, 2, 3.0, 16, 0.01))


@pytest.mark.parametrize("name", ["fedavg", "ditto", "wpfl"])
def test_client_uplink_adds_the_calibrated_noise(name):
    # The real client path (clip → noise → quantize for WPFL) on a zero model with
    # lr ≈ 0: the upload minus the clipped input (0) is the noise; d = 24 330.
    from rayfl.actors.client import ClientHost
    from rayfl.actors.setup import ActorSetup
    from rayfl.system import initial_vector
    from rayfl.uplink import UplinkModel

    base = {"fedavg": FEDAVG, "ditto": DITTO, "wpfl": WPFL}[name]
    tree = {
        **base,
        "model": {"kind": "mlp", "hidden": [320]},
        "algorithm": {**base["algorithm"], "lr": 1e-12, "personal_lr": 1e-12}
        if name == "wpfl"
        else {**base["algorithm"], "lr": 1e-12},
    }
    cfg = load_config(tree)
    data = build_federated(cfg.data, seed=cfg.seed)
    uplink = UplinkModel(cfg, num_train=data.num_train)
    setup = ActorSetup.from_config(
        cfg,
        input_shape=tuple(data.input_shape),
        num_classes=data.num_classes,
        noise_std=uplink.noise_std,
        client_noise_std=None
        if uplink.client_noise_std is None
        else tuple(float(s) for s in uplink.client_noise_std),
    )
    vector = initial_vector(cfg, tuple(data.input_shape), data.num_classes) * 0
    host = ClientHost(data, [0, 1, 2, 3], setup)
    _, bundle, _ = host.train(0, vector, [0, 1, 2, 3])
    expected = _expected_sigma(name, np.asarray(data.num_train))
    for client, payload in zip(bundle.clients, bundle.payloads, strict=True):
        noise = payload.to_dense().astype(np.float64)
        assert noise.size > 24_000
        assert np.std(noise) == pytest.approx(expected[client], rel=0.03)


def test_h2fdp_device_and_trusted_edge_add_the_calibrated_noise():
    from rayfl.actors.setup import ActorSetup
    from rayfl.hierarchy.device import DeviceHost
    from rayfl.hierarchy.edge import EdgeHost

    tree = {**HIER, "model": {"kind": "mlp", "hidden": [320]}}
    cfg = load_config(tree)
    data = build_federated(cfg.data, seed=cfg.seed)
    setup = ActorSetup.from_config(
        cfg, input_shape=tuple(data.input_shape), num_classes=data.num_classes
    )
    host = DeviceHost(data, [4, 5], setup)
    dim = host.model.flat.numel()
    start = np.zeros(dim, dtype=np.float32)
    eta, tau, g = 1e-12, 3, 1.0
    sigma_device = 0.7
    _, fixed = host.train_segment(
        0, start, [4], eta, tau, eta * tau * g, [sigma_device], True
    )
    edge = EdgeHost(1, cfg.seed, trusted=False)
    out, _ = edge.aggregate(0, start, 0.0, 0.0, fixed)
    assert dim > 24_000
    assert np.std(out.astype(np.float64)) == pytest.approx(sigma_device, rel=0.03)
    # trusted edge: devices send clean steps, the edge adds σ̄ to their mean
    _, clean = host.train_segment(
        1, start, [4, 5], eta, tau, eta * tau * g, [0, 0], True
    )
    trusted = EdgeHost(0, cfg.seed, trusted=True)
    sigma_edge = 0.3
    out, rec = trusted.aggregate(1, start, sigma_edge, 0.0, clean)
    assert rec["uploads"] == 2
    assert np.std(out.astype(np.float64)) == pytest.approx(sigma_edge, rel=0.03)


# ------------------------------------------------------------------ subsampling
def test_dp_sparfl_poisson_batches_have_the_poisson_mean_and_variance(monkeypatch):
    import torch.nn.functional as F

    from rayfl.algorithms import sparse_dp
    from rayfl.learning.models import FlatModel, build_model

    cfg = load_config({**SPARSE})
    data = build_federated(cfg.data, seed=cfg.seed)
    x, y = data.train(0)
    x, y = np.asarray(x[:100], np.float32), np.asarray(y[:100], np.int64)
    model = FlatModel(
        build_model(
            "mlr", input_shape=tuple(data.input_shape), num_classes=data.num_classes
        )
    )
    sizes: list[int] = []

    class Spy:  # delegates to a Generator; each rng.random(n) starts a step
        def __init__(self, rng):
            self.rng = rng

        def random(self, n):
            sizes.append(0)
            return self.rng.random(n)

        def choice(self, *a, **k):
            sizes.append(0)
            return self.rng.choice(*a, **k)

        def normal(self, *a, **k):
            return self.rng.normal(*a, **k)

    def counting_ce(*a, **k):
        sizes[-1] += 1
        return F.cross_entropy(*a, **k)

    monkeypatch.setattr(sparse_dp, "F", SimpleNamespace(cross_entropy=counting_ce))
    n, b, steps = 100, 5, 400
    start = model.vector()
    mask = np.ones(start.shape[0], dtype=bool)
    kwargs = dict(mask=mask, lr=0.0, batch_size=b, clip_norm=1.0, noise_multiplier=1.0)
    sparse_dp.dp_sparse_sgd(
        model,
        start,
        x,
        y,
        steps=steps,
        sampling="poisson",
        rng=Spy(np.random.default_rng(0)),
        **kwargs,
    )
    q = b / n
    counts = np.asarray(sizes, dtype=np.float64)
    assert len(counts) == steps
    se_mean = math.sqrt(q * (1 - q) * n / steps)
    assert abs(counts.mean() - q * n) < 4 * se_mean
    assert counts.var(ddof=1) == pytest.approx(q * (1 - q) * n, rel=0.35)
    # fixed-size batches: no randomness in the size, hence no amplification
    sizes.clear()
    sparse_dp.dp_sparse_sgd(
        model,
        start,
        x,
        y,
        steps=50,
        sampling="fixed",
        rng=Spy(np.random.default_rng(1)),
        **kwargs,
    )
    assert set(sizes) == {b}


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"privacy.sample_rate": 0.1}, "privacy.sample_rate"),
        ({"privacy.clip_norm": math.inf}, "privacy.clip_norm"),
        ({"privacy.noise_std": math.nan}, "privacy.noise_std"),
        ({"privacy.epsilon": math.inf}, "privacy.epsilon"),
    ],
    ids=["sample-rate", "clip-inf", "noise-std-nan", "epsilon-inf"],
)
def test_flat_configs_claiming_what_the_code_does_not_do_are_refused(override, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")) as info:
        load_config(FEDAVG, override)
    assert len(str(info.value).splitlines()) <= 25  # one screen


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"topology.dp.sample_rate": 0.027}, "topology.dp.sample_rate"),
        (
            {"topology.dp.sensitivity_mode": "per_sample_mean"},
            "topology.dp.sensitivity_mode",
        ),
        ({"topology.dp.grad_bound": math.inf}, "topology.dp.grad_bound"),
    ],
    ids=["sample-rate", "per-sample-mean", "grad-bound-inf"],
)
def test_h2fdp_configs_claiming_what_the_code_does_not_do_are_refused(override, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")) as info:
        load_config(HIER, override)
    assert len(str(info.value).splitlines()) <= 25


def test_dithering_reports_the_vector_laplace_epsilon():
    # The WPFL paper's Dithering baseline: Laplace(b) per coordinate with
    # b = Δs·T0/ε, Δs = 2C/min|D_n| (its per-coordinate budget). The vector's
    # L1 sensitivity is 2C·√d, so each upload is (2C·√d/b)-DP (pure).
    from rayfl.uplink import UplinkModel

    tree = {
        **WPFL,
        "algorithm": {**WPFL["algorithm"], "dp_mechanism": "dithering"},
        "wireless": {"num_subchannels": 2, "effects": "bit_flip"},
        "compression": {"quantize_bits": None},
    }
    cfg = load_config(tree)
    sizes = _num_train(tree)
    dim = 64 * 10 + 10  # MLR on 8×8 digits
    uplink = UplinkModel(cfg, num_train=sizes, model_dim=dim)
    b = (2 * 3.0 / sizes.min()) * 2 / 1.0
    uplink.record_releases([0, 1, 1])
    eps, nominal = uplink.epsilons(evaluate=True)
    per_upload = 2 * 3.0 * math.sqrt(dim) / b
    np.testing.assert_allclose(eps, [per_upload, 2 * per_upload, 0, 0], rtol=1e-12)
    np.testing.assert_allclose(nominal, [0.5, 1.0, 0, 0], rtol=1e-12)  # ε·t/T0
    assert eps[1] > 10 * nominal[1]  # the per-coordinate budget is not the vector's
