"""Learned per-client controls: one decoding for training and for a run.

A network with 1 + C outputs per client scores it and sets its C controls. The
RL env's decoding (``envs.rl.HungarianTopK``, what PPO trains through) and the
``learned`` policy (what ``rayfl run`` executes) must turn the same outputs
into the same action, and the values must land on the algorithm's ranges.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from envs.rl import HungarianTopK, make_rl_env
from envs.star.scheduling import WirelessFLEnv
from policies.features import NUM_FEATURES, client_features
from policies.learned import LearnedPolicy, controls_from_unit, select_top_k
from rayfl.config import ConfigError, load_config
from tests.configs import WPFL_ALGORITHM, WPFL_PRIVACY

DITTO = {
    "seed": 0,
    "rounds": 3,
    "data": {
        "dataset": "digits",
        "num_clients": 6,
        "partition": "dirichlet",
        "alpha": 1.0,
        "min_partition_size": 20,
    },
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": {"kind": "ditto", "local_steps": 2, "batch_size": 16, "lr": 0.1},
    "wireless": {"num_subchannels": 2},
    "output": {"progress": False, "plots": False},
}
#: Ditto's controls and their ranges (rayfl/algorithms/ditto.py).
RANGES = {"lr": (0.0, 1.0), "personal_lr": (0.0, 1.0), "lam": (0.0, 2.0)}
#: DITTO's configured controls: lr 0.1, personal_lr = lr, λ's default 0.1
#: (rayfl/algorithms/config.py), as float32 (the env's table).
CONFIGURED = [float(np.float32(0.1))] * 3


@pytest.fixture
def checkpoint(tmp_path):
    """A random 1 + 3 output network, exported as train-policy writes it."""
    rng = np.random.default_rng(0)
    arrays = {
        "pi_w0": rng.normal(size=(NUM_FEATURES, 8)).astype(np.float32),
        "pi_b0": rng.normal(size=8).astype(np.float32),
        "pi_w_out": rng.normal(size=(8, 4)).astype(np.float32),
        "pi_b_out": rng.normal(size=4).astype(np.float32),
        "log_std": np.zeros(1, np.float32),
    }
    np.savez(tmp_path / "policy.npz", **arrays)
    meta = {
        "format": "rayfl-score-mlp",
        "version": 1,
        "controls": list(RANGES),
        "control_centers": CONFIGURED,
    }
    (tmp_path / "policy.json").write_text(json.dumps(meta))
    return tmp_path, arrays


def _decoded(out, center):
    """Outputs → controls written out: [−1, 0, 1] onto [low, center, high]."""
    u = np.clip(out, -1, 1)
    low, high = (np.array([r[i] for r in RANGES.values()]) for i in (0, 1))
    return np.where(u < 0, center + u * (center - low), center + u * (high - center))


def _outputs(arrays, obs):
    """The network written out by hand: tanh layer, linear head."""
    h = np.tanh(client_features(obs) @ arrays["pi_w0"] + arrays["pi_b0"])
    return h @ arrays["pi_w_out"] + arrays["pi_b_out"]


def test_controls_map_the_unit_interval_onto_each_range():
    low, high = np.array([0.0, 0.0, 0.0]), np.array([1.0, 1.0, 2.0])
    values = controls_from_unit([[-1.0, 0.0, 1.0], [-5.0, 0.5, 0.2]], low, high)
    np.testing.assert_allclose(values, [[0.0, 0.5, 2.0], [0.0, 0.75, 1.2]], atol=1e-7)
    # around a configured value c: 0 ↦ c, ±1 ↦ the range's ends, linear between
    centered = controls_from_unit(
        [[-1.0, 0.0, 1.0], [-0.5, 0.5, 0.25]], low, high, center=[0.2, 0.1, 0.5]
    )
    expected = [[0.0, 0.1, 2.0], [0.1, 0.55, 0.875]]
    np.testing.assert_allclose(centered, expected, atol=1e-7)


def test_training_decoding_and_the_run_policy_agree(checkpoint):
    path, arrays = checkpoint
    rl_env = make_rl_env(DITTO, mode="surrogate", controls=True)
    decoder = rl_env
    while not isinstance(decoder, HungarianTopK):
        decoder = decoder.env
    base = rl_env.unwrapped
    assert base.control_names == tuple(RANGES)
    assert rl_env.action_space.shape == (6 * 4,)
    policy = LearnedPolicy(base.observation_space, base.action_space, checkpoint=path)
    rl_env.reset(seed=1)
    for _ in range(2):
        obs = decoder.last_obs
        out = _outputs(arrays, obs)
        trained = decoder.action(out.reshape(-1))  # client-major: score, controls
        ran = policy(obs)
        np.testing.assert_array_equal(trained["assignment"], ran["assignment"])
        np.testing.assert_allclose(trained["controls"], ran["controls"], atol=1e-6)
        # the controls are the outputs mapped onto Ditto's ranges around the
        # configured values
        expected = _decoded(out[:, 1:], np.array(CONFIGURED))
        np.testing.assert_allclose(ran["controls"], expected, rtol=1e-5, atol=1e-6)
        chosen = select_top_k(out[:, 0], obs["eligible"] > 0.5, 2)
        assert sorted(ran["assignment"][ran["assignment"] < 6]) == sorted(chosen)
        rl_env.step(out.reshape(-1))


def test_an_untrained_network_sets_the_configured_controls(checkpoint, tmp_path):
    # zero control outputs: training and the run both apply DITTO's 0.1s;
    # a checkpoint without centers (written before them) decodes around the
    # middle of each range, as it was trained
    path, arrays = checkpoint
    zeroed = {**arrays, "pi_w_out": arrays["pi_w_out"].copy()}
    zeroed["pi_w_out"][:, 1:] = 0.0
    zeroed["pi_b_out"] = np.concatenate([arrays["pi_b_out"][:1], np.zeros(3)])
    np.savez(path / "policy.npz", **zeroed)
    rl_env = make_rl_env(DITTO, mode="surrogate", controls=True)
    base = rl_env.unwrapped
    rl_env.reset(seed=0)
    decoder = rl_env
    while not isinstance(decoder, HungarianTopK):
        decoder = decoder.env
    out = _outputs(zeroed, decoder.last_obs)
    trained = decoder.action(out.reshape(-1))
    policy = LearnedPolicy(base.observation_space, base.action_space, checkpoint=path)
    ran = policy(decoder.last_obs)
    for controls in (trained["controls"], ran["controls"]):
        np.testing.assert_allclose(controls, np.full((6, 3), 0.1), rtol=1e-6)
    meta = json.loads((path / "policy.json").read_text())
    del meta["control_centers"]
    (path / "policy.json").write_text(json.dumps(meta))
    old = LearnedPolicy(base.observation_space, base.action_space, checkpoint=path)
    middle = np.tile([0.5, 0.5, 1.0], (6, 1))
    np.testing.assert_allclose(old(decoder.last_obs)["controls"], middle, rtol=1e-6)


def test_a_policy_without_controls_leaves_them_to_the_config():
    env = WirelessFLEnv(DITTO, mode="surrogate", controls=True)
    policy = LearnedPolicy(env.observation_space, env.action_space)  # shipped: 1 output
    obs, _ = env.reset(seed=0)
    assert "controls" not in policy(obs)


def test_schedule_only_keeps_the_schedule_and_leaves_the_controls_to_the_config(
    checkpoint,
):
    from rayfl.train_policy.evaluate import ScheduleOnly

    path, _ = checkpoint
    env = WirelessFLEnv(DITTO, mode="surrogate", controls=True)
    policy = LearnedPolicy(env.observation_space, env.action_space, checkpoint=path)
    wrapped = ScheduleOnly(policy)
    obs, _ = env.reset(seed=0)
    full, bare = policy(obs), wrapped(obs)
    assert "controls" in full and "controls" not in bare
    np.testing.assert_array_equal(bare["assignment"], full["assignment"])
    env.step(bare)  # the env applies the configured controls


def test_a_control_count_mismatch_is_refused(checkpoint):
    path, _ = checkpoint
    fedavg = {**DITTO, "algorithm": {**DITTO["algorithm"], "kind": "fedavg"}}
    env = WirelessFLEnv(fedavg, mode="surrogate", controls=True)  # lr only
    with pytest.raises(ValueError, match=r"sets 3 per-client controls .* exposes 1"):
        LearnedPolicy(env.observation_space, env.action_space, checkpoint=path)


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"rl": {"controls": True}}, "rl.controls needs rl.mode=emulate"),
        (
            {"rl": {"controls": True, "mode": "emulate"}, "wireless": None},
            "rl.controls learns the star's per-client controls",
        ),
    ],
)
def test_rl_controls_is_checked_in_one_line(update, message):
    config = {**DITTO, **update}
    if config.get("wireless") is None:
        config.pop("wireless")
    with pytest.raises(ConfigError) as error:
        load_config(config)
    assert any(message in line for line in str(error.value).splitlines()), str(
        error.value
    )
    assert load_config(
        {**DITTO, "rl": {"controls": True, "mode": "emulate"}}
    ).rl.controls


@pytest.mark.slow
def test_train_policy_learns_controls_that_reach_the_clients(ray_session, tmp_path):
    from rayfl.train_policy import rllib_available

    if not rllib_available():
        pytest.skip("RLlib not installed")
    from tests.rl.tiny_training import assert_trained, train_tiny

    # Arrange: two PPO iterations on the real engine, controls learned
    config = {
        **DITTO,
        "rl": {
            "mode": "emulate",
            "controls": True,
            "train_batch_size": 8,
            "minibatch_size": 8,
            "baselines": ["random"],
        },
    }
    run_dir = train_tiny(config, tmp_path / "train")
    meta = json.loads((run_dir / "policy" / "policy.json").read_text())
    assert meta["controls"] == list(RANGES)
    assert meta["control_centers"] == CONFIGURED
    arrays = np.load(run_dir / "policy" / "policy.npz")
    assert arrays["pi_w_out"].shape[1] == 4
    assert_trained(run_dir, config, num_clients=6, num_subchannels=2, mode="emulate")
    # the same policy with and without its controls: same schedule (the scores
    # do not depend on the controls), other learning rates, other train losses
    _run_with_and_without_controls(DITTO, run_dir, tmp_path)


def _run_with_and_without_controls(
    config: dict, run_dir: Any, tmp_path: Any
) -> dict[bool, Any]:
    """Run the learned policy with and without its controls; check they reached the clients."""
    import rayfl

    runs = {
        controls: rayfl.run(
            config,
            [
                "scheduler.policy=learned",
                f"scheduler.params.checkpoint={run_dir}",
                f"scheduler.controls={str(controls).lower()}",
                f"output.dir={tmp_path / str(controls)}",
            ],
        )
        for controls in (True, False)
    }
    with_c, without = (runs[c].metrics for c in (True, False))
    cols = ["round", "client", "scheduled"]
    assert with_c[cols].equals(without[cols])
    assert not np.allclose(
        with_c["train_loss"].to_numpy(float),
        without["train_loss"].to_numpy(float),
        equal_nan=True,
    )
    return runs


#: A tiny WPFL (seed 000): Ditto PL, Theorem-1 DP, quantized uploads, T0 = 2.
WPFL = {
    **DITTO,
    "rounds": 12,  # a guard: the T0 rule ends the run at N·T0/K = 6 rounds
    "algorithm": WPFL_ALGORITHM,
    "privacy": WPFL_PRIVACY,
    "compression": {"quantize_bits": 16},
}


@pytest.mark.slow
def test_a_policy_trains_on_wpfl_with_the_t0_cap_and_controls(ray_session, tmp_path):
    """PPO on the real WPFL engine (T0 cap, per-client η_F, η_P, λ); the result runs."""
    from rayfl.train_policy import rllib_available

    if not rllib_available():
        pytest.skip("RLlib not installed")
    from tests.rl.tiny_training import assert_trained, train_tiny

    rl = {
        "mode": "emulate",
        "controls": True,
        "train_batch_size": 8,
        "minibatch_size": 8,
        "baselines": ["round_robin"],
    }
    run_dir = train_tiny({**WPFL, "rl": rl}, tmp_path / "train")
    assert_trained(
        run_dir, {**WPFL, "rl": rl}, num_clients=6, num_subchannels=2, mode="emulate"
    )
    meta = json.loads((run_dir / "policy" / "policy.json").read_text())
    assert meta["controls"] == list(RANGES)  # WPFL's controls are Ditto's
    # with and without its controls, as `rayfl run` runs it: the controls
    # reach the clients, and the T0 cap binds (T0 uploads each, then the end)
    runs = _run_with_and_without_controls(WPFL, run_dir, tmp_path)
    for result in runs.values():
        summary = json.loads((result.run_dir / "summary.json").read_text())
        assert summary["privacy"]["uploads_per_client"] == [2] * 6
        assert len(result.rounds) == 6
