"""Dev partitions only: does knowing the horizon help? round robin for rounds 0..T-2, then the
final round's K clients by the highest observed loss ("rr_then_greedy"), vs round robin.
"""

import sys

import numpy as np
import ray

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4]))
from envs.star.scheduling import WirelessFLEnv
from policies.assignment import assign_subchannels

parts = list(range(*map(int, sys.argv[1].split(":"))))
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
    n, k, T = env.num_clients, env.num_subchannels, env.config.rounds
    for name in ["round_robin", "rr_then_greedy", "rr_then_greedy2"]:
        obs, _ = env.reset(seed=P)
        for t in range(T):
            last = (name == "rr_then_greedy" and t == T - 1) or (
                name == "rr_then_greedy2" and t >= T - 2
            )
            chosen = (
                np.argsort(-obs["loss"], kind="stable")[:k]
                if last
                else np.array([(t * k + j) % n for j in range(k)])
            )
            obs, r, term, trunc, info = env.step(
                assign_subchannels(obs["channel_gain"], chosen, idle=n)
            )
        tl = np.asarray(info["test_loss"])
        print("ROW", P, name, round(float(tl.max()), 4), flush=True)
    env.close()
