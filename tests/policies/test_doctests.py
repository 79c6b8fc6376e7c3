"""Run the doctest ``Example:`` blocks of every policies module."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "policies.assignment",
    "policies.base",
    "policies.registry",
    "policies.all_clients",
    "policies.uniform",
    "policies.random",
    "policies.round_robin",
    "policies.proportional_fair",
    "policies.best_channel",
    "policies.age_based",
    "policies.deadline_max_weight",
    "policies.delay_min",
    "policies.minmax",
    "policies.minmax_bound",
    "policies.features",
    "policies.learned",
    "policies.random_neighbors",
    "policies.lyapunov",
    "rayfl.observation",
    "rayfl.registry",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(
        importlib.import_module(name), optionflags=doctest.ELLIPSIS
    )
    assert result.failed == 0
