"""The Lyapunov policy's virtual queues and actions (spec seed_002 §4.3, Sec. V-B)."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from policies import make_policy
from tests.policies.helpers import make_spaces, sample_observation, scheduled


def controls_spaces(num_clients: int, num_subchannels: int, levels: int = 4):
    """The env's Dict action space with power levels and one control (sparsity)."""
    observation_space, action_space = make_spaces(num_clients, num_subchannels, levels)
    parts = dict(action_space.spaces)
    parts["controls"] = spaces.Box(0.0, 1.0, (num_clients, 1), np.float32)
    return observation_space, spaces.Dict(parts)


@pytest.mark.parametrize("mode", ["as_printed", "lower_bound"])
def test_queues_follow_their_update_equations(mode):
    # Arrange: 8 clients, 3 channels, fixed β and d^Avg
    observation_space, action_space = controls_spaces(8, 3)
    beta = np.linspace(0.1, 0.6, 8)
    policy = make_policy(
        "lyapunov",
        (observation_space, action_space),
        model_dim=20_000,
        beta=beta.tolist(),
        d_avg_s=2.0,
        fairness_queue=mode,
    )
    policy.reset(seed=0)
    rng = np.random.default_rng(1)
    q_fa, q_de = np.zeros(8), 0.0
    for _ in range(25):
        obs = sample_observation(observation_space, rng)
        obs["eligible"][:] = (rng.random(8) < 0.8).astype(np.float32)
        # Act
        action = policy(obs)
        if not policy._last:
            continue
        served, available, delay = policy._last
        # Assert: the decision is what the queue update will see
        assignment = scheduled(action)
        np.testing.assert_array_equal(
            np.flatnonzero(served), np.sort(assignment[assignment < 8])
        )
        # Independent recursion, spec §3 step 7 (and [AMBIG-3] for lower_bound)
        step = served - beta if mode == "as_printed" else beta - served
        q_fa = np.where(available, np.maximum(q_fa + step, 0.0), q_fa)
        q_de = max(q_de + delay - 2.0, 0.0)
        policy.update_queues(served, available, delay)
        policy._last = None  # applied here instead of at the next call
        np.testing.assert_allclose(policy.fairness_queue_values, q_fa, atol=1e-12)
        np.testing.assert_allclose(policy.delay_queue_value, q_de, atol=1e-9)


def test_delay_queue_pushes_sparsification():
    # Arrange: a backlog of delay makes the policy sparsify
    observation_space, action_space = controls_spaces(10, 5)
    obs = sample_observation(observation_space, np.random.default_rng(0))
    obs["eligible"][:] = 1
    policy = make_policy(
        "lyapunov", (observation_space, action_space), model_dim=1_663_370, d_avg_s=1.0
    )
    policy.reset(seed=0)
    # Act
    dense = policy(obs)["controls"][:, 0]
    policy.reset(seed=0)
    policy.d_avg_s = 1.0
    policy.delay_queue_value = 50.0
    policy._last = None
    sparse = policy(obs)
    # Assert: empty queue → s = 1; a large Q^de → s < 1, within [s^th, 1]
    chosen = scheduled(sparse)
    s = sparse["controls"][chosen, 0]
    assert np.all(dense == 1.0)
    assert np.all((s >= 0.1 - 1e-6) & (s <= 1.0)) and s.min() < 1.0


def test_actions_carry_controls_inside_the_space():
    # Arrange
    observation_space, action_space = controls_spaces(20, 5)
    policy = make_policy("lyapunov", (observation_space, action_space), V=5.0)
    policy.reset(seed=2)
    rng = np.random.default_rng(3)
    for _ in range(10):
        obs = sample_observation(observation_space, rng)
        # Act
        action = policy(obs)
        # Assert
        assert action_space.contains(action)
        used = scheduled(action)
        used = used[used < 20]
        assert used.size == min(int(obs["eligible"].sum()), 5)


def test_bad_parameters_are_named():
    observation_space, action_space = make_spaces(4, 2)
    with pytest.raises(ValueError, match="fairness_queue"):
        make_policy("lyapunov", (observation_space, action_space), fairness_queue="x")
    with pytest.raises(ValueError, match="V must be"):
        make_policy("lyapunov", (observation_space, action_space), V=0.0)


