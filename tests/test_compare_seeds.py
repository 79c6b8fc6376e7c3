"""Multi-seed comparison: the summary statistics and the plot (no Ray needed)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rayfl.compare.seeds import _plot, pretty_summary, summarise


def _table():
    rng = np.random.default_rng(0)
    rows = []
    for seed in range(3):
        for policy in ("learned", "random"):
            rows.append(
                {
                    "policy": policy,
                    "seed": seed,
                    "final_acc": rng.random(),
                    "max_test_loss": rng.random(),
                    "jain_train_loss": rng.random(),
                }
            )
    return pd.DataFrame(rows)


def test_summary_is_mean_and_sample_std_per_policy():
    table = _table()
    summary = summarise(table).set_index("policy")
    values = table[table.policy == "random"]["max_test_loss"].to_numpy()
    np.testing.assert_allclose(
        summary.loc["random", "max_test_loss_mean"], values.sum() / 3, rtol=1e-12
    )
    np.testing.assert_allclose(
        summary.loc["random", "max_test_loss_std"],
        np.sqrt(((values - values.mean()) ** 2).sum() / 2),
        rtol=1e-12,
    )
    assert summary.loc["learned", "seeds"] == 3


def test_pretty_table_and_plot(tmp_path):
    summary = summarise(_table())
    pretty = pretty_summary(summary)
    assert list(pretty.columns) == [
        "policy",
        "seeds",
        "final_acc",
        "max_test_loss",
        "jain_train_loss",
    ]
    assert " ± " in pretty.loc[0, "final_acc"]
    _plot(summary, tmp_path / "plots" / "compare_seeds.png")
    assert (tmp_path / "plots" / "compare_seeds.png").stat().st_size > 1000
