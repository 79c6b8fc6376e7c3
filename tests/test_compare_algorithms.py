"""``rayfl compare --algorithms``: which algorithm section each run gets (no Ray)."""

import pytest

import rayfl.compare.variants as compare_mod
from rayfl.cli import build_parser
from rayfl.config import ConfigError, load_config

CFG = {
    "name": "t",
    "algorithm": {"kind": "ditto", "lam": 0.3, "lr": 0.02, "batch_size": 8},
}


def test_each_algorithm_keeps_shared_fields_and_its_own_defaults(monkeypatch):
    seen = {}

    def fake(base, variants, *, label, extra_columns, log=None):
        seen.update(variants=variants, label=label, extra=extra_columns)
        return None, None

    monkeypatch.setattr(compare_mod, "run_variants", fake)
    compare_mod.compare_algorithms(CFG, ["ditto", "fedamp", "pfedme"])
    variants = dict(seen["variants"])
    assert seen["label"] == "algorithm"
    assert variants["ditto"]["algorithm"]["lam"] == 0.3  # its own section, whole
    amp = load_config(CFG, variants["fedamp"]).algorithm
    assert (amp.kind, amp.lr, amp.batch_size, amp.lam) == ("fedamp", 0.02, 8, 5e-7)
    assert load_config(CFG, variants["pfedme"]).algorithm.lam == 15.0
    cols = seen["extra"]({"final": {"eval_mean_acc": 0.5, "eval_jain_acc": 0.9}})
    assert cols["mean_personal_acc"] == 0.5 and cols["jain_personal_acc"] == 0.9


def test_unknown_algorithm_is_a_config_error_before_anything_runs():
    with pytest.raises(ConfigError, match="algorithm"):
        compare_mod.compare_algorithms(CFG, ["fedavg", "nope"])


def test_cli_accepts_algorithms_instead_of_policies():
    args = build_parser().parse_args(["compare", "x.yaml", "--algorithms", "a,b"])
    assert args.algorithms == "a,b" and args.policies is None


def test_round_summary_reports_personalized_mean_worst10_and_jain():
    from rayfl.metrics import round_summary

    acc = [0.9, 0.5, 0.8, 0.7, 1.0, 0.6, 0.9, 0.95, 0.85, 0.4, 0.75, 0.8]
    rows = [
        {"test_acc": 0.5, "test_loss": 1.0, "personal_acc": a, "personal_loss": 0.1}
        for a in acc
    ]
    out = round_summary(rows, [1] * len(acc))
    a = sorted(acc)
    assert out["eval_mean_acc"] == pytest.approx(sum(acc) / len(acc))
    assert out["eval_worst10_acc"] == pytest.approx((a[0] + a[1]) / 2)  # ⌈1.2⌉ = 2
    jain = sum(acc) ** 2 / (len(acc) * sum(x * x for x in acc))
    assert out["eval_jain_acc"] == pytest.approx(jain)
    glob = round_summary([{"test_acc": v, "test_loss": 1.0} for v in acc], [1] * 12)
    assert glob["eval_worst10_acc"] == pytest.approx((a[0] + a[1]) / 2)


def test_seeds_with_algorithms_runs_each_seed_and_writes_the_csv(monkeypatch, tmp_path):
    """``--algorithms`` with ``--seeds`` ran only the config's seed before."""
    import pandas as pd

    import rayfl.compare.seeds as seeds_mod
    from rayfl.cli import main

    calls = []

    def fake(base, names, overrides, log=None):
        calls.append(overrides["seed"])
        acc = {"fedavg": 0.5, "ditto": 0.9}
        rows = [
            {"algorithm": a, "final_acc": acc[a] + overrides["seed"] / 100}
            for a in names
        ]
        return pd.DataFrame(rows).assign(run_dir="x"), None

    monkeypatch.setattr(seeds_mod, "compare_algorithms", fake)
    monkeypatch.setattr(
        seeds_mod, "RaySession", lambda *_: type("S", (), {"close": lambda s: None})()
    )
    csv = tmp_path / "out" / "per_seed.csv"
    code = main(
        [
            "compare",
            str(_write(tmp_path)),
            "--algorithms",
            "fedavg,ditto",
            "--seeds",
            "0,1,2",
            "--csv",
            str(csv),
            f"output.dir={tmp_path}",
        ]
    )
    assert code == 0 and calls == [0, 1, 2]
    table = pd.read_csv(csv)
    assert sorted(table.seed) == [0, 0, 1, 1, 2, 2]
    assert "run_dir" not in table.columns
    summary = seeds_mod.summarise(table).set_index("algorithm")
    assert summary.loc["ditto", "seeds"] == 3
    assert summary.loc["ditto", "final_acc_mean"] == pytest.approx(0.91)


def test_fast_refuses_algorithms():
    import rayfl.compare.seeds as seeds_mod

    with pytest.raises(ValueError, match="--fast compares policies"):
        seeds_mod.compare_seeds(CFG, ["fedavg"], [0], fast=True, algorithms=True)


def _write(tmp_path):
    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(CFG))
    return path
