"""Per-edge scheduling of the hierarchy through the flat env/policy interface."""

import itertools
import math
import pickle
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401 - registers HierarchicalFL-v0
import rayfl
from policies.registry import make_policy
from rayfl.config import ConfigError, SchedulerConfig, load_config
from rayfl.engine.deciders import PolicyDecider
from rayfl.engine.loop import decide
from rayfl.hierarchy.config import CostConfig, HierSchedulingConfig
from rayfl.hierarchy.deciders import EdgeActions, check_edge_policy, edge_policies
from rayfl.hierarchy.scheduling import EdgeScheduling, validate_action
from rayfl.schedule import Schedule
from rayfl.seeding import rng_for
from tests.configs import DIGITS_8

# All tests here use the shared Ray session (tests/conftest.py): the module then runs
# with the other Ray modules instead of starting Ray again at its first Ray test.
pytestmark = pytest.mark.usefixtures("ray_session")

SUBNETS = [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9, 10, 11]]
DIST = np.linspace(10.0, 100.0, 12)


class _Edges:
    """The edges' bands and one decider per edge, as a run builds them."""

    def __init__(self, policy, k_e, **kw):
        cfg = HierSchedulingConfig(subchannels_per_edge=k_e, **kw)
        self.sched = EdgeScheduling(
            cfg,
            cost=CostConfig(),
            seed=3,
            subnets=SUBNETS,
            distance_m=DIST,
            num_train=np.arange(12) + 10,
        )
        run = SimpleNamespace(
            topology=SimpleNamespace(scheduling=cfg, cost=CostConfig()),
            scheduler=SchedulerConfig(policy=policy),
            seed=3,
            rounds=10,
        )
        engine = SimpleNamespace(edge_scheduling=self.sched, dim=10)
        self.deciders = [
            PolicyDecider(policy, rules.to_schedule)
            for policy, rules in edge_policies(run, engine)
        ]

    def step(self, k, caps=(5, 7)):
        obs = self.sched.observations(k, 0, np.array(caps), upload_count=np.zeros(12))
        decision = [d.decide(k, o) for d, o in zip(self.deciders, obs, strict=True)]
        chosen, subch = self.sched.participants_of(decision, np.array(caps))
        self.sched.observe(chosen, [])
        return obs, chosen, subch


def _sched(policy, k_e, **kw):
    return _Edges(policy, k_e, **kw)


def _step(edges, k, caps=(5, 7)):
    return edges.step(k, caps)


def test_best_channel_picks_the_subnets_strongest_devices():
    # flat fading across the band: the strongest K_e devices by gain (argsort oracle)
    sched = _sched("best_channel", 2, frequency_selective=False)
    for k in range(5):
        obs, chosen, _ = _step(sched, k)
        for c, members in enumerate(SUBNETS):
            gain = obs[c]["channel_gain"][:, 0]
            oracle = sorted(np.asarray(members)[np.argsort(-gain)[:2]].tolist())
            assert chosen[c] == oracle


def test_best_channel_matching_is_the_brute_force_optimum():
    # frequency-selective: Σ gain [dB] of the matching equals exhaustive search
    sched = _sched("best_channel", 3)
    for k in range(4):
        obs, chosen, subch = _step(sched, k)
        for c, members in enumerate(SUBNETS):
            gain = obs[c]["channel_gain"].astype(np.float64)
            best = max(
                sum(gain[j, s] for s, j in enumerate(perm))
                for perm in itertools.permutations(range(len(members)), 3)
            )
            got = sum(gain[members.index(i), subch[i]] for i in chosen[c])
            assert got == pytest.approx(best, abs=1e-4)


@pytest.mark.parametrize("k_e", [2, 3])
def test_round_robin_covers_every_device_in_ceil_n_over_k_rounds(k_e):
    sched = _sched("round_robin", k_e)
    seen = [set() for _ in SUBNETS]
    horizon = max(math.ceil(len(s) / k_e) for s in SUBNETS)
    rounds_to_cover = [None, None]
    for k in range(horizon):
        _, chosen, _ = _step(sched, k)
        for c, members in enumerate(chosen):
            assert len(members) == k_e  # one device per subchannel
            seen[c] |= set(members)
            if rounds_to_cover[c] is None and seen[c] == set(SUBNETS[c]):
                rounds_to_cover[c] = k + 1
    for c, members in enumerate(SUBNETS):
        assert rounds_to_cover[c] == math.ceil(len(members) / k_e)


