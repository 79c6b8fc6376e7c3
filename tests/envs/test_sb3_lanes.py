"""Stable-Baselines3 on the emulation's lanes, through ``envs.sb3.SB3Lanes`` (issue 47).

The adapter is checked twice:

- against SB3's own ``DummyVecEnv`` over separate copies of one counting env:
  fake lanes with ``NEXT_STEP`` autoreset that end together give SB3 the same
  observations, rewards, dones and terminal observations; lanes that end out
  of step give the documented extra autoreset transition;
- on the real thing: PPO trains for a few thousand steps on 4 emulate lanes of
  ``WirelessFL-v0``'s default star (one set of client actors).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv

sb3 = pytest.importorskip("stable_baselines3")

from envs.sb3 import SB3Lanes, sb3_lanes  # noqa: E402

OBS = spaces.Box(-np.inf, np.inf, (2,), np.float32)
ACT = spaces.Box(-1.0, 1.0, (1,), np.float32)


class Counter(gym.Env):
    """obs = (t, seed); reward = t + action; ends after ``length`` steps."""

    observation_space, action_space = OBS, ACT

    def __init__(self, length: int = 3, terminate: bool = False) -> None:
        self.length, self.terminate = length, terminate

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t, self.s = 0, 0 if seed is None else seed
        return np.array([self.t, self.s], np.float32), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        end = self.t >= self.length
        obs = np.array([self.t, self.s], np.float32)
        reward = float(self.t + np.asarray(action).ravel()[0])
        return obs, reward, end and self.terminate, end and not self.terminate, {}


class CounterLanes(VectorEnv):
    """E counters in lockstep with ``NEXT_STEP`` autoreset (as rayfl's lanes)."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, lengths: list[int], terminate: bool = False) -> None:
        self.envs = [Counter(n, terminate) for n in lengths]
        self.num_envs = len(lengths)
        self.single_observation_space, self.single_action_space = OBS, ACT
        self.observation_space = spaces.Box(-np.inf, np.inf, (self.num_envs, 2))
        self.action_space = spaces.Box(-1.0, 1.0, (self.num_envs, 1))
        self.ended = np.zeros(self.num_envs, bool)
        self.steps = 0

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        seeds = [None] * self.num_envs if seed is None else seed
        obs = [env.reset(seed=s)[0] for env, s in zip(self.envs, seeds, strict=True)]
        self.ended[:] = False
        return np.stack(obs), {}

    def step(self, actions: Any) -> Any:
        self.steps += 1
        out = []
        for e, env in enumerate(self.envs):
            if self.ended[e]:  # NEXT_STEP: this step begins the lane's next episode
                out.append((env.reset()[0], 0.0, False, False))
            else:
                obs, r, term, trunc, _ = env.step(actions[e])
                out.append((obs, r, term, trunc))
        obs, rew, term, trunc = (np.array(x) for x in zip(*out, strict=True))
        self.ended = term | trunc
        return obs.astype(np.float32), rew, term, trunc, {}


def _play(venv: Any, steps: int) -> list[tuple]:
    venv.seed(7)
    seen = [("reset", venv.reset().tolist())]
    for i in range(steps):
        actions = np.full((venv.num_envs, 1), 0.5 if i % 2 else -0.5, np.float32)
        obs, rew, done, infos = venv.step(actions)
        terminal = [
            info["terminal_observation"].tolist()
            if "terminal_observation" in info
            else None
            for info in infos
        ]
        truncated = [info.get("TimeLimit.truncated") for info in infos]
        seen.append((obs.tolist(), rew.tolist(), done.tolist(), terminal, truncated))
    return seen


@pytest.mark.parametrize("terminate", [False, True], ids=["truncated", "terminated"])
def test_lanes_ending_together_give_sb3_what_separate_envs_give(terminate):
    from stable_baselines3.common.vec_env import DummyVecEnv

    reference = DummyVecEnv([lambda: Counter(3, terminate) for _ in range(3)])
    lanes = SB3Lanes(CounterLanes([3, 3, 3], terminate))

    assert _play(lanes, 8) == _play(reference, 8)
    assert lanes.venv.steps == 8 + 2  # 2 episode ends: 2 autoreset steps taken at once


def test_a_lane_ending_early_gets_one_marked_autoreset_step():
    lanes = SB3Lanes(CounterLanes([2, 4], terminate=True))
    lanes.reset()
    actions = np.zeros((2, 1), np.float32)
    lanes.step(actions)
    obs, rew, done, infos = lanes.step(actions)  # lane 0 ends, lane 1 plays on
    assert done.tolist() == [True, False]
    assert infos[0]["terminal_observation"].tolist() == [2.0, 0.0]
    obs, rew, done, infos = lanes.step(actions)  # lane 0's autoreset step
    assert infos[0] == {"autoreset": True, "TimeLimit.truncated": False}
    assert rew[0] == 0.0 and not done[0]
    assert obs[0].tolist() == [0.0, 0.0] and obs[1].tolist() == [3.0, 0.0]


def test_ppo_trains_a_few_thousand_steps_on_emulate_lanes(ray_session):
    venv = sb3_lanes(None, num_envs=4, mode="emulate", overrides=["rounds=8"])
    assert isinstance(venv, SB3Lanes) and venv.num_envs == 4
    try:
        model = sb3.PPO(
            "MlpPolicy",
            venv,
            n_steps=256,
            batch_size=256,
            n_epochs=2,
            seed=0,
            device="cpu",
        )
        model.learn(total_timesteps=2048)
    finally:
        venv.close()
    assert model.num_timesteps >= 2048
    assert all(np.isfinite(p.detach().numpy()).all() for p in model.policy.parameters())
    # every lane played its 8-round episodes to the end, in lockstep: 2048
    # steps of 4 lanes are 64 episodes, the first begun by reset
    assert venv.venv.episodes >= 2048 // (4 * 8)
