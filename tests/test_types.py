"""mypy passes on rayfl, envs and policies (STYLE.md §8).

The configuration is ``[tool.mypy]`` in ``pyproject.toml``: the pydantic plugin,
and strict mode for rayfl.privacy, rayfl.wireless, rayfl.compression and
policies. A fresh cache directory makes every run a cold one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_passes_on_the_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Arrange: run from the checkout so mypy reads its pyproject.toml
    monkeypatch.chdir(ROOT)
    args = ["--config-file", "pyproject.toml", "--cache-dir", str(tmp_path)]
    # Act
    stdout, stderr, status = api.run([*args, "rayfl", "envs", "policies"])
    # Assert
    assert status == 0, f"mypy failed:\n{stdout}{stderr}"
