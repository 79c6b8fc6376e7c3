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
