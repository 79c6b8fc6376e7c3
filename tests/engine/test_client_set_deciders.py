"""The star's client-set deciders (``all``, ``random``, ``round_robin``) built by the runner.

Oracle: the runner's former built-in rule, ``Scheduler.schedule`` of the deleted
``rayfl/scheduler.py``, copied below as it was. No Ray: the system is a
stand-in with the eligibility, channel and constants the decider reads.
"""

from __future__ import annotations

from dataclasses import fields
from types import SimpleNamespace

import numpy as np
import pytest

from rayfl.config import load_config
from rayfl.engine.deciders import PolicyDecider
from rayfl.observation import (
    LinkConstants,
    PrivacyConstants,
    SystemContext,
    TrainingConstants,
)
from rayfl.schedule import Schedule
from rayfl.seeding import rng_for
from rayfl.star.actions import StarParticipants
from rayfl.star.context import star_context
from rayfl.star.deciders import make_deciders
from rayfl.wireless.cost import uplink_airtime_s

N = 9


def old_schedule(cfg, eligible, round, cursor):
    """Copy of ``Scheduler.schedule``: returns (Schedule, cursor)."""
    n = N
    k = cfg.scheduler.clients_per_round
    if k is None and cfg.wireless is not None:
        k = cfg.wireless.num_subchannels
    k = n if k is None else min(k, n)
    eligible = np.flatnonzero(eligible)
    k = min(k, len(eligible))
    if cfg.scheduler.policy == "all":
        chosen = eligible[:k]
    elif cfg.scheduler.policy == "random":
        rng = rng_for(cfg.seed, "schedule", round=round)
        chosen = rng.choice(eligible, size=k, replace=False)
    else:
        order = (np.arange(n) + cursor) % n
        order = order[np.isin(order, eligible)]
        chosen = order[:k]
        if k:
            cursor = int(chosen[-1]) + 1
    chosen = np.sort(chosen)
    if cfg.wireless is None:
        return Schedule.of(chosen), cursor
    return Schedule(chosen, subchannel=np.arange(len(chosen))), cursor


def _config(policy, clients_per_round=None, wireless=None):
    raw = {
        "name": "client-sets",
        "seed": 11,
        "rounds": 40,
        "data": {"dataset": "digits", "num_clients": N},
        "scheduler": {"policy": policy, "clients_per_round": clients_per_round},
    }
    if wireless is not None:
        raw["wireless"] = wireless
    return load_config(raw)


class _Uplink:
    """Eligibility that changes every round, and a fixed channel."""

    def __init__(self, cfg):
        self.mask = np.ones(N, bool)
        k = cfg.wireless.num_subchannels if cfg.wireless else 1
        self.gain = np.random.default_rng(2).normal(-90, 5, (N, k))

    def eligible(self, round=None):
        return self.mask.copy()

    def participation_target(self):
        return None

    noise_std = 0.3  # the clients' σ_DP
    server_noise_std = 0.0

    def channel_state(self, t):
        return SimpleNamespace(gain_db=self.gain)


def _system(cfg):
    return SimpleNamespace(config=cfg, dim=100, num_clients=N, uplink=_Uplink(cfg))


def _assert_same(got, want, t):
    for name in ("clients", "subchannel", "tx_power_w"):
        np.testing.assert_array_equal(
            getattr(got, name), getattr(want, name), err_msg=f"t={t} {name}"
        )


CASES = [
    ("all", None, None),
    ("all", 4, None),
    ("random", None, None),
    ("random", 4, None),
    ("round_robin", None, None),
    ("round_robin", 4, None),
    ("all", None, {"num_subchannels": 3}),
    ("all", 2, {"num_subchannels": 3}),
]


@pytest.mark.parametrize(("policy", "k", "wireless"), CASES)
def test_client_set_deciders_equal_the_former_builtin_rule(policy, k, wireless):
    # Arrange
    cfg = _config(policy, k, wireless)
    system = _system(cfg)
    (decider,) = make_deciders(cfg, system, PolicyDecider)
    rng = np.random.default_rng(3)
    cursor = 0
    assert not decider.observes  # the loop never observes the system for it
    for t in range(40):  # eligibility changes every round, sometimes to nobody
        system.uplink.mask = rng.random(N) < rng.choice([0.0, 0.4, 0.8, 1.0])
        # Act
        got = decider.decide(t, None)
        want, cursor = old_schedule(cfg, system.uplink.mask, t, cursor)
        # Assert
        _assert_same(got, want, t)