def test_random_policy_is_seeded_and_staleness_tracks_participation():
    a, b = _sched("random", 2), _sched("random", 2)
    picks = [[_step(s, k)[1] for k in range(4)] for s in (a, b)]
    assert picks[0] == picks[1]
    assert len({tuple(p[0]) for p in picks[0]}) > 1  # not a constant choice
    last = picks[0][-1]
    for c, members in enumerate(SUBNETS):
        for i in members:
            assert (a.sched.staleness[i] == 0) == (i in last[c])


def test_checkpointed_policies_resume_the_same_decisions():
    a = _sched("round_robin", 2)
    _step(a, 0)
    b = _sched("round_robin", 2)  # rebuilt from the config, then restored
    b.sched.load_state_dict(pickle.loads(pickle.dumps(a.sched.state_dict())))
    for mine, saved in zip(b.deciders, a.deciders, strict=True):
        mine.load_state_dict(pickle.loads(pickle.dumps(saved.state_dict())))
    assert [_step(a, k)[1] for k in (1, 2)] == [_step(b, k)[1] for k in (1, 2)]
    np.testing.assert_array_equal(a.sched.staleness, b.sched.staleness)
    # the restored state matters: a fresh policy decides otherwise
    assert _step(a, 3)[1] != _step(_sched("round_robin", 2), 3)[1]


def test_controller_cap_closes_subchannels():
    sched = _sched("best_channel", 3)
    obs, chosen, _ = _step(sched, 0, caps=(2, 7))
    assert np.isneginf(obs[0]["channel_gain"][:, 2:]).all()
    assert np.isfinite(obs[1]["channel_gain"]).all()
    assert [len(m) for m in chosen] == [2, 3]


def test_uniform_draws_the_paper_choice_through_the_deciders():
    # s_c^k below n_c: the uniform draw keyed (seed, "hier_participants", k, c)
    edges, caps = _sched("uniform", None), (3, 4)
    for k in range(3):
        _, chosen, subch = _step(edges, k, caps)
        for c, members in enumerate(SUBNETS):
            rng = rng_for(3, "hier_participants", round=k, client=c)
            drawn = rng.choice(members, size=caps[c], replace=False)
            assert chosen[c] == sorted(int(i) for i in drawn)
        assert subch is None  # participants only: no subchannel
    # s_c^k = n_c: every device of the subnet
    assert _step(edges, 3)[1] == SUBNETS


