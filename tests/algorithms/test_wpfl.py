"""WPFL (seed 000 Algorithm 1): downlink quantization and errors, PL of every client,
T0 end rule, and a short end-to-end run."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rayfl.actors.client import ClientHost
from rayfl.actors.setup import ActorSetup
from rayfl.algorithms.base import ClientContext
from rayfl.algorithms.ditto import Ditto
from rayfl.algorithms.registry import make_algorithm
from rayfl.config import load_config
from rayfl.data.federated import build_federated
from rayfl.learning.aggregate import partial_sum
from rayfl.learning.models import FlatModel, build_model
from rayfl.seeding import rng_for
from rayfl.system import initial_vector
from rayfl.wireless.downlink import quantize_global, receive_broadcast
from tests.configs import WPFL_PRIVACY

# All tests here use the shared Ray session (tests/conftest.py): the module then runs
# with the other Ray modules instead of starting Ray again at its first Ray test.
pytestmark = pytest.mark.usefixtures("ray_session")

CFG = {
    "seed": 3,
    "data": {"dataset": "digits", "num_clients": 10, "partition": "iid"},
    "model": {"kind": "mlr"},
    "algorithm": {
        "kind": "wpfl",
        "lr": 0.1,
        "personal_lr": 0.1,
        "local_steps": 3,
        "personal_steps": 3,
        "batch_size": 16,
    },
    "scheduler": {"policy": "round_robin"},
    "wireless": {"num_subchannels": 4},
    "privacy": WPFL_PRIVACY,
    "compression": {"quantize_bits": 16},
    "ray": {"num_cpus": 2},
    "output": {"plots": False, "progress": False},
}


@pytest.fixture(scope="module")
def setup_parts():
    cfg = load_config(CFG)
    data = build_federated(cfg.data, seed=cfg.seed)
    vector = initial_vector(cfg, tuple(data.input_shape), data.num_classes)
    return cfg, data, vector


def _ctx(cfg, data, vector, *, round, ber=0.0, client=0, state=None):
    module = build_model(
        "mlr", input_shape=tuple(data.input_shape), num_classes=data.num_classes
    )
    x, y = data.train(client)
    return ClientContext(
        client=client,
        round=round,
        global_vector=vector,
        x_train=x,
        y_train=y,
        model=FlatModel(module),
        state={} if state is None else state,
        controls={},
        rng=rng_for(cfg.seed, "batch", round=round, client=client),
        downlink_bit_error_rate=ber,
    )


def _rebuilt_broadcast(cfg, vector, ber, *, round, client):
    """Client ``client``'s copy of Q_G(ω) at ``round``, rebuilt independently (eq. 18)."""
    return receive_broadcast(
        quantize_global(vector, clip_norm=3.0, bits=16),
        clip_norm=3.0,
        bits=16,
        bit_error_rate=ber,
        rng=rng_for(cfg.seed, "downlink", round=round, client=client),
    )


def _wpfl(cfg):
    algo = make_algorithm(cfg.algorithm)
    algo.bind(privacy=cfg.privacy, seed=cfg.seed)
    return algo


def test_server_quantizes_the_average_to_the_c_grid(setup_parts):
    cfg, _, vector = setup_parts
    algo = _wpfl(cfg)
    rows = np.stack([vector, -vector, 10 * np.ones_like(vector)])
    new = algo.combine(vector, partial_sum(rows, [1.0, 1.0, 1.0]))
    mean = rows.astype(np.float64).mean(axis=0)
    np.testing.assert_array_equal(new, quantize_global(mean, clip_norm=3.0, bits=16))
    assert np.all(np.abs(new) <= 3.0)
    same = algo.combine(vector, partial_sum(rows[:0], []))  # nothing arrived
    np.testing.assert_array_equal(same, vector)


def test_first_broadcast_is_error_free_then_quantized_and_corrupted(setup_parts):
    cfg, data, vector = setup_parts
    wpfl, ditto = _wpfl(cfg), Ditto(cfg.algorithm)
    # round 0: ω⁰ unquantized and error-free ([AMBIG-10]) → exactly Ditto's update
    ours = wpfl.client_update(_ctx(cfg, data, vector, round=0, ber=0.1))
    ref = ditto.client_update(_ctx(cfg, data, vector, round=0))
    np.testing.assert_array_equal(ours.vector, ref.vector)
    assert ours.metrics["downlink_errors"] == 0
    # round 2 with BER e: Ditto on an independently rebuilt corrupted copy of Q_G(ω)
    ber, state = 0.01, {}
    ours = wpfl.client_update(_ctx(cfg, data, vector, round=2, ber=ber, state=state))
    received, wrong = _rebuilt_broadcast(cfg, vector, ber, round=2, client=0)
    ref_state: dict = {}
    ref = ditto.client_update(_ctx(cfg, data, received, round=2, state=ref_state))
    np.testing.assert_array_equal(ours.vector, ref.vector)
    np.testing.assert_array_equal(state["personal"], ref_state["personal"])
    assert ours.metrics["downlink_errors"] == wrong
    rho = 1 - (1 - ber) ** 16  # eq. 14
    assert abs(wrong - rho * len(vector)) < 5 * np.sqrt(rho * len(vector)) + 1


def test_error_free_switch_removes_downlink_errors(setup_parts):
    cfg, data, vector = setup_parts
    off = load_config(cfg, {"algorithm.downlink_errors": False})
    update = _wpfl(off).client_update(_ctx(off, data, vector, round=1, ber=0.2))
    assert update.metrics["downlink_errors"] == 0


