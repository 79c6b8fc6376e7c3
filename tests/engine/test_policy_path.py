"""The runner's policy path equals stepping the scheduling env with the same policy.

The runner no longer goes through the env: it observes the engine, asks the
policy, and runs the round itself. Oracle: the env (emulate mode) stepped by hand
with the policy ``rayfl.runner.env_policy`` builds, as runs did before.
"""

from __future__ import annotations

import numpy as np
import pytest

import rayfl
from envs.star.scheduling import WirelessFLEnv
from rayfl.config import load_config
from rayfl.runner import env_policy
from rayfl.star.deciders import policy_needs_controls

CFG = {
    "name": "policy-path",
    "rounds": 3,
    "eval_every": 3,
    "data": {
        "dataset": "digits",
        "num_clients": 6,
        "partition": "dirichlet",
        "alpha": 1.0,
        "min_partition_size": 20,
    },
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": {"kind": "fedavg", "local_steps": 2, "batch_size": 16, "lr": 0.1},
    "wireless": {"num_subchannels": 3, "effects": "bit_flip"},
    "scheduler": {"policy": "proportional_fair"},
    "output": {"progress": False, "plots": False},
}


def _env_rollout(cfg):
    env = WirelessFLEnv(cfg, mode="emulate", controls=policy_needs_controls(cfg))
    try:
        obs, _ = env.reset(seed=cfg.seed)
        policy = env_policy(cfg, env)
        rows, evals = [], []
        for t in range(cfg.rounds):
            obs, *_ = env.step(policy(obs))
            out = env.last_outcome
            rows += [
                (t, r["client"], r["delivered"], r["train_loss"]) for r in out.rows
            ]
            evals.append([e["test_loss"] for e in out.evals])
        return sorted(rows), np.array(evals)  # by round, then client id
    finally:
        env.close()


@pytest.mark.slow
def test_runner_with_a_policy_equals_the_env_stepped_by_hand(ray_session, tmp_path):
    # Arrange
    cfg = load_config(CFG, {"output.dir": str(tmp_path)})
    want_rows, want_evals = _env_rollout(cfg)
    # Act
    m = rayfl.run(cfg).metrics
    # Assert: same schedules, deliveries, losses; evaluated every round as the env
    got = m[m.scheduled]
    got_rows = list(
        zip(
            got["round"],
            got["client"],
            got["delivered"],
            got["train_loss"],
            strict=True,
        )
    )
    assert [r[:3] for r in got_rows] == [r[:3] for r in want_rows]
    np.testing.assert_array_equal([r[3] for r in got_rows], [r[3] for r in want_rows])
    got_evals = m.pivot(index="round", columns="client", values="test_loss").to_numpy()
    np.testing.assert_array_equal(got_evals, want_evals)


@pytest.mark.slow
def test_runner_gives_minmax_the_algorithms_controls(ray_session, tmp_path):
    # Arrange: Ditto on digits, 6 clients, K = 3; minmax sets lr, personal_lr, lam
    from rayfl.runner import _build

    cfg = load_config(
        {
            "name": "minmax",
            "rounds": 2,
            "data": {"dataset": "digits", "num_clients": 6, "min_partition_size": 20},
            "model": {"kind": "mlp", "hidden": [16]},
            "algorithm": {"kind": "ditto", "batch_size": 16, "lr": 0.1},
            "wireless": {"num_subchannels": 3},
            "scheduler": {"policy": "minmax", "params": {"num_params": 1210}},
            "output": {"progress": False, "plots": False, "dir": str(tmp_path)},
        }
    )
    system, (decider,), settings = _build(cfg)
    try:
        # Act
        (obs,) = system.observe(0)
        action = decider.policy(obs)
        schedule = decider.decide(0, obs)
        result = system.run_round(0, (schedule,))
        # Assert
        assert decider.policy.action_space.contains(action)
        assert set(schedule.controls) == {"lr", "personal_lr", "lam"}
        assert settings.evaluate_every_round
        assert len(schedule.clients) == 3 and len(result.delivered) == 3
    finally:
        system.close()