def test_invalid_actions_raise_clear_errors():
    sched = _sched("random", 2).sched
    caps = np.array([5, 7])
    rules = [
        EdgeActions(c, m, 2, participants=False) for c, m in enumerate(sched.subnets)
    ]
    ok = [rules[0].to_schedule([0, 1])[0], rules[1].to_schedule([7, 2])[0]]
    # device 7 of subnet 1 = idle on subchannel 0; local device 2 = id 7
    assert sched.participants_of(ok, caps) == ([[0, 1], [7]], {0: 0, 1: 1, 7: 1})
    # a device on two subchannels keeps the lowest one (the star env's repair)
    repaired, ignored = rules[1].to_schedule(np.array([1, 1]))
    assert repaired.clients.tolist() == [6] and repaired.subchannel.tolist() == [0]
    assert ignored == []
    with pytest.raises(ValueError, match="edge 1: subchannel 0: device 8 is not in"):
        rules[1].to_schedule(np.array([8, 0]))
    with pytest.raises(ValueError, match="edge 0: action must be 2 integers"):
        rules[0].to_schedule(np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="action must be 2 integers"):
        validate_action(np.array([0.0, 1.0]), edge=0, num_devices=5, num_subchannels=2)
    with pytest.raises(ValueError, match="edge 0: a participants action is 5 zeros"):
        EdgeActions(0, sched.subnets[0], 2, participants=True).to_schedule(
            [0, 2, 0, 0, 0]
        )
    with pytest.raises(ValueError, match="one schedule per edge"):
        sched.participants_of([ok[0]], caps)
    with pytest.raises(
        ValueError, match=r"edge 0: devices \[7\] are not in its subnet"
    ):
        sched.participants_of([ok[1], ok[0]], caps)
    with pytest.raises(ValueError, match="edge 0: subchannel 2 is not in 0..1"):
        sched.participants_of([Schedule([0], subchannel=[2]), ok[1]], caps)
    with pytest.raises(ValueError, match="edge 0: 3 devices take part; at most 2"):
        sched.participants_of([Schedule([0, 1, 2], subchannel=[0, 1, 1]), ok[1]], caps)
    # a device set keeps the edge's o_c^k = K_e lowest ids (the star's first K)
    chosen, _ = sched.participants_of([Schedule.of([4, 0, 2]), Schedule.of([5])], caps)
    assert chosen == [[0, 2], [5]]
    with pytest.raises(ValueError, match="to every scheduled device or to none"):
        sched.participants_of([Schedule.of([0]), ok[1]], caps)
    with pytest.raises(ValueError, match="unknown name 'nope'"):
        _sched("nope", 2)
    with pytest.raises(ValueError, match="minmax is meant for topology.kind=star"):
        check_edge_policy("minmax")
    assert check_edge_policy("lyapunov").__name__ == "LyapunovPolicy"
    assert check_edge_policy("uniform").__name__ == "UniformPolicy"
    with pytest.raises(
        ConfigError, match="scheduler.policy=uniform has no parameter .window."
    ):
        load_config(
            {
                "topology": {"kind": "hierarchical", "num_edges": 2},
                "scheduler": {"params": {"window": 3}},
            }
        )


def test_default_is_the_uniform_choice():
    cfg = load_config({"topology": {"kind": "hierarchical", "num_edges": 2}})
    assert cfg.scheduler.policy == "uniform"
    assert cfg.topology.scheduling == HierSchedulingConfig()


# ---------------------------------------------------------------- on Ray
TINY = {
    "name": "hsched",
    "rounds": 2,
    "data": DIGITS_8,
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": {"kind": "fedavg", "local_steps": 2, "batch_size": 16, "lr": 0.1},
    "output": {"progress": False, "plots": False},
    "topology": {
        "kind": "hierarchical",
        "num_edges": 2,
        "tau": 2,
        "local_period": 1,
        "edge_eval": False,
        "dp": {"epsilon": 1.0},
    },
}


def _tiny(policy, k_e=2, **top):
    return load_config(
        {
            **TINY,
            "topology": {
                **TINY["topology"],
                **top,
                "scheduling": {"subchannels_per_edge": k_e},
            },
            "scheduler": {"policy": policy},
        }
    )


@pytest.mark.slow
def test_same_seed_same_metrics_fresh_runs(ray_session, tmp_path):
    cfg = {
        **TINY,
        "topology": {**TINY["topology"], "scheduling": {"subchannels_per_edge": 2}},
        "scheduler": {"policy": "best_channel"},
    }
    runs = [rayfl.run(cfg, {"output.dir": str(tmp_path / str(i))}) for i in range(2)]
    cols = ["round", "client", "scheduled", "subchannel", "train_loss", "energy_j"]
    a, b = (r.metrics[cols] for r in runs)
    assert a.equals(b)
    assert runs[0].rounds["global_acc"].equals(runs[1].rounds["global_acc"])
    assert (a.groupby("round")["scheduled"].sum() == 4).all()
    assert a.loc[a.scheduled, "subchannel"].isin([0, 1]).all()


@pytest.fixture(scope="module")
def env(ray_session):
    """One tiny hierarchy for the module (behind the env); tests ``reset`` it."""
    made = gym.make("HierarchicalFL-v0", config=_tiny("random"), reward="energy")
    made.reset()
    yield made.unwrapped
    made.close()


@pytest.fixture
def system(env):
    return env.system


def _edges_of(cfg):
    """The ``reset`` arguments that give a system ``cfg``'s bands and policy."""
    return {"scheduling": cfg.topology.scheduling, "scheduler": cfg.scheduler}


