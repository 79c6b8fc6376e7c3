"""The ``rl`` config section (no RLlib needed): the fine-tuning fields."""

from __future__ import annotations

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
