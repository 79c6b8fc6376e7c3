import sys

import numpy as np
import pandas as pd

df = pd.read_csv(
    sys.argv[1] if len(sys.argv) > 1 else "docs/rl/emulate_eval_50partitions/rows.csv"
)
parts = sorted(df.partition.unique())
print("partitions:", len(parts), parts[0], "..", parts[-1])
m = df.pivot(index="partition", columns="policy", values="max_test_loss")
j = df.pivot(index="partition", columns="policy", values="jain_train_loss")
a = df.pivot(index="partition", columns="policy", values="mean_acc")
n = len(m)
order = m.mean().sort_values().index
print(
    "\n| policy | max client test loss (mean ± s.e.) | Jain (train losses) | mean client acc |"
)
print("|---|---|---|---|")
for p in order:
    print(
        f"| {p} | {m[p].mean():.3f} ± {m[p].std(ddof=1) / np.sqrt(n):.3f} | {j[p].mean():.3f} ± {j[p].std(ddof=1) / np.sqrt(n):.3f} | {a[p].mean():.3f} |"
    )


def paired(x, y, name):
    d = x - y
    print(
        f"{name}: {d.mean():+.3f} ± {d.std(ddof=1) / np.sqrt(len(d)):.3f} (s.e.), wins {int((d < 0).sum())}/{len(d)}"
    )


for L in ["learned", "learned_single_partition", "loss_greedy"]:
    if L in m:
        paired(m[L], m["round_robin"], f"max loss {L} - round_robin")
        paired(-j[L], -j["random"], f"-(Jain {L} - random)")
# disjoint triples
for L in ["learned", "learned_single_partition"]:
    if L not in m:
        continue
    ok = tot = 0
    for i in range(0, n - n % 3, 3):
        idx = m.index[i : i + 3]
        tot += 1
        ok += (m.loc[idx, L].mean() <= m.loc[idx, "round_robin"].mean()) and (
            j.loc[idx, L].mean() >= j.loc[idx, "random"].mean()
        )
    print(f"{L}: bar holds on {ok}/{tot} disjoint triples")
