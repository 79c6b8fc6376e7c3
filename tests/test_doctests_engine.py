"""Run the doctest ``Example:`` blocks of engine modules that carry them."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "rayfl.metrics",
    "rayfl.rl.rewards",
    "rayfl.exactsum.limbs",
    "rayfl.learning.aggregate",
    "rayfl.hierarchy.edge",
    "rayfl.uplink",
    "rayfl.wireless.cost",
    "rayfl.privacy.report",
    "rayfl.compare.variants",
    "rayfl.privacy.accountant",
    "envs.episode",
    "rayfl.names",
    "policies.registry",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), verbose=False)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
