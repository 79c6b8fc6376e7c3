"""The client-set rules (action part ``participants``) against the engine code they replace.

Oracles: ``Scheduler.schedule`` of the deleted ``rayfl/scheduler.py`` (star
without a channel model: ``all``, ``random``, ``round_robin``) and
``rayfl.hierarchy.round.HierarchicalRound._choose_participants`` (the
hierarchy's ``uniform``), both copied here as they were, so the comparison
holds after the engine drops them.
"""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from policies import make_policy
from rayfl.observation import SystemContext, observation_space
from rayfl.seeding import rng_for


def scheduler_schedule(policy, k, seed, num_clients, eligible, round, cursor):
    """Copy of ``Scheduler.schedule`` (the deleted rayfl/scheduler.py): (chosen, cursor)."""
    eligible = np.flatnonzero(eligible)
    k = min(k, len(eligible))
    if policy == "all":
        chosen = eligible[:k]
    elif policy == "random":
        rng = rng_for(seed, "schedule", round=round)
        chosen = rng.choice(eligible, size=k, replace=False)
    else:
        n = num_clients
        order = (np.arange(n) + cursor) % n
        order = order[np.isin(order, eligible)]
        chosen = order[:k]
        if k:
            cursor = int(chosen[-1]) + 1
    return np.sort(chosen), cursor


def choose_participants(seed, k, subnets, participants, cap):
    """Copy of ``HierarchicalRound._choose_participants``' uniform branch."""
    out = []
    for c, members in enumerate(subnets):
        s = int(min(participants[c], len(members)))
        if cap is not None:
            s = min(s, cap)
        if s >= len(members):
            out.append(list(members))
            continue
        rng = rng_for(seed, "hier_participants", round=k, client=c)
        out.append(sorted(int(i) for i in rng.choice(members, size=s, replace=False)))
    return out


@pytest.mark.parametrize("name", ["all", "random", "round_robin"])
@pytest.mark.parametrize(
    ("num_clients", "clients_per_round", "num_subchannels"),
    [(10, None, None), (10, 3, None), (7, 7, None), (9, None, 4), (9, 2, 4)],
)
def test_star_client_sets_equal_the_builtin_scheduler(
    name, num_clients, clients_per_round, num_subchannels
):
    # Arrange: the Scheduler's k (clients_per_round, else K, else N)
    seed = 17
    k = clients_per_round or num_subchannels or num_clients
    k = min(k, num_clients)
    keys = ["eligible", "round"]
    if num_subchannels is not None:
        keys.append("channel_gain")
    space = observation_space(keys, num_clients, num_subchannels or 1)
    context = SystemContext(topology="star", seed=seed, rounds=50, model_dim=10)
    policy = make_policy(
        name,
        (space, spaces.MultiBinary(num_clients)),
        context=context,
        clients_per_round=clients_per_round,
    )
    rng = np.random.default_rng(3)
    cursor = 0
    for t in range(50):  # eligibility changes every round, sometimes to nobody
        eligible = rng.random(num_clients) < rng.choice([0.0, 0.4, 0.8, 1.0])
        obs = {
            "eligible": eligible.astype(np.float32),
            "round": np.array([t], np.float32),
            "channel_gain": rng.normal(-100, 5, (num_clients, num_subchannels or 1)),
        }
        # Act
        action = policy(obs)
        expected, cursor = scheduler_schedule(
            name, k, seed, num_clients, eligible, t, cursor
        )
        # Assert
        assert spaces.MultiBinary(num_clients).contains(action)
        np.testing.assert_array_equal(
            np.flatnonzero(action), expected, err_msg=f"t={t}"
        )


@pytest.mark.parametrize("cap", [None, 2, 4])
def test_uniform_equals_the_hierarchys_draw(cap):
    # Arrange: 3 edges of 5, 3 and 6 devices, controller caps s_c^k varying per round
    seed = 5
    subnets = [[0, 3, 4, 8, 9], [1, 2, 7], [5, 6, 10, 11, 12, 13]]
    rng = np.random.default_rng(1)
    policies = []
    for c, members in enumerate(subnets):
        n_c = len(members)
        k_e = cap or n_c  # subchannels_per_edge or n_c
        context = SystemContext(
            topology="hierarchical",
            seed=seed,
            rounds=20,
            model_dim=10,
            unit=c,
            num_units=len(subnets),
        )
        space = observation_space(("channel_gain", "eligible", "round"), n_c, k_e)
        policies.append(
            make_policy("uniform", (space, spaces.MultiBinary(n_c)), context=context)
        )
    for k in range(20):
        participants = [int(rng.integers(0, len(m) + 1)) for m in subnets]
        expected = choose_participants(seed, k, subnets, participants, cap)
        for c, members in enumerate(subnets):
            n_c, k_e = len(members), policies[c].num_subchannels
            # the edge's observation: subchannels beyond o_c^k are closed (-inf dB)
            open_ = k_e if participants[c] == n_c else min(k_e, participants[c])
            gain = rng.normal(-90, 5, (n_c, k_e))
            gain[:, open_:] = -np.inf
            obs = {
                "channel_gain": gain,
                "eligible": np.ones(n_c, np.float32),
                "round": np.array([k], np.float32),
            }
            # Act
            rows = np.flatnonzero(policies[c](obs))
            # Assert
            assert [members[j] for j in rows] == expected[c], (k, c)


def test_client_set_rules_refuse_the_wrong_action_space():
    space = observation_space(("channel_gain", "eligible", "round"), 4, 2)
    with pytest.raises(ValueError, match="chooses participants only"):
        make_policy("all", (space, spaces.MultiDiscrete([5, 5])))
    with pytest.raises(ValueError, match="assigns subchannels"):
        make_policy("best_channel", (space, spaces.MultiBinary(4)))
    with pytest.raises(ValueError, match="MultiBinary\\(4\\)"):
        make_policy("random", (space, spaces.MultiBinary(3)))
    with pytest.raises(ValueError, match="exceeds the 2 subchannels"):
        make_policy("round_robin", (space, spaces.MultiBinary(4)), clients_per_round=3)
    no_gain = observation_space(("eligible", "round"), 4, 1)
    with pytest.raises(ValueError, match="needs 'channel_gain'"):
        make_policy("random", (no_gain, spaces.MultiDiscrete([5, 5])))


def test_random_client_set_without_context_replays_its_own_seed():
    space = observation_space(("eligible", "round"), 8, 1)
    first, second = (
        make_policy("random", (space, spaces.MultiBinary(8)), clients_per_round=3)
        for _ in range(2)
    )
    first.reset(seed=4)
    second.reset(seed=4)
    obs = {"eligible": np.ones(8, np.float32), "round": np.zeros(1, np.float32)}
    actions = [first(obs) for _ in range(5)]
    assert all(a.sum() == 3 for a in actions)
    np.testing.assert_array_equal(actions, [second(obs) for _ in range(5)])