def test_a_builtin_checkpoint_cursor_resumes_round_robin():
    # Arrange: the policy's cursor at 3 after round 0
    cfg = _config("round_robin", 3)
    system = _system(cfg)
    (decider,) = make_deciders(cfg, system, PolicyDecider)
    decider.decide(0, None)
    # Act: the former rule's states {"cursor": c}, c up to N + last id
    decider.load_state_dict({"cursor": N})
    first = decider.decide(1, None).clients.tolist()
    decider.load_state_dict({"cursor": 5 + N})
    cursor_after = decider.policy.cursor
    second = decider.decide(2, None).clients.tolist()
    # Assert
    assert first == [0, 1, 2]
    assert cursor_after == 5
    assert second == [5, 6, 7]
    assert decider.state_dict()["cursor"] == 8


@pytest.mark.parametrize("policy", ["all", "random"])
def test_a_builtin_checkpoint_of_a_stateless_rule_changes_nothing(policy):
    cfg = _config(policy, 4)
    (decider,) = make_deciders(cfg, _system(cfg), PolicyDecider)
    before = decider.state_dict()
    decider.load_state_dict({"cursor": 0})
    assert not hasattr(decider.policy, "cursor")
    assert decider.state_dict().keys() == before.keys()


def test_participants_report_ineligible_clients_and_take_subchannels_in_order():
    rules = StarParticipants(num_clients=5, num_subchannels=3)
    eligible = np.array([True, False, True, True, True])
    schedule, ignored = rules.to_schedule(np.array([1, 1, 0, 1, 0]), eligible)
    assert ignored == [1]
    assert schedule.clients.tolist() == [0, 3]
    assert schedule.subchannel.tolist() == [0, 1]
    obs_space, action_space = rules.spaces()
    assert obs_space["channel_gain"].shape == (5, 3) and action_space.n == 5
    ideal, _ = StarParticipants(5).to_schedule(np.array([0, 0, 1, 1, 0]), eligible)
    assert ideal.subchannel.tolist() == [-1, -1]
    assert "channel_gain" not in StarParticipants(5).spaces()[0].spaces


def _context_of(system):
    """Copy of the former ``policies.lyapunov._context_of`` (the oracle)."""
    cfg = system.config
    wireless = cfg.wireless
    link = None
    if wireless is not None:
        link = LinkConstants(
            bandwidth_hz=float(wireless.bandwidth_hz),
            noise_psd_dbm_hz=float(wireless.noise_psd_dbm_hz),
            tx_power_dbm=float(wireless.tx_power_dbm),
            bs_tx_power_dbm=float(wireless.bs_tx_power_dbm),
            qam_order=int(wireless.qam_order),
            max_latency_s=wireless.max_latency_s,
            downlink_latency=bool(wireless.downlink_latency),
            cpu_cycles_per_sample=float(wireless.cpu_cycles_per_sample),
            cpu_frequency_hz=float(wireless.cpu_frequency_hz),
            effective_capacitance=float(wireless.effective_capacitance),
            # issue 48's: no deadline, i.i.d. Rayleigh fading, dense float32
            # uploads, the engine's airtime model
            round_deadline_s=wireless.round_deadline_s,
            fading_rho=0.0,
            rician_k=0.0,
            upload_bits=32.0 * system.dim,
            airtime_model=uplink_airtime_s,
        )
    algo = cfg.algorithm
    beta = system.uplink.participation_target()
    return SystemContext(
        topology="star",
        seed=int(cfg.seed),
        rounds=int(cfg.rounds),
        model_dim=int(system.dim),
        link=link,
        privacy=PrivacyConstants(
            clip_norm=cfg.privacy.clip_norm,
            noise_std=0.3,  # the clients' σ (the server's only under central DP)
            participation_target=None if beta is None else tuple(map(float, beta)),
        ),
        training=TrainingConstants(
            local_steps=algo.local_steps,
            local_epochs=algo.local_epochs,
            batch_size=algo.batch_size,
            # the sparsity an upload keeps when no policy sets it
            sparsity=float(
                getattr(algo, "sparsity", cfg.compression.sparsify_fraction)
            ),
        ),
    )


@pytest.mark.parametrize("wireless", [None, {"num_subchannels": 3}])
def test_star_context_equals_the_one_lyapunov_built(wireless):
    cfg = _config("all", None, wireless)
    system = _system(cfg)
    system.uplink.participation_target = lambda: np.linspace(0.1, 0.4, N)
    context = star_context(system)
    oracle = _context_of(system)
    # the star's context is the shared one plus the algorithm's control names
    assert {f.name: getattr(context, f.name) for f in fields(oracle)} == {
        f.name: getattr(oracle, f.name) for f in fields(oracle)
    }
    assert context.control_names == ("lr",)  # FedAvg's one control
    assert star_context(system).rng("schedule", round=3).integers(1 << 30) == rng_for(
        11, "schedule", round=3
    ).integers(1 << 30)
