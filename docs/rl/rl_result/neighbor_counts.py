#!/usr/bin/env python3
"""Whom a D2D target takes a model from: per-round choices over emulated episodes.

The D2D counterpart of ``schedule_counts.py`` (issue 48). Plays ``--policies``
(registered names, or ``learned=PATH``) on the emulation of a registered D2D
scenario, one episode per held-out seed, and writes one row per (seed, policy,
round): the neighbours the target took, how many arrived, and what the target
observed of them when it chose — distance, P^err, whether they were among its
three nearest nodes that round — beside the same means over every candidate.
A second file, ``<out>_summary.csv``, has one row per policy: neighbours per
round, the share of rounds with none, the delivery rate (arrived / chosen),
the chosen neighbours' mean distance and P^err against the candidates', and
the share of choices among the three nearest, the share kept from the round
before, the chosen neighbours' mean EM weight π_m against the candidates', and
the target's test loss after the last round. With the moving devices
(``rayfl.d2d.devices``) also the share of chosen neighbours whose model
misses the round deadline (``late_share``, against the candidates'), their
mean local training time, and the share of candidates away. ``--from CSV``
rewrites the summary of an earlier run without playing.

Usage:
    python docs/rl/rl_result/neighbor_counts.py --scenario d2d-small-mobile \
        --seeds 1000:1020 \
        --policies random_neighbors,learned=docs/rl/rl_result/d2d_small_mobile/policy \
        --out docs/rl/rl_result/bench_d2d_small_mobile/neighbor_counts.csv
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

NEAREST = 3


def episode(env: Any, policy: Any, seed: int) -> list[dict[str, float]]:
    """One episode's rows: the target's choice each round (module docstring)."""
    obs, _ = env.reset(seed=seed)
    policy.reset(seed=seed)
    (target,) = env.targets  # the scenarios draw one target per seed
    rows, done, t, before = [], False, 0, set()
    while not done:
        distance = np.asarray(obs["distance_m"], float)
        error = np.asarray(obs["error_probability"], float)
        weight = np.asarray(obs["em_weight"], float)
        candidates = np.flatnonzero(np.arange(len(distance)) != target)
        nearest = set(candidates[np.argsort(distance[candidates])[:NEAREST]])
        state = env.unwrapped._motion.link_state(env.unwrapped.round, target)
        late = np.zeros(len(distance), bool)
        if state is not None and state.late is not None:
            late = state.late
        compute = np.asarray(obs.get("compute_time_s", np.zeros(len(distance))))
        up = np.asarray(obs.get("available", np.ones(len(distance))))
        obs, _, terminated, truncated, info = env.step(policy(obs))
        chosen = list(info["neighbors"][target])
        arrived = list(info["delivered"][target])
        rows.append(
            {
                "round": t,
                "chosen": len(chosen),
                "arrived": len(arrived),
                "chosen_distance_m": distance[chosen].mean() if chosen else np.nan,
                "chosen_error": error[chosen].mean() if chosen else np.nan,
                "chosen_nearest": sum(c in nearest for c in chosen),
                "chosen_kept": len(before.intersection(chosen)),
                "chosen_em_weight": weight[chosen].mean() if chosen else np.nan,
                "candidate_em_weight": weight[candidates].mean(),
                "chosen_ids": ";".join(map(str, sorted(chosen))),
                "candidate_distance_m": distance[candidates].mean(),
                "candidate_error": error[candidates].mean(),
                "test_loss": float(info["test_loss"][target]),
                "chosen_late": int(late[chosen].sum()),
                "candidate_late": late[candidates].mean(),
                "chosen_compute_s": compute[chosen].mean() if chosen else np.nan,
                "candidate_compute_s": compute[candidates].mean(),
                "candidate_away": 1.0 - up[candidates].mean(),
            }
        )
        done, t, before = terminated or truncated, t + 1, set(chosen)
    return rows


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per policy (module docstring)."""
    out = []
    for policy, g in rows.groupby("policy", sort=False):
        took = g["chosen"].sum()

        def per_choice(col: str, g: pd.DataFrame = g, took: float = took) -> float:
            """A per-round mean over the chosen, weighted by how many were chosen."""
            if not took:
                return float("nan")
            return float(np.average(g[col].fillna(0), weights=g["chosen"]))

        def share(col: str, g: pd.DataFrame = g, took: float = took) -> float:
            return float(g[col].sum() / took) if took else float("nan")

        def mean(col: str, g: pd.DataFrame = g) -> float:
            """A column's mean (NaN for a CSV written before it existed)."""
            return float(g[col].mean()) if col in g else float("nan")

        devices = "chosen_late" in g

        last = g["round"] == g["round"].max()
        out.append(
            {
                "policy": policy,
                "seeds": g["seed"].nunique(),
                "neighbors_per_round": g["chosen"].mean(),
                "rounds_without_neighbor": (g["chosen"] == 0).mean(),
                "delivery_rate": share("arrived"),
                "chosen_distance_m": per_choice("chosen_distance_m"),
                "candidate_distance_m": g["candidate_distance_m"].mean(),
                "chosen_error": per_choice("chosen_error"),
                "candidate_error": g["candidate_error"].mean(),
                "nearest_share": share("chosen_nearest"),
                "kept_share": share("chosen_kept"),
                "chosen_em_weight": per_choice("chosen_em_weight"),
                "candidate_em_weight": g["candidate_em_weight"].mean(),
                "final_test_loss": g.loc[last, "test_loss"].mean(),
                "late_share": share("chosen_late") if devices else float("nan"),
                "candidate_late_share": mean("candidate_late"),
                "chosen_compute_s": per_choice("chosen_compute_s")
                if devices
                else float("nan"),
                "candidate_compute_s": mean("candidate_compute_s"),
                "candidate_away_share": mean("candidate_away"),
            }
        )
    return pd.DataFrame(out)


if __name__ == "__main__":
    import schedule_counts  # beside this script

    schedule_counts.main(episode, summarize, __doc__)