def _run(system, cfg, rounds=2):
    """Run ``rounds`` rounds of ``cfg``'s scheduling as the loop does: observe,
    one decider per edge, round."""
    system.reset(**_edges_of(cfg))
    deciders = [
        PolicyDecider(policy, rules.to_schedule)
        for policy, rules in edge_policies(system.config, system)
    ]
    assert system.num_units == len(deciders) == 2
    out = []
    for k in range(rounds):
        obs = system.observe(k)
        result = system.run_round(k, decide(system, deciders, k))
        out.append((obs, result, result.extras))
    return out


def test_policies_drive_a_hierarchical_run(system):
    out = {
        name: _run(system, _tiny(name))
        for name in ("random", "round_robin", "best_channel")
    }
    cost = system.cost
    subnets = [list(range(4)), list(range(4, 8))]
    for name, rows in out.items():
        for k, (obs, result, extras) in enumerate(rows):
            ids = sorted(r["client"] for r in result.rows)
            # K_e = 2 devices per subnet, one per subchannel
            assert [sum(i in s for i in ids) for s in subnets] == [2, 2], name
            for r in result.rows:
                i, sub = r["client"], r["subchannel"]
                # the upload is priced with the fading of the assigned subchannel
                fading = rng_for(0, "hier_subchannel_fading", round=k, client=i)
                u = fading.exponential(1.0, size=2)[sub]
                t_s, e_j = cost.uploads([i], [u])
                assert r["energy_j"] == pytest.approx(2 * e_j[0], rel=1e-9)
                assert r["latency_s"] == pytest.approx(2 * t_s[0], rel=1e-9)
            if name == "best_channel":
                for c, s in enumerate(subnets):
                    g = obs[c]["channel_gain"]
                    best = max(
                        g[a, 0] + g[b, 1]
                        for a, b in itertools.permutations(range(4), 2)
                    )
                    got = sum(
                        g[s.index(r["client"]), r["subchannel"]]
                        for r in result.rows
                        if r["client"] in s
                    )
                    assert got == pytest.approx(best, abs=1e-4)
            assert extras["energy_j"] > 0
    # round robin: rounds 0 and 1 cover each subnet of 4 with K_e = 2
    for s in subnets:
        covered = {
            r["client"]
            for _, res, _ in out["round_robin"]
            for r in res.rows
            if r["client"] in s
        }
        assert covered == set(s)


def test_same_seed_same_metrics_through_the_policy_path(system):
    cfg = _tiny("random")
    a = _run(system, cfg)
    w_a = system.global_vector()
    b = _run(system, cfg)
    for (_, ra, ea), (_, rb, eb) in zip(a, b, strict=True):
        np.testing.assert_equal(ra.rows, rb.rows)
        np.testing.assert_equal(ea, eb)  # NaN-aware (beta_hat)
    np.testing.assert_array_equal(w_a, system.global_vector())


def test_uniform_cap_limits_participants(system):
    ((_, result, _),) = _run(system, _tiny("uniform", 3), 1)
    ids = [r["client"] for r in result.rows]
    assert sum(i < 4 for i in ids) == 3 and sum(i >= 4 for i in ids) == 3
    assert all("subchannel" not in r for r in result.rows)


def test_env_maps_the_concatenated_action_onto_edges(env):
    obs, _ = env.reset()
    # 2 edges of 4 devices, K_e = 2: MultiDiscrete([5, 5, 5, 5])
    assert env.action_space.nvec.tolist() == [5, 5, 5, 5]
    assert env.observation_space.contains(obs)
    assert obs["edge_1"]["channel_gain"].shape == (4, 2)
    # edge 0: local devices 0 and 3; edge 1: subchannel 0 idle, device 1 (= id 5)
    action = env.join_actions([[0, 3], [4, 1]])
    obs, reward, terminated, truncated, info = env.step(action)
    assert info["scheduled"] == [0, 3, 5]
    assert reward == -info["energy_j"] < 0 and not terminated and not truncated
    with pytest.raises(ValueError, match="4 entries"):
        env.step(np.array([0, 1, 2]))
    # a flat policy drives one edge of the env unchanged
    policies = [make_policy("best_channel", space) for space in env.edge_spaces]
    actions = [p(env.edge_observation(obs, c)) for c, p in enumerate(policies)]
    _, _, _, truncated, info = env.step(env.join_actions(actions))
    assert len(info["scheduled"]) == 4 and truncated  # rounds = 2


