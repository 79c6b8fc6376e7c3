"""`rayfl train-policy` without RLlib, and the `rl` config section (no RLlib needed)."""

from __future__ import annotations

import pytest

from rayfl import cli
from rayfl.config import ConfigError, load_config


def test_without_rllib_the_command_says_how_to_install(monkeypatch, capsys):
    monkeypatch.setattr("rayfl.train_policy.train.rllib_available", lambda: False)
    code = cli.main(["train-policy", "examples/rl_scheduler.yaml"])
    assert code == 2
    assert "pip install -e '.[rl]'" in capsys.readouterr().err


def test_example_config_loads_without_rllib():
    cfg = load_config("examples/rl_scheduler.yaml", ["rl.iterations=3"])
    assert cfg.rl is not None and cfg.rl.iterations == 3 and cfg.rl.mode == "surrogate"


@pytest.mark.parametrize(
    ("override", "field"),
    [("rl.mode=real", "rl.mode"), ("rl.minibatch_size=5000", "minibatch_size")],
    ids=["bad-mode", "minibatch-larger-than-batch"],
)
def test_bad_rl_values_name_the_field(override, field):
    with pytest.raises(ConfigError, match=field):
        load_config("examples/rl_scheduler.yaml", [override])


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--resume", "runs/x", "rl.iterations=60"], (None, ["rl.iterations=60"])),
        (
            ["--resume", "runs/x", "rl.iterations=60", "rl.lr=0.001"],
            (None, ["rl.iterations=60", "rl.lr=0.001"]),
        ),
        (["cfg.yaml", "rl.iterations=60"], ("cfg.yaml", ["rl.iterations=60"])),
    ],
    ids=["resume-one-override", "resume-two-overrides", "config"],
)
def test_train_policy_passes_config_and_overrides(
    monkeypatch, tmp_path, argv, expected
):
    # docs/learned_scheduler.md: `rayfl train-policy --resume RUN_DIR rl.iterations=60`
    monkeypatch.setattr("rayfl.train_policy.train.rllib_available", lambda: True)
    calls = []

    def fake(config, overrides, resume=None):
        calls.append((config, list(overrides), resume))
        return tmp_path

    monkeypatch.setattr("rayfl.train_policy.train.train_policy", fake)
    assert cli.main(["train-policy", *argv]) == 0
    resume = "runs/x" if "--resume" in argv else None
    assert calls == [(*expected, resume)]


def test_train_policy_refuses_both_a_config_and_resume(monkeypatch, capsys):
    monkeypatch.setattr("rayfl.train_policy.train.rllib_available", lambda: True)
    assert cli.main(["train-policy", "cfg.yaml", "--resume", "runs/x"]) == 2
    assert "needs CONFIG or --resume" in capsys.readouterr().err
