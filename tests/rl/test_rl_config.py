"""The ``rl`` config section (no RLlib needed): the fine-tuning fields."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from rayfl.rl.config import RLConfig


def test_fine_tuning_fields_default_to_the_old_behaviour():
    rl = RLConfig()
    assert rl.reset_log_std is None
    assert rl.partition_seeds is None
    assert rl.partition_every == 1


def test_reset_log_std_needs_init_from():
    with pytest.raises(ValidationError, match="reset_log_std needs rl.init_from"):
        RLConfig(reset_log_std=-1.0)
    assert RLConfig(init_from="x", reset_log_std=-1.0).reset_log_std == -1.0


def test_partition_fields_are_checked():
    with pytest.raises(ValidationError):
        RLConfig(partition_seeds=[])
    with pytest.raises(ValidationError):
        RLConfig(partition_every=0)
    assert RLConfig(partition_seeds=[100, 101]).partition_seeds == [100, 101]


_DATA = {"dataset": "digits", "num_clients": 6, "partition": "iid"}
_D2D = {"data": _DATA, "topology": {"kind": "d2d", "target": 0}, "rl": {}}


def test_the_rl_section_is_checked_against_the_topology():
    from rayfl.config import ConfigError, load_config

    assert load_config(_D2D).rl is not None  # one target, D2D rewards: fine
    example = Path(__file__).resolve().parents[2] / "examples" / "rl_scheduler.yaml"
    star = load_config(example, ["rl.baselines=[minmax]"])
    assert star.rl.baselines == ["minmax"]  # a star-only baseline on the star
    cases = [
        (
            {**_D2D, "rl": {"reward": "energy"}},
            "rl.reward=energy has no form on topology.kind=d2d",
        ),
        (
            {**_D2D, "rl": {"reward": "accuracy_gain"}},
            "rl.reward=accuracy_gain needs mode=emulate",
        ),
        (
            {**_D2D, "topology": {"kind": "d2d", "target": "all"}},
            "needs one target",
        ),
        (
            {**_D2D, "rl": {"baselines": ["random", "delay_min"]}},
            "rl.baselines=delay_min",
        ),
        (
            {
                "data": _DATA,
                "topology": {"kind": "hierarchical"},
                "rl": {"baselines": ["minmax"]},
            },
            "rl.baselines=minmax",
        ),
    ]
    for config, message in cases:
        with pytest.raises(ConfigError) as error:
            load_config(config)
        lines = [line for line in str(error.value).splitlines() if message in line]
        assert lines, (message, str(error.value))


def test_rl_reward_names_are_the_envs():
    from typing import get_args

    from rayfl.rl.config import Reward
    from rayfl.rl.rewards import REWARDS

    assert get_args(Reward) == REWARDS
