"""Measurement noise of the emulate bar: the SAME policy (round robin) on the SAME data partition,
different episode seeds (model init, batch order, channel, noise). Dev partitions only (20+).
"""

import sys

import numpy as np
import ray

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4]))
from envs.star.scheduling import WirelessFLEnv
from policies.assignment import assign_subchannels

parts = [int(s) for s in sys.argv[1].split(",")]
eps = [int(s) for s in sys.argv[2].split(",")]
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
for P in parts:
    env = WirelessFLEnv(
        str(
            __import__("pathlib").Path(__file__).resolve().parents[4]
            / "examples"
            / "rl_scheduler.yaml"
        ),
        mode="emulate",
        overrides=[f"seed={P}", "ray.num_cpus=2"],
    )
    for E in eps:
        obs, info = env.reset(seed=E)
        n, k = env.num_clients, env.num_subchannels
        for t in range(env.config.rounds):
            chosen = np.array([(t * k + j) % n for j in range(k)])
            obs, r, term, trunc, info = env.step(
                assign_subchannels(obs["channel_gain"], chosen, idle=n)
            )
        tl = np.asarray(info["test_loss"])
        trl = np.array([e["eval_train_loss"] for e in env.last_outcome.evals])
        print(
            "ROW",
            P,
            E,
            round(float(tl.max()), 4),
            round(float(trl.sum() ** 2 / (n * (trl**2).sum())), 4),
            flush=True,
        )
    env.close()
