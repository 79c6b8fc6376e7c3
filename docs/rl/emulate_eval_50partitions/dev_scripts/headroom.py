"""Headroom: does scheduling by FRESH per-client losses beat RR on final max test loss?
Dev seeds only (20+), never the evaluation seeds 0-11.
"""

import collections
import sys

import numpy as np
import ray

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4]))
from envs.star.scheduling import WirelessFLEnv
from policies.assignment import assign_subchannels

seeds = [int(s) for s in sys.argv[1].split(",")]
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
rows = []
for S in seeds:
    env = WirelessFLEnv(
        str(
            __import__("pathlib").Path(__file__).resolve().parents[4]
            / "examples"
            / "rl_scheduler.yaml"
        ),
        mode="emulate",
        overrides=[f"seed={S}", "ray.num_cpus=2"],
    )
    for pol in ["rr", "fresh_greedy", "stale_greedy", "oracle_test"]:
        obs, info = env.reset(seed=S)
        n, k = env.num_clients, env.num_subchannels
        train_loss = env._loss.copy()
        test_loss = None
        for t in range(env.config.rounds):
            if pol == "rr":
                chosen = np.array([(t * k + j) % n for j in range(k)])
            elif pol == "fresh_greedy":
                chosen = np.argsort(-train_loss)[:k]
            elif pol == "stale_greedy":
                chosen = np.argsort(-obs["loss"])[:k]
            else:
                chosen = np.argsort(
                    -(test_loss if test_loss is not None else train_loss)
                )[:k]
            a = assign_subchannels(obs["channel_gain"], chosen, idle=n)
            obs, r, term, trunc, info = env.step(a)
            ev = env.last_outcome.evals
            train_loss = np.array([e["eval_train_loss"] for e in ev])
            test_loss = np.asarray(info["test_loss"])
        rows.append(
            (
                S,
                pol,
                float(np.max(test_loss)),
                float((test_loss.sum() ** 2) / (n * (test_loss**2).sum())),
            )
        )
        print(S, pol, round(rows[-1][2], 3), round(rows[-1][3], 3), flush=True)
    env.close()
agg = collections.defaultdict(list)
for _, p, m, j in rows:
    agg[p].append((m, j))
for p, v in agg.items():
    v = np.array(v)
    print(p, "max_loss {:.3f} jain {:.3f}".format(*tuple(v.mean(0))))