def test_controller_caps_the_policy_path(system):
    try:
        system.reset(control=True, **_edges_of(_tiny("best_channel", 3)))
        system.run_global_round(0)
        caps = system.interval.participants.copy()  # s_c^1 chosen by Algorithm 1
        result, _ = system.run_global_round(1)
    finally:
        system.reset(control=False)
    ids = [r["client"] for r in result.rows]
    for c, members in enumerate([range(4), range(4, 8)]):
        expected = 3 if caps[c] >= 4 else min(3, caps[c])
        assert sum(i in members for i in ids) == expected
    assert {r["subchannel"] for r in result.rows} <= {0, 1, 2}


def _drift_plus_penalty_choice(obs, fairness, delay_queue, cost, dim):
    """Brute-force argmin of J = Σ (Q_i − V p̂_i) + Q^de·max d_i, V = 50 (sorted rows).

    Dense uploads (s = 1) at full power over every (device, subchannel) pairing;
    d_i = 33·M / R_i (the payload 32·M plus M index bits) with R_i from
    ``topology.cost``'s W, N_0 and p_i on the observed gain.
    """
    gain_w = 10 ** (obs["channel_gain"].astype(float) / 10)
    noise_w = 10 ** ((cost.noise_psd_dbm_hz - 30) / 10) * cost.bandwidth_hz
    power_w = 10 ** ((cost.tx_power_dbm - 30) / 10)
    delay = 33 * dim / (cost.bandwidth_hz * np.log2(1 + power_w * gain_w / noise_w))
    size = obs["data_size"].astype(float)
    weight = fairness - 50 * size / (2 * size.mean())
    n, k = gain_w.shape
    _, rows = min(
        (
            sum(weight[list(pair)])
            + delay_queue * max(delay[i, s] for s, i in enumerate(pair)),
            sorted(pair),
        )
        for pair in itertools.permutations(range(n), k)
    )
    return rows


def test_lyapunov_runs_per_edge_on_the_cost_models_links(system):
    system.reset(**_edges_of(_tiny("lyapunov")))
    pairs = edge_policies(system.config, system)
    deciders = [PolicyDecider(p, rules.to_schedule) for p, rules in pairs]
    cost, dim = system.config.topology.cost, system.dim
    subnets = [list(range(4)), list(range(4, 8))]
    queues = [(np.zeros(4), 0.0)] * 2  # Q_i and Q^de before round 0
    # Q^de = Q^de + d - d^Avg cancels: compare it to the size of its terms
    scales = [0.0, 0.0]
    for k in range(2):
        obs = system.observe(k)
        result = system.run_round(k, decide(system, deciders, k))
        for c, ((policy, _), members) in enumerate(zip(pairs, subnets, strict=True)):
            fairness, delay_queue = queues[c]
            np.testing.assert_allclose(policy.fairness_queue_values, fairness)
            assert policy.delay_queue_value == pytest.approx(
                delay_queue, rel=1e-6, abs=1e-6 * scales[c]
            )
            rows = [r for r in result.rows if r["client"] in members]
            chosen = sorted(r["client"] - members[0] for r in rows)
            oracle = _drift_plus_penalty_choice(
                obs[c], fairness, delay_queue, cost, dim
            )
            assert chosen == oracle, (k, c)
            # the round's delay in the policy's model, from the cost model's rows
            # (two uploads of 32·M bits per row; the policy adds M index bits)
            delay_s = 33 / 32 * max(r["latency_s"] / 2 for r in rows)
            assert policy._last[2] == pytest.approx(delay_s, rel=1e-6)  # float32 gains
            # the queue rule for the next decision: β_i = K_e / n_c = 1/2
            scheduled = np.isin(np.arange(4), chosen)
            queues[c] = (
                np.maximum(fairness + scheduled - 0.5, 0.0),
                max(delay_queue + delay_s - policy.d_avg_s, 0.0),
            )
            scales[c] = delay_queue + delay_s + policy.d_avg_s
