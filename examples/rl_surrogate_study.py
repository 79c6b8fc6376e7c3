r"""Learned scheduler vs the heuristics on held-out seeds, surrogate mode.

Trains the learned scheduler with PPO (``rayfl.train_policy.train_policy``) on the
surrogate env of ``examples/rl_scheduler.yaml`` (N = 10 clients, K = 3
subchannels, 20 rounds per episode, the env's default reward ``min_max_loss`` =
−max client test loss per round), once per training seed, then scores every
trained policy and the heuristics on held-out seeds: seeds used neither as a
training seed nor by RLlib during training (training episodes draw their run
seeds from the env's own generator). A held-out seed ``s`` sets both the
config seed (the federated data partition, hence the clients' data shares) and
the episode's run seed (channel geometry and fading, the surrogate's per-client
constants), so every policy plays exactly the same episodes.

Writes, under ``--out`` (default ``docs/rl/surrogate``):

| file | content |
|------|---------|
| ``eval.csv`` | one row per (policy, train_seed, seed): ``episode_reward`` (sum of the env rewards) and ``wall_s`` |
| ``paired.csv`` | one row per (train_seed, baseline, seed): ``diff`` = learned − baseline reward, ``learned_better`` (1/0); ``train_seed`` = ``mean``: the mean reward of all trained policies on that seed |
| ``learning_curve.csv`` | one row per (train_seed, iteration): PPO's mean training episode return, wall time |
| ``learning_curve.png`` | the curves, with the held-out means of the heuristics |
| ``policies/train_seed<k>/`` | the exported policies (``scheduler.params.checkpoint=`` loads them) |

Re-running skips the training seeds whose policy is already exported (delete
``policies/train_seed<k>`` to retrain one); the evaluation always runs again
(it takes seconds).

Example (what docs/rl/surrogate/README.md reports):

    python examples/rl_surrogate_study.py --train-seeds 0 1 2 3 4 --iterations 150 \
        --eval-seeds 20000:20030
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "rl_scheduler.yaml"
BASELINES = [
    "round_robin",
    "age_based",
    "random",
    "minmax",
    "proportional_fair",
    "best_channel",
]


def _seed_range(text: str) -> list[int]:
    """Parse ``a:b`` (a … b − 1) or ``a,b,c``."""
    if ":" in text:
        lo, hi = (int(p) for p in text.split(":"))
        return list(range(lo, hi))
    return [int(p) for p in text.split(",")]


def train(args: argparse.Namespace, out: Path) -> pd.DataFrame:
    """Train one policy per training seed (skipping exported ones); return curves."""
    from rayfl.train_policy import train_policy

    curves = []
    for seed in args.train_seeds:
        target = out / "policies" / f"train_seed{seed}"
        curve_file = target / "progress.csv"
        if not (target / "policy.json").is_file() or not curve_file.is_file():
            overrides = [
                f"seed={seed}",
                f"rl.iterations={args.iterations}",
                "rl.time_budget_s=null",
                "rl.eval_episodes=0",
                f"rl.num_env_runners={args.num_env_runners}",
                f"ray.num_cpus={args.num_cpus}",
                f"output.dir={args.runs}",
            ]
            print(f"training seed {seed}: {' '.join(overrides)}", flush=True)
            run_dir = train_policy(args.config, overrides)
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(run_dir / "policy", target)
            shutil.copy(run_dir / "progress.csv", curve_file)
        progress = pd.read_csv(curve_file)
        progress.insert(0, "train_seed", seed)
        curves.append(progress)
    return pd.concat(curves, ignore_index=True)


def evaluate(args: argparse.Namespace, out: Path) -> pd.DataFrame:
    """Score the trained policies and the baselines on every held-out seed."""
    from envs.episode import run_episode
    from envs.star.scheduling import WirelessFLEnv
    from policies import make_policy
    from rayfl.config import load_config

    overlap = set(args.eval_seeds) & set(args.train_seeds)
    if overlap:
        raise SystemExit(f"held-out seeds overlap the training seeds: {overlap}")
    policies = [
        ("learned", seed, {"checkpoint": str(out / "policies" / f"train_seed{seed}")})
        for seed in args.train_seeds
    ] + [(name, "-", {}) for name in args.baselines]
    rows = []
    for seed in args.eval_seeds:
        cfg = load_config(args.config, [f"seed={seed}"])
        rl = cfg.rl
        env = WirelessFLEnv(cfg, mode="surrogate", reward=rl.reward)
        try:
            env.reset(seed=seed)  # builds the partition: not part of any policy's time
            for name, train_seed, params in policies:
                t0 = time.perf_counter()
                policy = make_policy(name, env, **params)
                policy.reset(seed=seed)
                result = run_episode(env, policy, seed=seed)
                rows.append(
                    {
                        "policy": name,
                        "train_seed": train_seed,
                        "seed": seed,
                        "episode_reward": result.total_reward,
                        "wall_s": time.perf_counter() - t0,
                    }
                )
        finally:
            env.close()
        print(f"held-out seed {seed} done", flush=True)
    return pd.DataFrame(rows)


def paired(table: pd.DataFrame) -> pd.DataFrame:
    """Learned − baseline episode reward on the same seed, per training seed."""
    learned = table[table["policy"] == "learned"]
    # "mean": the learned policies' mean reward on the seed (over training seeds)
    pooled = learned.groupby("seed", sort=False)["episode_reward"].mean()
    candidates = [*learned.itertuples(index=False)] + [
        (None, "mean", seed, value) for seed, value in pooled.items()
    ]
    rows = []
    for baseline in table.loc[table["policy"] != "learned", "policy"].unique():
        base = table[table["policy"] == baseline].set_index("seed")["episode_reward"]
        for _, train_seed, seed, reward, *_ in candidates:
            diff = reward - float(base[seed])
            rows.append(
                {
                    "train_seed": train_seed,
                    "baseline": baseline,
                    "seed": seed,
                    "diff": diff,
                    "learned_better": int(diff > 0),
                }
            )
    return pd.DataFrame(rows)


def plot(curves: pd.DataFrame, table: pd.DataFrame, path: Path) -> None:
    """Learning curves (one per training seed) and held-out baseline means."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (seed, curve) in enumerate(curves.groupby("train_seed")):
        ax.plot(
            curve["iteration"],
            curve["episode_return_mean"],
            color=f"C{i}",
            lw=1.2,
            label=f"PPO training return, train seed {seed}",
        )
    means = table.groupby("policy", sort=False)["episode_reward"].mean()
    colors = iter(["k", "tab:brown", "tab:gray", "tab:olive", "tab:cyan", "tab:pink"])
    for name, value in means.items():
        if name == "learned":
            continue
        color = next(colors, "k")
        ax.axhline(value, ls="--", lw=1, color=color, label=f"{name} (held-out)")
    ax.axhline(
        means["learned"],
        ls="-",
        lw=2,
        color="C3",
        alpha=0.5,
        label="learned, mean of the train seeds (held-out)",
    )
    ax.set_xlabel("PPO iteration (500 env steps = 25 episodes each)")
    ax.set_ylabel("episode return = Σ_t −max_n loss_n")
    ax.set_title("Learned scheduler on the surrogate (N = 10, K = 3, 20 rounds)")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    """Train, evaluate, write the CSVs and the plot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(CONFIG))
    parser.add_argument("--train-seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--iterations", type=int, default=150)
    parser.add_argument(
        "--eval-seeds",
        type=_seed_range,
        default=list(range(20000, 20030)),
        help="held-out seeds, a:b (a … b-1) or a,b,c (default 20000:20030)",
    )
    parser.add_argument("--baselines", nargs="+", default=BASELINES)
    parser.add_argument(
        "--num-env-runners", type=int, default=0, help="remote EnvRunners (0: driver)"
    )
    parser.add_argument("--num-cpus", type=int, default=1, help="Ray CPUs")
    parser.add_argument("--runs", default=str(ROOT / "runs" / "rl_surrogate"))
    parser.add_argument("--out", default=str(ROOT / "docs" / "rl" / "surrogate"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    curves = train(args, out)
    curves.to_csv(out / "learning_curve.csv", index=False)
    table = evaluate(args, out)
    table.to_csv(out / "eval.csv", index=False)
    paired(table).to_csv(out / "paired.csv", index=False)
    plot(curves, table, out / "learning_curve.png")
    summary = table.groupby(["policy", "train_seed"], sort=False)["episode_reward"]
    print(summary.agg(["mean", "std", "count"]).to_string())
    print(f"total wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
