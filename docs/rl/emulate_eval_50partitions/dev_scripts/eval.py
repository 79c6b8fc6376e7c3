"""Fast many-partition evaluation: one env per partition, every policy on it (PROTOCOL.md)."""

import csv
import os
import sys
import time

import numpy as np
import ray

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4]))
from envs.star.scheduling import WirelessFLEnv
from policies import make_policy
from policies.assignment import assign_subchannels
from rayfl.metrics import jain_index

parts = (
    [int(s) for s in sys.argv[1].split(",")]
    if "," in sys.argv[1]
    else list(range(*map(int, sys.argv[1].split(":"))))
)
out = sys.argv[2]
names = sys.argv[3].split(",")
CK = {
    "learned": {},
    "learned_single_partition": {
        "checkpoint": "policies/checkpoints/learned_single_partition"
    },
}
done = set()
if os.path.exists(out):
    with open(out) as fh:
        done = {(int(r["partition"]), r["policy"]) for r in csv.DictReader(fh)}
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
f = open(out, "a", newline="")  # noqa: SIM115 (appended to for the whole run)
w = csv.writer(f)
if not done:
    w.writerow(
        [
            "partition",
            "policy",
            "max_test_loss",
            "jain_train_loss",
            "mean_acc",
            "seconds",
        ]
    )
for P in parts:
    todo = [n for n in names if (P, n) not in done]
    if not todo:
        continue
    env = WirelessFLEnv(
        str(
            __import__("pathlib").Path(__file__).resolve().parents[4]
            / "examples"
            / "rl_scheduler.yaml"
        ),
        mode="emulate",
        overrides=[f"seed={P}", "ray.num_cpus=2"],
    )
    n, k = env.num_clients, env.num_subchannels
    for name in todo:
        t0 = time.time()
        obs, info = env.reset(seed=P)
        if name == "loss_greedy":

            def pol(o, k=k, n=n):
                return assign_subchannels(
                    o["channel_gain"], np.argsort(-o["loss"], kind="stable")[:k], idle=n
                )
        else:
            base = "learned" if name.startswith("learned") else name
            pol = make_policy(base, env, **CK.get(name, {}))
            pol.reset(seed=P)
        done_ep = False
        while not done_ep:
            obs, r, term, trunc, info = env.step(pol(obs))
            done_ep = term or trunc or env.round >= env.config.rounds
        ev = env.last_outcome.evals
        tl = np.array([e["test_loss"] for e in ev])
        trl = np.array([e["eval_train_loss"] for e in ev])
        acc = np.array([e["test_acc"] for e in ev])
        w.writerow(
            [
                P,
                name,
                f"{tl.max():.6f}",
                f"{jain_index(trl):.6f}",
                f"{acc.mean():.4f}",
                f"{time.time() - t0:.1f}",
            ]
        )
        f.flush()
        print(
            P,
            name,
            round(float(tl.max()), 4),
            round(float(jain_index(trl)), 4),
            flush=True,
        )
    env.close()
