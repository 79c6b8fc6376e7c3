"""D2DNeighbor-v0 (envs.d2d): API checks, channel_threshold = the t = 0 selection,
invalid actions, determinism, and the surrogate against closed forms (no Ray)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401  (registers the env ids)
from envs.d2d import D2DNeighborEnv, make_selection_policies, policy_action
from envs.d2d.rl import BinaryNeighbors
from envs.d2d.surrogate import D2DSurrogateDynamics
from rayfl.d2d.selection import make_layout, select_neighbors, selection_observation
from rayfl.data.federated import build_federated
from tests.configs import TINY_D2D

# TINY_D2D's data, model and topology with the default algorithm and resources
SMALL = {
    "seed": 4,
    "rounds": 4,
    **{k: TINY_D2D[k] for k in ("data", "model", "topology", "output")},
}


@pytest.fixture(scope="module")
def data():
    from rayfl.config import load_config

    cfg = load_config(SMALL)
    return build_federated(cfg.data, seed=cfg.seed)


def small_env(data, *overrides, **kwargs):
    return D2DNeighborEnv(SMALL, overrides=list(overrides), data=data, **kwargs)


def test_check_env_raw_all_targets_and_flattened(data):
    check_env(small_env(data), skip_render_check=True)
    check_env(small_env(data, "topology.target=all"), skip_render_check=True)
    flat = gym.wrappers.FlattenObservation(
        BinaryNeighbors(small_env(data, "topology.target=all"))
    )
    check_env(flat, skip_render_check=True)
    assert isinstance(flat.observation_space, gym.spaces.Box)
    assert flat.action_space == gym.spaces.MultiBinary((6, 6))


def test_registered_id_builds_the_default_11_node_env():
    env = gym.make("D2DNeighbor-v0")
    obs, info = env.reset(seed=0)
    assert obs["channel_gain"].shape == (11, 14)
    assert env.action_space == gym.spaces.MultiDiscrete([12] * 14)
    assert len(info["targets"]) == 1
    env.close()


@pytest.mark.parametrize("wrapped", [False, True], ids=["multidiscrete", "binary"])
def test_random_agent_rollout_runs_to_truncation(data, wrapped):
    env = small_env(data, neighbor_cost=0.01)
    if wrapped:
        env = BinaryNeighbors(env)
    env.action_space.seed(0)
    obs, _ = env.reset(seed=1)
    steps, truncated = 0, False
    while not truncated:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        steps += 1
        assert np.isfinite(reward) and not terminated
        assert env.observation_space.contains(obs)
        (target,) = info["neighbors"]
        assert target not in info["neighbors"][target]
        assert set(info["delivered"][target]) <= set(info["neighbors"][target])
        pi = obs["em_weight"]
        if info["neighbors"][target]:
            np.testing.assert_allclose(pi.sum(), 1.0, rtol=1e-6)
        assert np.all(pi[obs["selected"] == 0] == 0)
    assert steps == 4 and obs["round"][0] == 4


@pytest.mark.parametrize("target", ["random", "all"])
def test_channel_threshold_action_is_the_t0_selection(data, target):
    env = small_env(data, f"topology.target={target}")
    counts = []
    for seed in range(4):
        # Arrange: what rayfl.d2d.selection selects for this layout and seed
        topo = env.topology
        expected = {
            s.target: (s.neighbors, s.subchannel)
            for s in select_neighbors(make_layout(topo, 6, seed=seed), topo, seed=seed)
        }
        # Act
        obs, _ = env.reset(seed=seed)
        action = policy_action(env, make_selection_policies(env), obs)
        selected, ignored = env.decode(action)
        # Assert
        assert selected == expected and ignored == []
        counts += [len(nb) for nb, _ in expected.values()]
    assert max(counts) >= 2, "the test needs non-trivial selections"


def test_round0_observation_is_the_ccm_observation(data):
    env = small_env(data)
    obs, _ = env.reset(seed=2)
    layout = make_layout(env.topology, 6, seed=2)
    ccm, error = selection_observation(layout, env.targets[0], env.topology, seed=2)
    for key, value in ccm.items():
        np.testing.assert_array_equal(obs[key], value)
    np.testing.assert_allclose(obs["error_probability"], error, rtol=1e-6)
    next_obs = env.step(np.full(14, 6))[0]
    assert not np.array_equal(next_obs["channel_gain"], obs["channel_gain"])
    np.testing.assert_array_equal(
        next_obs["error_probability"], obs["error_probability"]
    )


def test_invalid_actions_raise_or_are_repaired(data):
    strict = small_env(data, invalid_action="raise")
    strict.reset(seed=0)
    target = strict.targets[0]
    other = (target + 1) % 6
    idle = np.full(14, 6)
    with pytest.raises(ValueError, match="target itself"):
        strict.step(np.r_[target, idle[1:]])
    with pytest.raises(ValueError, match="already on sub-channel 0"):
        strict.step(np.r_[other, other, idle[2:]])
    for bad, match in [
        (np.r_[7, idle[1:]], "in 0..6"),
        (np.r_[-1, idle[1:]], "in 0..6"),
        (idle[:5], "shape"),
        (idle.astype(float), "integers"),
    ]:
        with pytest.raises(ValueError, match=match):
            strict.step(bad)
    repair = small_env(data)
    repair.reset(seed=0)
    info = repair.step(np.r_[target, other, other, idle[3:]])[4]
    assert info["neighbors"] == {target: [other]}
    assert info["subchannel"] == {target: [1]}
    assert info["ignored"] == [(target, 0, target), (target, 2, other)]


def test_same_seed_same_observations_and_rewards(data):
    def rollout(seed):
        env = small_env(data, "topology.link_model=bernoulli")
        policies = None
        obs, _ = env.reset(seed=seed)
        out = [obs]
        rewards = []
        policies = make_selection_policies(env, "random_neighbors")
        for _ in range(3):
            obs, reward, *_ = env.step(policy_action(env, policies, obs))
            out.append(obs)
            rewards.append(reward)
        return out, rewards

    a, ra = rollout(5)
    b, rb = rollout(5)
    c, _ = rollout(6)
    for x, y in zip(a, b, strict=True):
        for key in x:
            np.testing.assert_array_equal(x[key], y[key])
    assert ra == rb
    assert not np.array_equal(a[0]["distance_m"], c[0]["distance_m"])


def test_bad_arguments_are_named(data):
    with pytest.raises(ValueError, match="mode"):
        small_env(data, mode="fast")
    with pytest.raises(ValueError, match="reward=accuracy_gain needs mode=emulate"):
        small_env(data, reward="accuracy_gain")
    with pytest.raises(ValueError, match="invalid_action"):
        small_env(data, invalid_action="ignore")
    with pytest.raises(ValueError, match="neighbor_cost"):
        small_env(data, neighbor_cost=-1.0)
    with pytest.raises(ValueError, match="topology.kind=d2d"):
        D2DNeighborEnv({**SMALL, "topology": {"kind": "flat"}}, data=data)
    with pytest.raises(RuntimeError, match="reset"):
        small_env(data).step(np.full(14, 6))


def test_neighbor_cost_is_charged_per_selected_neighbor(data):
    free, paid = small_env(data), small_env(data, neighbor_cost=0.5)
    obs, _ = free.reset(seed=0)
    paid.reset(seed=0)
    action = policy_action(free, make_selection_policies(free, "random_neighbors"), obs)
    (target,) = free.targets
    r_free, info = free.step(action)[1:5:3]
    r_paid = paid.step(action)[1]
    assert r_free - r_paid == pytest.approx(0.5 * len(info["neighbors"][target]))


# --------------------------------------------------------------- surrogate oracles
def test_surrogate_em_recovers_known_label_mixture():
    # Arrange: the target's labels are 0.3·q1 + 0.7·q2 (overlapping supports).
    q1 = np.array([0.5, 0.4, 0.1, 0.0])
    q2 = np.array([0.0, 0.2, 0.4, 0.4])
    q3 = np.array([0.25, 0.25, 0.25, 0.25])
    labels = np.stack([0.3 * q1 + 0.7 * q2, q1, q2, q3])
    dyn = D2DSurrogateDynamics(labels, np.full(4, 100.0), target=0, alpha=0.5)
    dyn.set_neighbors((1, 2))
    # Act: one E/M step per round, every model arrives.
    for _ in range(300):
        dyn.step([1, 2])
    # Assert (maximum likelihood = the true weights, Gibbs' inequality)
    np.testing.assert_allclose(dyn.pi, [0.3, 0.7], atol=2e-3)


def test_surrogate_alpha_one_is_local_training_in_closed_form():
    labels = np.array([[0.7, 0.3], [0.1, 0.9], [0.5, 0.5]])
    sizes = np.array([50.0, 200.0, 80.0])
    dyn = D2DSurrogateDynamics(labels, sizes, target=0, alpha=1.0)
    dyn.set_neighbors((1, 2))
    eta = 0.5 * 50 / (50 + sizes.mean())
    for t in range(1, 6):
        loss = dyn.step([1, 2])
        prediction = labels[0] + (1 - eta) ** t * (np.full(2, 0.5) - labels[0])
        assert loss == pytest.approx(-(labels[0] * np.log(prediction)).sum(), rel=1e-12)


def test_surrogate_rewards_similar_neighbors_over_dissimilar_ones():
    labels = np.array([[0.9, 0.1], [0.85, 0.15], [0.05, 0.95]])
    sizes = np.full(3, 100.0)
    losses = {}
    for neighbors in [(1,), (2,)]:
        dyn = D2DSurrogateDynamics(labels, sizes, target=0, alpha=0.5)
        dyn.set_neighbors(neighbors)
        for _ in range(10):
            losses[neighbors] = dyn.step(list(neighbors))
    assert losses[(1,)] < losses[(2,)]


def test_the_surrogate_backend_draws_links_without_the_env(data):
    """The backend's P^err is its own (the CCM draw the env observes), so it
    steps lossy links right after ``restart``; before, the env had to set
    ``backend.error`` or ``run`` raised a KeyError."""
    from envs.d2d.surrogate import D2DSurrogateBackend
    from rayfl.config import load_config

    cfg = load_config(SMALL, ["topology.link_model=bernoulli"])
    backend = D2DSurrogateBackend(cfg, data)
    layout = backend.restart(5)
    (target,) = layout.targets
    _, error = selection_observation(layout, target, cfg.topology, seed=5)
    np.testing.assert_array_equal(backend.error[target], error)
    neighbors = tuple(m for m in range(6) if m != target)[:3]
    out = backend.run(0, {target: (neighbors, (0, 1, 2))})
    assert set(out.delivered[target]) <= set(neighbors)


def test_moving_nodes_compute_each_rounds_error_probabilities_once(data, monkeypatch):
    # Arrange: count P^err computations of moving rounds, by layout and target
    import rayfl.d2d.layout as layout_module

    computed = []
    batched = layout_module.error_probabilities_batched

    def counting(gain, target, **kwargs):
        computed.append((np.asarray(gain).tobytes(), target))
        return batched(gain, target, **kwargs)

    monkeypatch.setattr(layout_module, "error_probabilities_batched", counting)
    env = small_env(
        data,
        "topology.link_model=bernoulli",
        "topology.mobility=random_waypoint",
        "topology.round_duration_s=5",
        "topology.mobility_speed_min_mps=1",
        "topology.mobility_speed_max_mps=3",
        mode="surrogate",
    )
    obs, _ = env.reset(seed=2)
    policies = make_selection_policies(env, "random_neighbors")
    # Act: rounds 1..3 are both observed and drawn
    for _ in range(4):
        obs, *_ = env.step(policy_action(env, policies, obs))
    # Assert: the observation and the link draws share one computation
    assert len(computed) >= 3
    assert len(computed) == len(set(computed))


def test_an_away_node_is_ineligible_and_a_choice_of_it_is_repaired(data):
    # Arrange: nodes come and go (rayfl.d2d.devices)
    away = [
        "topology.availability=markov",
        "topology.mean_on_rounds=2",
        "topology.mean_off_rounds=2",
    ]
    env = small_env(data, *away)
    obs, _ = env.reset(seed=1)
    target, idle = env.targets[0], np.full(14, 6)
    for _ in range(4):
        gone = [s for s in range(6) if s != target and obs["available"][s] == 0]
        here = [s for s in range(6) if s != target and obs["available"][s] == 1]
        if gone and here:
            break
        obs = env.step(idle)[0]
    assert gone and here, "the test needs a node away and one up in some round"
    np.testing.assert_array_equal(obs["eligible"][gone], 0)
    rounds_before = env.round
    # Act
    info = env.step(np.r_[gone[0], here[0], idle[2:]])[4]
    # Assert
    assert info["neighbors"] == {target: [here[0]]}
    assert info["ignored"] == [(target, 0, gone[0])]
    strict = small_env(data, *away, invalid_action="raise")
    strict.reset(seed=1)
    for _ in range(rounds_before):
        strict.step(idle)
    with pytest.raises(ValueError, match="away this round"):
        strict.step(np.r_[gone[0], idle[1:]])


def test_the_flat_id_exposes_the_devices_features_bounded():
    """D2DNeighbor-Flat-v0 on d2d-small-mobile: 12 + available + compute_z per node."""
    from rayfl.d2d.scenarios import scenarios

    env = gym.make("D2DNeighbor-Flat-v0", config=scenarios()["d2d-small-mobile"][1])
    obs, _ = env.reset(seed=1)
    rows = obs.reshape(11, 14)
    assert env.observation_space.shape == (11 * 14,)
    assert env.observation_space.contains(obs)
    base = env.unwrapped.base  # D2DNeighbor-v0 under the wrappers
    assert env.unwrapped.inner.feature_names[12:] == ("available", "compute_z")
    up = base.backend.motion.devices.available(0)
    target = base.targets[0]
    up[target] = True
    np.testing.assert_array_equal(rows[:, 12], up.astype(np.float32))
    assert rows[:, 13].std() > 0  # compute_z: the nodes' speeds differ
