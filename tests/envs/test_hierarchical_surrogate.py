"""HierarchicalFL-v0 in surrogate mode: the closed form of two rounds, and determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gymnasium import spaces

from envs.hierarchy.scheduling import HierarchicalSchedulingEnv
from policies.registry import make_policy
from rayfl.hierarchy.cost import uplink_rate_bps
from rayfl.hierarchy.dp import stream_stds
from rayfl.seeding import rng_for
from rayfl.wireless.units import dbm_to_w
from tests.configs import DIGITS_8

CONFIG = {
    "seed": 0,
    "rounds": 4,
    "data": DIGITS_8,
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": {"kind": "fedavg", "local_steps": 3, "batch_size": 16, "lr": 0.1},
    "output": {"progress": False, "plots": False},
    "topology": {
        "kind": "hierarchical",
        "num_edges": 2,
        "tau": 3,
        "local_period": 3,
        "trusted_edges": [0],
        "lr": {"mode": "constant"},
        "scheduling": {"subchannels_per_edge": 2},
    },
}
#: Per-edge actions of two rounds: device index within the subnet per subchannel.
ACTIONS = [([0, 2], [1, 4]), ([3, 0], [4, 2])]


def _env(**kwargs):
    return HierarchicalSchedulingEnv(CONFIG, mode="surrogate", **kwargs)


def _expected_gap_and_loss(env, actions):
    """The recursion of envs.hierarchy.surrogate written out by hand."""
    sur = env.system
    topo = env.config.topology
    subnets = sur.scheduling.subnets
    trusted = np.array([True, False])
    sample_rate = min(1.0, 16 / float(sur.num_train.mean()))
    floors = np.concatenate([d.floor for d in sur.dynamics])
    gap = math.log(sur.num_classes) - floors.mean()
    uploads = np.zeros(8)
    age = np.zeros(8)
    for acts in actions:
        chosen = [
            [int(subnets[c][j]) for j in a if j < len(subnets[c])]
            for c, a in enumerate(acts)
        ]
        s = np.array([len(m) for m in chosen])
        stds = stream_stds(
            topo.dp,
            enabled=True,
            trusted=trusted,
            participants=s,
            learning_rate=0.1,
            tau=3,
            period=3,
            num_global=4,
            num_local=0,
            sample_rate=sample_rate,
        )
        assert stds.edge_global[0] > 0 and stds.device_global[1] > 0  # DP is on
        edge_gaps = []
        for c, members in enumerate(chosen):
            data = sur.num_train[subnets[c]]
            share = sur.num_train[members].sum() / data.sum()
            # trusted: one σ̄ on the mean; untrusted: s noises of σ averaged
            noise_var = (
                stds.edge_global[c] ** 2
                if trusted[c]
                else stds.device_global[c] ** 2 / s[c]
            )
            edge_gaps.append((1 - 0.5 * share) * gap + noise_var)
            uploads[members] += 1
            age[subnets[c]] += 1
            age[members] = 0
        gap = float(np.mean(edge_gaps))  # equal weighting, eq. 14
    het = np.concatenate([d.heterogeneity for d in sur.dynamics])
    drift = np.concatenate([d.drift for d in sur.dynamics])
    loss = floors + gap + het * np.exp(-uploads / 3) + drift * (1 - np.exp(-age))
    return gap, loss


def test_two_rounds_follow_the_closed_form():
    env = _env()
    env.reset(seed=0)
    rewards, infos = [], []
    for acts in ACTIONS:
        _, reward, terminated, truncated, info = env.step(env.join_actions(acts))
        rewards.append(reward)
        infos.append(info)
        assert not terminated and not truncated
    gap, loss = _expected_gap_and_loss(env, ACTIONS)
    assert env.system.gap == pytest.approx(gap, rel=1e-12)
    assert gap > 0
    np.testing.assert_allclose(env.system.device_loss(), loss, rtol=1e-12)
    weights = env.system.num_test
    assert rewards[-1] == pytest.approx(-np.average(loss, weights=weights), rel=1e-12)
    # subnets are [0..3] and [4..7]; index 4 = idle on edge 1
    assert infos[0]["scheduled"] == [0, 2, 5]
    assert infos[1]["scheduled"] == [0, 3, 6]


def test_energy_and_latency_come_from_the_cost_model():
    env = _env(reward="energy")
    env.reset(seed=0)
    _, reward, _, _, info = env.step(env.join_actions(ACTIONS[0]))
    cost = env.config.topology.cost
    bits = env.system.cost.payload_bits
    p = float(dbm_to_w(cost.tx_power_dbm))
    time_s = 0.0
    for device, subchannel in ((0, 0), (2, 1), (5, 0)):
        fading = rng_for(0, "hier_subchannel_fading", round=0, client=device)
        u = fading.exponential(1.0, size=2)[subchannel]
        distance = env.system.topology.distance_m[device]
        time_s += bits / float(uplink_rate_bps(cost, distance_m=distance, fading=u))
    hop = bits / cost.backhaul_rate_bps
    energy = p * time_s + 2 * float(dbm_to_w(cost.backhaul_power_dbm)) * hop
    assert info["energy_j"] == pytest.approx(energy, rel=1e-12)
    assert info["latency_s"] == pytest.approx(time_s + 2 * 2 * hop, rel=1e-12)
    assert reward == -info["energy_j"]


def _rollout(env, seed):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = [obs]
    for _ in range(3):  # distinct devices per edge (valid actions)
        acts = [
            rng.permutation(n + 1)[:k]
            for n, k in zip(env.sizes, env.num_subchannels, strict=True)
        ]
        obs, reward, *_ = env.step(env.join_actions(acts))
        out += [obs, reward]
    return out


def _equal(a, b):
    if isinstance(a, dict):
        return all(_equal(a[k], b[k]) for k in a)
    return np.array_equal(a, b)


def test_same_seed_same_rollout_and_another_seed_differs():
    env = _env()
    first, second = _rollout(env, 5), _rollout(env, 5)
    assert all(_equal(a, b) for a, b in zip(first, second, strict=True))
    assert _equal(_rollout(_env(), 5)[-2], first[-2])  # a fresh env too
    other = _rollout(env, 6)
    assert not all(_equal(a, b) for a, b in zip(first, other, strict=True))


def test_privacy_spent_grows_only_for_uploading_devices():
    env = _env()
    env.reset(seed=0)
    obs, *_ = env.step(env.join_actions(ACTIONS[0]))
    spent = obs["edge_0"]["privacy_spent"]
    assert spent[0] > 0 and spent[2] > 0
    assert spent[1] == 0 and spent[3] == 0


def test_surrogate_refuses_accuracy_and_the_controller():
    with pytest.raises(ValueError, match="reward=accuracy needs mode=emulate"):
        _env(reward="accuracy")
    env = HierarchicalSchedulingEnv(
        CONFIG, mode="surrogate", overrides=["topology.control.enabled=true"]
    )
    with pytest.raises(ValueError, match="does not model topology.control"):
        env.reset()


def test_every_sample_of_the_action_space_steps():
    # a device on several subchannels of its edge keeps the lowest one, the
    # others idle: the repair of WirelessFL-v0 and D2DNeighbor-v0
    env = _env()
    env.reset(seed=0)
    env.action_space.seed(3)
    subnets = env.system.scheduling.subnets
    repeats = 0
    for _ in range(40):
        action = env.action_space.sample()
        expected, kept = [], []
        for c, block in enumerate(env.split_action(action)):
            first = {}
            for k, j in enumerate(block.tolist()):
                if j < env.sizes[c]:
                    repeats += j in first
                    first.setdefault(j, k)
            expected += [int(subnets[c][j]) for j in first]
            kept.append(sorted(first.items()))
        blocks = env.split_action(action)
        schedules = [
            r.to_schedule(a)[0] for r, a in zip(env.rules, blocks, strict=True)
        ]
        for schedule, members, pairs in zip(schedules, subnets, kept, strict=True):
            got = sorted(
                (int(np.searchsorted(members, i)), int(k))
                for i, k in zip(schedule.clients, schedule.subchannel, strict=True)
            )
            assert got == pairs
        _, reward, _, truncated, info = env.step(action)
        assert info["scheduled"] == sorted(expected)
        assert np.isfinite(reward)
        if truncated:
            env.reset()
    assert repeats >= 5  # the samples named devices twice


def test_participants_action_for_a_device_set_policy():
    # MultiBinary(Σ n_c); an edge keeps its K_e = 2 lowest marked devices
    env = _env(participants=True)
    assert env.action_space == spaces.MultiBinary(8)
    assert [a for _, a in env.edge_spaces] == [spaces.MultiBinary(4)] * 2
    obs, _ = env.reset(seed=0)
    subnets = env.system.scheduling.subnets
    policies = [make_policy("uniform", sp) for sp in env.edge_spaces]
    for c, policy in enumerate(policies):
        policy.reset(seed=c)
    action = env.join_actions(
        [p(env.edge_observation(obs, c)) for c, p in enumerate(policies)]
    )
    assert [int(b.sum()) for b in env.split_action(action)] == [2, 2]
    _, _, _, _, info = env.step(action)
    marked = [
        subnets[c][b.astype(bool)] for c, b in enumerate(env.split_action(action))
    ]
    assert info["scheduled"] == sorted(np.concatenate(marked).tolist())
    _, _, _, _, info = env.step(np.ones(8, dtype=np.int8))
    assert info["scheduled"] == sorted([*subnets[0][:2], *subnets[1][:2]])