def test_personal_update_moves_only_the_personal_model(setup_parts):
    cfg, data, vector = setup_parts
    algo, state = _wpfl(cfg), {}
    ctx = _ctx(cfg, data, vector, round=0, state=state)
    ctx = dataclasses.replace(ctx, controls={"personal_lr": 0.2, "lam": 0.0})
    metrics = algo.personal_update(ctx)
    assert set(state) == {"personal", "pl_gap", "pl_lam"}
    assert state["pl_lam"] == 0.0
    assert metrics["personal_steps"] == 3
    assert not np.allclose(state["personal"], vector)


@pytest.mark.parametrize("scheduled", [True, False], ids=["scheduled", "personal_only"])
def test_regularised_pl_train_losses_use_the_received_broadcast(setup_parts, scheduled):
    """PFLlib Ditto's train_metrics_personalized and eq. 3a's f_n, rebuilt by hand."""
    import torch
    import torch.nn.functional as F

    cfg, data, vector = setup_parts
    cfg = load_config(cfg, {"algorithm.lam": 0.7})
    setup = ActorSetup.from_config(
        cfg,
        input_shape=tuple(data.input_shape),
        num_classes=data.num_classes,
        noise_std=0.01,
    )
    host = ClientHost(data, [0, 1], setup)
    ber = 0.02
    host.train(
        2,
        vector,
        [0] if scheduled else [],
        personal_only=None if scheduled else [0],
        downlink_ber={0: ber},
    )
    received, wrong = _rebuilt_broadcast(cfg, vector, ber, round=2, client=0)
    assert wrong > 0
    personal = np.asarray(host.state[0]["personal"])
    gap = float(np.linalg.norm(personal.astype(np.float64) - received))
    assert host.state[0]["pl_gap"] == pytest.approx(gap, rel=1e-9)
    row = host.evaluate(vector, [0])[0]
    module = build_model(
        "mlr", input_shape=tuple(data.input_shape), num_classes=data.num_classes
    )
    torch.nn.utils.vector_to_parameters(torch.from_numpy(personal), module.parameters())
    x, y = data.train(0)
    with torch.no_grad():
        ce = float(F.cross_entropy(module(torch.from_numpy(x)), torch.from_numpy(y)))
    assert row["eval_train_loss"] == pytest.approx(ce, rel=1e-5)
    assert row["eval_train_reg_loss"] == pytest.approx(ce + 0.35 * gap, rel=1e-5)
    assert row["eval_train_pl_objective"] == pytest.approx(
        0.65 * ce + 0.35 * gap**2, rel=1e-5
    )
    # client 1 never took a PL step: no regularised losses
    assert "eval_train_reg_loss" not in host.evaluate(vector, [1])[0]


@pytest.mark.parametrize("all_clients", [True, False], ids=["all", "scheduled"])
def test_unscheduled_clients_update_their_pl_model_only_when_asked(
    setup_parts, all_clients
):
    cfg, data, vector = setup_parts
    cfg = load_config(cfg, {"algorithm.personal_all_clients": all_clients})
    setup = ActorSetup.from_config(
        cfg,
        input_shape=tuple(data.input_shape),
        num_classes=data.num_classes,
        noise_std=0.01,
    )
    host = ClientHost(data, [0, 1, 2], setup)
    personal_only = [1, 2] if _wpfl(cfg).updates_unscheduled else None
    records, bundle, _ = host.train(0, vector, [0], personal_only=personal_only)
    assert bundle.clients.tolist() == [0]  # only the scheduled client uploads
    updated = {c for c in (0, 1, 2) if "personal" in host.state[c]}
    assert updated == ({0, 1, 2} if all_clients else {0})
    assert "local_updates" not in host.state[1]


def test_end_to_end_run_stops_when_every_client_used_t0_uploads(ray_session):
    import json

    import rayfl

    result = rayfl.run(CFG, {"output.dir": "/tmp/rayfl-test-wpfl", "rounds": 50})
    rounds = result.rounds
    # N·T0/K = 10·2/4 = 5 rounds, then nobody is eligible (C7, [AMBIG-8])
    assert len(rounds) == 5
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["privacy"]["uploads_per_client"] == [2] * 10
    # σ_DP of Theorem 1 is tiny next to C: the accountant's ε (Gaussian part only)
    # is far above the target ε_Q = 1, and the summary says why
    privacy = summary["privacy"]
    assert privacy["epsilon_max"] > 2.0
    assert "the paper's formula, not a guarantee" in privacy["epsilon_note"]
    # no figure at a sensitivity the code does not enforce; the ledger's rule is
    # stated: whole-update clip, Δ = 2C, no subsampling, z = σ/(2C)
    assert "epsilon_sample_level_max" not in privacy
    assert privacy["ledger_sample_rate"] == 1.0
    assert privacy["sensitivity"].startswith("2C = ")
    clip = load_config(CFG).privacy.clip_norm
    assert privacy["noise_multiplier"] == pytest.approx(
        privacy["noise_std"] / (2 * clip), rel=1e-9
    )
    last = rounds.iloc[-1]
    assert 0.0 < last["jain_train_loss"] <= 1.0
    # the regularised PL losses exceed the cross-entropy (λ = 0.5 > 0, ϖ ≠ ω̂) and
    # their Jain index is the one of the logged per-client values
    final = result.metrics[result.metrics["round"] == last["round"]]
    reg = final["eval_train_reg_loss"].to_numpy()
    assert (reg > final["eval_train_loss"].to_numpy()).all()
    assert last["jain_train_reg_loss"] == pytest.approx(
        reg.sum() ** 2 / (len(reg) * (reg**2).sum())
    )
    assert np.isfinite(last["personal_max_loss"]) and last["personal_acc"] > 0.3
    # every client's PL model moved away from the global one, scheduled or not
    first = result.metrics[result.metrics["round"] == 0]
    assert (first["personal_loss"] != first["test_loss"]).all()