def _old_bind_system(policy, system):
    """Copy of ``LyapunovPolicy.bind_system`` before the run context (the oracle)."""
    policy.model_dim = int(system.dim)
    wireless = system.config.wireless
    if wireless is not None:
        policy.bandwidth_hz = float(wireless.bandwidth_hz)
        policy.noise_psd_dbm_hz = float(wireless.noise_psd_dbm_hz)
        policy.tx_power_dbm = float(wireless.tx_power_dbm)
        policy.downlink_power_dbm = (
            float(wireless.bs_tx_power_dbm) if wireless.downlink_latency else None
        )
        policy.cycles_per_sample = float(wireless.cpu_cycles_per_sample)
        policy.cpu_freq_hz = float(wireless.cpu_frequency_hz)
        policy.effective_capacitance = float(wireless.effective_capacitance)
    algo = system.config.algorithm
    if algo.local_steps:
        policy.compute_samples = float(algo.local_steps * algo.batch_size)
    beta = system.uplink.participation_target()
    if beta is not None:
        policy.beta_param = np.asarray(beta, np.float64)


@pytest.mark.parametrize("downlink", [True, False])
def test_context_gives_the_actions_bind_system_gave(downlink):
    # Arrange: a duck-typed Engine with non-default constants everywhere
    from types import SimpleNamespace

    from rayfl.observation import (
        LinkConstants,
        PrivacyConstants,
        SystemContext,
        TrainingConstants,
    )
    from rayfl.wireless.config import WirelessConfig

    n, k = 10, 3
    wireless = WirelessConfig(
        num_subchannels=k,
        bandwidth_hz=1e6,
        noise_psd_dbm_hz=-170.0,
        tx_power_dbm=20.0,
        bs_tx_power_dbm=40.0,
        downlink_latency=downlink,
        cpu_cycles_per_sample=1e4,
        cpu_frequency_hz=2e9,
        effective_capacitance=1e-27,
    )
    beta = np.linspace(0.2, 0.5, n)
    system = SimpleNamespace(
        dim=7_850,
        config=SimpleNamespace(
            seed=0,
            rounds=20,
            wireless=wireless,
            algorithm=SimpleNamespace(local_steps=5, batch_size=32),
        ),
        uplink=SimpleNamespace(participation_target=lambda: beta),
    )
    context = SystemContext(
        topology="star",
        seed=0,
        rounds=20,
        model_dim=7_850,
        link=LinkConstants(
            bandwidth_hz=1e6,
            noise_psd_dbm_hz=-170.0,
            tx_power_dbm=20.0,
            bs_tx_power_dbm=40.0,
            downlink_latency=downlink,
            cpu_cycles_per_sample=1e4,
            cpu_frequency_hz=2e9,
            effective_capacitance=1e-27,
        ),
        privacy=PrivacyConstants(participation_target=tuple(beta)),
        training=TrainingConstants(local_steps=5, batch_size=32),
    )
    spaces_ = controls_spaces(n, k)
    oracle = make_policy("lyapunov", spaces_)
    _old_bind_system(oracle, system)
    given = make_policy("lyapunov", spaces_, context=context)
    policies = (oracle, given)
    for policy in policies:
        policy.reset(seed=4)
    rng = np.random.default_rng(5)
    # Act / Assert: same decisions, round after round (queues included)
    for _ in range(20):
        obs = sample_observation(spaces_[0], rng)
        actions = [policy(obs) for policy in policies]
        for action in actions[1:]:
            for part in ("assignment", "power", "controls"):
                np.testing.assert_array_equal(action[part], actions[0][part])
    assert given.model_dim == 7_850 and given.compute_samples == 160.0
    assert given.downlink_power_dbm == (40.0 if downlink else None)


def test_explicit_parameters_win_over_the_context():
    from rayfl.observation import LinkConstants, SystemContext

    context = SystemContext(
        topology="star",
        seed=0,
        rounds=5,
        model_dim=500,
        link=LinkConstants(bandwidth_hz=1e6, noise_psd_dbm_hz=-170, tx_power_dbm=20),
    )
    spaces_ = controls_spaces(4, 2)
    policy = make_policy(
        "lyapunov", spaces_, context=context, model_dim=900, bandwidth_hz=2e4
    )
    assert (policy.model_dim, policy.bandwidth_hz) == (900, 2e4)
    assert policy.tx_power_dbm == 20.0  # left at its default: from the context
    default = make_policy("lyapunov", spaces_)
    assert (default.model_dim, default.tx_power_dbm) == (1_663_370, 30.0)
    # a value passed equal to the default is still the user's, not the run's
    same = make_policy("lyapunov", spaces_, context=context, tx_power_dbm=30.0)
    assert same.tx_power_dbm == 30.0


