"""Every checkpoint shipped in policies/checkpoints loads and schedules a star episode."""

from __future__ import annotations

import filecmp
from pathlib import Path

import numpy as np
import pytest

from rayfl.benchmarks.policies import build_policy, make_env
from rayfl.benchmarks.policies.scenarios import scenario_config
from rayfl.config import load_config

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p for p in (ROOT / "policies" / "checkpoints").iterdir() if p.is_dir())


def test_there_are_shipped_checkpoints():
    names = {p.name for p in SHIPPED}
    assert {"learned_default", "learned_star_small_shadowed"} <= names


@pytest.mark.parametrize("checkpoint", SHIPPED, ids=lambda p: p.name)
def test_a_shipped_checkpoint_plays_a_surrogate_episode(checkpoint):
    cfg = load_config(scenario_config("star-small-shadowed"), {"rounds": 3})
    env = make_env(cfg, "surrogate")
    try:
        obs, _ = env.reset(seed=0)
        policy = build_policy(
            env,
            cfg,
            ("learned", "learned", {"checkpoint": str(checkpoint)}),
            "surrogate",
        )
        policy.reset(seed=0)
        for _ in range(cfg.rounds):
            action = policy(obs)
            assignment = np.asarray(
                action["assignment"] if isinstance(action, dict) else action
            )
            chosen = assignment[assignment < cfg.data.num_clients]
            assert len(set(chosen.tolist())) == len(chosen) > 0  # no repeats
            obs, _, terminated, truncated, info = env.step(action)
            assert not info.get("ignored")
            if terminated or truncated:
                break
    finally:
        env.close()


def test_the_shipped_shadowed_policy_is_the_one_the_docs_scored():
    shipped = ROOT / "policies" / "checkpoints" / "learned_star_small_shadowed"
    scored = ROOT / "docs" / "rl" / "rl_result" / "shadowed_lr02" / "policy"
    for name in ("policy.json", "policy.npz"):
        assert filecmp.cmp(shipped / name, scored / name, shallow=False), name
