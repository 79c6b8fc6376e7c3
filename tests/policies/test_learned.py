"""Learned policy: numpy score net vs torch, top-K rule, checkpoint loading."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from policies import make_policy
from policies.features import NUM_FEATURES, client_features
from policies.learned import (
    LearnedPolicy,
    ScoreNetwork,
    load_checkpoint,
    resolve_checkpoint,
    select_top_k,
)
from tests.policies.helpers import make_spaces, sample_observation, scheduled


def random_arrays(rng, hidden=(8, 6)):
    sizes = [NUM_FEATURES, *hidden]
    arrays = {}
    for i, (a, b) in enumerate(zip(sizes, sizes[1:], strict=False)):
        arrays[f"pi_w{i}"] = rng.normal(0, 0.5, (a, b)).astype(np.float32)
        arrays[f"pi_b{i}"] = rng.normal(0, 0.1, b).astype(np.float32)
    arrays["pi_w_out"] = rng.normal(0, 0.5, (sizes[-1], 1)).astype(np.float32)
    arrays["pi_b_out"] = np.zeros(1, np.float32)
    arrays["log_std"] = np.zeros(1, np.float32)
    return arrays


@pytest.fixture
def checkpoint_dir(tmp_path):
    policy_dir = tmp_path / "run" / "policy"
    policy_dir.mkdir(parents=True)
    np.savez(policy_dir / "policy.npz", **random_arrays(np.random.default_rng(0)))
    (policy_dir / "policy.json").write_text(
        json.dumps({"format": "rayfl-score-mlp", "version": 1})
    )
    return tmp_path / "run"


def test_score_network_matches_a_torch_mlp():
    # Arrange: the same weights in an independent torch implementation
    arrays = random_arrays(np.random.default_rng(1))
    layers = []
    for i in range(2):
        linear = torch.nn.Linear(*arrays[f"pi_w{i}"].shape)
        linear.weight.data = torch.tensor(arrays[f"pi_w{i}"].T)
        linear.bias.data = torch.tensor(arrays[f"pi_b{i}"])
        layers += [linear, torch.nn.Tanh()]
    out = torch.nn.Linear(6, 1)
    out.weight.data = torch.tensor(arrays["pi_w_out"].T)
    out.bias.data = torch.tensor(arrays["pi_b_out"])
    reference = torch.nn.Sequential(*layers, out)
    x = np.random.default_rng(2).normal(size=(7, NUM_FEATURES)).astype(np.float32)
    # Act
    scores = ScoreNetwork(arrays)(x)
    # Assert
    expected = reference(torch.tensor(x)).detach().numpy().ravel()
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("scores", "eligible", "k", "expected"),
    [
        ([0.1, 0.9, 0.5, 0.7], [1, 1, 1, 1], 2, [1, 3]),
        ([0.1, 0.9, 0.5, 0.7], [1, 0, 1, 0], 3, [2, 0]),
        ([0.5, 0.5, 0.5], [1, 1, 1], 2, [0, 1]),
        ([np.nan, 0.0, -1.0], [1, 1, 1], 1, [1]),
    ],
    ids=["top2", "ineligible-skipped", "ties-lower-id", "nan-lowest"],
)
def test_select_top_k(scores, eligible, k, expected):
    assert select_top_k(scores, np.array(eligible, bool), k).tolist() == expected


def test_policy_schedules_the_top_scored_clients_on_hungarian_subchannels(
    checkpoint_dir,
):
    # Arrange
    observation_space, action_space = make_spaces(12, 4)
    policy = make_policy(
        "learned", (observation_space, action_space), checkpoint=str(checkpoint_dir)
    )
    rng = np.random.default_rng(3)
    for _ in range(20):
        obs = sample_observation(observation_space, rng)
        # Act
        action = policy(obs)
        # Assert: same clients as the scores' top K among the eligible
        net, _ = load_checkpoint(checkpoint_dir)
        top = select_top_k(net(client_features(obs)), obs["eligible"] > 0.5, 4)
        used = scheduled(action)[scheduled(action) < 12]
        assert sorted(used.tolist()) == sorted(top.tolist())
        assert action_space.contains(action)


def test_policy_is_deterministic(checkpoint_dir):
    observation_space, action_space = make_spaces(10, 3, power_levels=2)
    obs = sample_observation(observation_space, np.random.default_rng(4))
    first = LearnedPolicy(observation_space, action_space, checkpoint=checkpoint_dir)
    second = LearnedPolicy(observation_space, action_space, checkpoint=checkpoint_dir)
    first.reset(seed=0)
    second.reset(seed=99)
    np.testing.assert_array_equal(first(obs)["assignment"], second(obs)["assignment"])


@pytest.mark.parametrize("where", ["run", "policy", "npz"])
def test_checkpoint_accepts_run_dir_policy_dir_or_file(checkpoint_dir, where):
    path = {
        "run": checkpoint_dir,
        "policy": checkpoint_dir / "policy",
        "npz": checkpoint_dir / "policy" / "policy.npz",
    }[where]
    assert resolve_checkpoint(path) == checkpoint_dir / "policy" / "policy.npz"


def test_missing_checkpoint_names_the_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="scheduler.params.checkpoint"):
        LearnedPolicy(*make_spaces(4, 2), checkpoint=tmp_path / "nope")


def test_wrong_format_or_features_is_refused(checkpoint_dir):
    meta = checkpoint_dir / "policy" / "policy.json"
    meta.write_text(json.dumps({"format": "other", "version": 1}))
    with pytest.raises(ValueError, match="format"):
        load_checkpoint(checkpoint_dir)
    meta.write_text(json.dumps({"features": ["a", "b"]}))
    with pytest.raises(ValueError, match="features"):
        load_checkpoint(checkpoint_dir)


def test_broken_layer_chain_is_refused():
    arrays = random_arrays(np.random.default_rng(5))
    arrays["pi_w1"] = arrays["pi_w1"][:3]
    with pytest.raises(ValueError, match="chain"):
        ScoreNetwork(arrays)


@pytest.mark.parametrize(
    ("scores", "k", "expected"),
    [
        ([0.3, -0.2, 0.9, 0.1], 2, [2, 0]),  # more positive than K: the best K
        ([-0.3, -0.2, 0.4, -0.1], 3, [2]),  # fewer: only the positive ones
        ([-0.3, -0.2, -0.4, 0.0], 3, []),  # none positive: nobody
    ],
)
def test_positive_selection_lets_the_scores_pick_how_many(scores, k, expected):
    assert select_top_k(scores, np.ones(4, bool), k, positive=True).tolist() == expected


def test_selection_comes_from_the_checkpoint_or_the_parameter(checkpoint_dir, tmp_path):
    import json
    import shutil

    # Arrange: the same network, recorded as trained with positive selection
    positive_dir = tmp_path / "positive"
    shutil.copytree(checkpoint_dir, positive_dir)
    meta_path = next(positive_dir.rglob("policy.json"))
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "selection": "positive"}))
    observation_space, action_space = make_spaces(12, 4)
    spaces_ = (observation_space, action_space)
    policy = make_policy("learned", spaces_, checkpoint=str(positive_dir))
    forced = make_policy(
        "learned", spaces_, checkpoint=str(checkpoint_dir), selection="positive"
    )
    top_k = make_policy("learned", spaces_, checkpoint=str(checkpoint_dir))
    assert (policy.selection, forced.selection, top_k.selection) == (
        "positive",
        "positive",
        "top_k",
    )
    rng = np.random.default_rng(5)
    net, _ = load_checkpoint(checkpoint_dir)
    sizes = set()
    for _ in range(30):
        obs = sample_observation(observation_space, rng)
        scores = net(client_features(obs))
        want = select_top_k(scores, obs["eligible"] > 0.5, 4, positive=True)
        for p in (policy, forced):
            used = scheduled(p(obs))[scheduled(p(obs)) < 12]
            assert sorted(used.tolist()) == sorted(want.tolist())
        sizes.add(len(want))
    assert len(sizes) > 1  # the number scheduled varies with the scores
    with pytest.raises(ValueError, match="selection must be top_k or positive"):
        make_policy("learned", spaces_, checkpoint=str(checkpoint_dir), selection="x")