def test_without_controls_the_sparsity_is_pinned_at_the_runs():
    """No ``controls`` part: s cannot be sent, so the problem is the one at the
    run's sparsity (payload z·s0, penalty V·p̂·s0), solved with s fixed."""
    from rayfl.observation import SystemContext, TrainingConstants

    # Arrange: the same clients, one policy that sends s and one that cannot
    observation_space, with_controls = controls_spaces(6, 2)
    plain = make_spaces(6, 2, 4)[1]
    context = SystemContext(
        topology="star",
        seed=0,
        rounds=5,
        model_dim=20_000,
        training=TrainingConstants(sparsity=0.3),
    )
    free = make_policy("lyapunov", (observation_space, with_controls), context=context)
    pinned = make_policy("lyapunov", (observation_space, plain), context=context)
    assert pinned.fixed_sparsity == 0.3 and not pinned.sends_sparsity
    rng = np.random.default_rng(4)
    for _ in range(5):
        obs = sample_observation(observation_space, rng)
        obs["eligible"][:] = 1.0
        # Act
        (p_free, ids_free), (p_pin, ids_pin) = free.problem(obs), pinned.problem(obs)
        # Assert
        np.testing.assert_array_equal(ids_free, ids_pin)
        np.testing.assert_allclose(p_pin.bits_per_kept, 0.3 * p_free.bits_per_kept)
        np.testing.assert_allclose(p_pin.sparsity_weight, 0.3 * p_free.sparsity_weight)
        assert p_pin.min_sparsity == 1.0 and p_free.min_sparsity == free.min_sparsity
        action = pinned(obs)
        assert scheduled(action)[scheduled(action) < 6].size == 2
        assert np.all(pinned._solution.sparsity == 1.0)  # = s0 of every upload
    # a value the user passes is kept over the run's
    given = make_policy(
        "lyapunov", (observation_space, plain), context=context, fixed_sparsity=0.8
    )
    assert given.fixed_sparsity == 0.8


def test_queues_resume_through_a_checkpoint_file(tmp_path):
    # The engine saves a policy's plain attributes (rayfl.rundir.checkpoint); its
    # solver dataclasses are policies' own and are rebuilt, not saved.
    from rayfl.rundir.checkpoint import (
        load_checkpoint,
        plain_attributes,
        restore_attributes,
        save_checkpoint,
    )

    observation_space, action_space = controls_spaces(8, 3)

    def build():
        policy = make_policy(
            "lyapunov", (observation_space, action_space), model_dim=20_000
        )
        policy.reset(seed=0)
        return policy

    rng = np.random.default_rng(2)
    observations = [sample_observation(observation_space, rng) for _ in range(8)]
    for obs in observations:
        obs["eligible"][:] = (rng.random(8) < 0.7).astype(np.float32)
    straight = build()
    for obs in observations[:4]:
        straight(obs)
    saved = plain_attributes(straight)
    assert "_solution" not in saved  # this round's, rebuilt at the next decision
    save_checkpoint(tmp_path, {"next_round": 4, "policy": saved})
    resumed = build()
    restore_attributes(resumed, load_checkpoint(tmp_path)["policy"])
    fresh = build()
    for obs in observations[4:]:
        a, b = straight(obs), resumed(obs)
        fresh(obs)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    np.testing.assert_array_equal(
        straight.fairness_queue_values, resumed.fairness_queue_values
    )
    assert straight.delay_queue_value == resumed.delay_queue_value
    # the saved queues matter: a policy started afresh is elsewhere
    assert not np.array_equal(
        straight.fairness_queue_values, fresh.fairness_queue_values
    )


def test_controls_go_to_the_sparsity_column_or_not_at_all():
    """With the run's control names: s goes to the 'sparsity' column; FedAvg's lr is left alone."""
    from rayfl.star.context import StarContext

    observation_space, action_space = make_spaces(6, 2, 4)
    parts = dict(action_space.spaces)
    parts["controls"] = spaces.Box(0.0, 1.0, (6, 2), np.float32)
    action_space = spaces.Dict(parts)
    obs = sample_observation(observation_space, np.random.default_rng(0))
    obs["eligible"][:] = 1.0
    common = {"model_dim": 1_663_370, "d_avg_s": 1.0}
    lr_only = make_policy(
        "lyapunov",
        (observation_space, action_space),
        context=StarContext(
            topology="star",
            seed=0,
            rounds=5,
            model_dim=1_663_370,
            control_names=("lr",),
        ),
        **common,
    )
    lr_only.reset(seed=0)
    assert not lr_only.sends_sparsity and "controls" not in lr_only(obs)
    second = make_policy(
        "lyapunov",
        (observation_space, action_space),
        context=StarContext(
            topology="star",
            seed=0,
            rounds=5,
            model_dim=1_663_370,
            control_names=("lr", "sparsity"),
        ),
        **common,
    )
    second.reset(seed=0)
    second.delay_queue_value = 50.0  # a delay backlog: it sparsifies
    table = second(obs)["controls"]
    assert second.control_index == 1 and second.sends_sparsity
    assert (table[:, 0] == 1.0).all() and (table[:, 1] < 1.0).any()
