"""`make install` takes the CPU build of torch, never CUDA, wherever it runs.

Each check is a pip dry run (``pip install --dry-run --report``) with this machine's
pip configuration switched off (``PIP_CONFIG_FILE=/dev/null``, no ``PIP_*``
variables), so pip sees only PyPI and the sources the Makefile names: PyTorch's
CPU wheel index when it answers, else the local wheel folder ``TORCH_WHEELS``. The
dry runs need PyPI; they skip when it cannot be reached.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _isolated_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def pypi():
    try:
        urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=10)
    except OSError as error:
        pytest.skip(f"PyPI unreachable: {error}")


def _dry_run(args: list[str], tmp_path: Path) -> tuple[list[dict], str]:
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "-v"]
        + ["--report", str(report), *args],
        env=_isolated_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(report.read_text())["install"], proc.stdout + proc.stderr


def _makefile_torch_args() -> list[str]:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    proc = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "torch-pip-args"],
        env=_isolated_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return proc.stdout.split()


def test_makefile_asks_for_the_cpu_wheel_from_named_sources():
    args = _makefile_torch_args()
    spec = [a for a in args if a.startswith("torch==")]
    assert spec and spec[0].endswith("+cpu"), args
    # only the CPU index and/or a local wheel folder are added to PyPI
    sources = {
        args[i]: args[i + 1] for i in range(len(args) - 1) if args[i][:2] == "--"
    }
    assert set(sources) <= {"--extra-index-url", "--find-links"}, args
    if "--extra-index-url" in sources:
        assert sources["--extra-index-url"].endswith("/whl/cpu")
    # a folder without torch wheels is not named, and the spec stays +cpu
    bare = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "torch-pip-args", "TORCH_WHEELS=/nonexistent"],
        env=_isolated_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    assert "--find-links" not in bare and bare[-1] == spec[0]


def test_torch_resolves_to_the_cpu_build_without_nvidia(pypi, tmp_path):
    args = _makefile_torch_args()
    if "--extra-index-url" not in args and "--find-links" not in args:
        pytest.skip("neither PyTorch's CPU index nor a local torch wheel is reachable")
    install, _ = _dry_run(["--ignore-installed", *args], tmp_path)
    versions = {
        d["metadata"]["name"].lower(): d["metadata"]["version"] for d in install
    }
    assert versions["torch"].endswith("+cpu"), versions
    gpu = [n for n in versions if n.startswith(("nvidia-", "cuda-")) or n == "triton"]
    assert not gpu, versions


def test_rayfl_requirements_keep_the_installed_cpu_torch(pypi, tmp_path):
    import torch

    if not torch.__version__.endswith("+cpu"):
        pytest.skip(f"this environment's torch is {torch.__version__}, not a CPU build")
    install, log = _dry_run(["-e", f"{ROOT}[dev,rl,sb3,pettingzoo]"], tmp_path)
    names = [d["metadata"]["name"].lower() for d in install]
    assert "torch" not in names
    assert not [n for n in names if n.startswith(("nvidia-", "cuda-"))], names
    assert "rayfl" in names
    # the SPDX licence string: no setuptools deprecation while building metadata
    assert "project.license` as a TOML table is deprecated" not in log
    assert "Successfully installed" in log or "setuptools" in log  # the build ran
