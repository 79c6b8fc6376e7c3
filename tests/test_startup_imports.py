"""Start-up stays light: the CLI and config validation import neither torch nor Ray.

Issue 35: ``rayfl --help`` imported torch (1.4 s of its 1.9 s), and a typo in a
config key took as long to report as a run's set-up. Each check runs in a fresh
interpreter and reads ``sys.modules`` afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "ray")


def _modules_after(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; return what it printed as JSON."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


pytestmark = pytest.mark.quick


def test_importing_the_cli_and_validating_every_example_imports_no_torch_or_ray():
    code = f"""
import glob, json, sys
import rayfl.cli
from rayfl.config import load_config
checked = [load_config(p).name for p in sorted(glob.glob("examples/*.yaml"))]
print(json.dumps({{"checked": len(checked),
                   "heavy": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""
    found = _modules_after(code)
    assert found["checked"] >= 10  # it validated the examples
    assert found["heavy"] == []


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        ["run", "--help"],
        ["run", "no-such-config.yaml"],
        ["run", "examples/quickstart.yaml", "roundz=3"],
        ["run", "examples/quickstart.yaml", "scheduler.policy=nope"],
    ],
    ids=["help", "version", "run-help", "missing-file", "typo-key", "bad-policy"],
)
def test_help_version_and_config_errors_import_no_torch_or_ray(argv):
    code = f"""
import json, sys
from rayfl import cli
try:
    code = cli.main({argv!r})
except SystemExit as e:
    code = e.code
print(json.dumps({{"code": code,
                   "heavy": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""
    found = _modules_after(code)
    assert found["code"] in (0, 2)  # help/version, or a one-line config error
    assert found["heavy"] == []


def test_the_cloud_of_a_fedavg_run_and_the_data_holder_import_no_torch():
    # The cloud and the data holder are actor processes that never train: what
    # they unpickle (their classes, the setup) and the FedAvg server half they
    # build must not import torch (1.4 s of CPU each at a run's set-up).
    code = """
import json, sys
import rayfl.actors.cloud, rayfl.actors.shared_data
from rayfl.algorithms.config import FedAvgConfig, FedProxConfig
from rayfl.algorithms.registry import make_algorithm
built = [type(make_algorithm(c())).__name__ for c in (FedAvgConfig, FedProxConfig)]
print(json.dumps({"built": built, "torch": "torch" in sys.modules}))
"""
    found = _modules_after(code)
    assert found == {"built": ["FedAvg", "FedProx"], "torch": False}


def test_a_run_without_dp_sets_up_its_privacy_ledger_without_dp_accounting():
    # dp-accounting pulls scipy.signal (about a second): imported when ε is asked
    code = """
import json, sys
from rayfl.privacy.accountant import PrivacyLedger
ledger = PrivacyLedger(3, accountant="pld")
before = "dp_accounting" in sys.modules
ledger.record([0], noise_multiplier=1.0, sample_rate=1.0)
eps = ledger.epsilon(1e-5)
print(json.dumps({"before": before, "after": "dp_accounting" in sys.modules,
                  "eps": float(max(eps))}))
"""
    seen = _modules_after(code)
    assert seen["before"] is False
    assert seen["after"] is True and 0 < seen["eps"] < float("inf")


def test_an_unknown_accountant_is_refused():
    from rayfl.privacy.accountant import PrivacyLedger

    with pytest.raises(ValueError, match="'rdp' or 'pld'"):
        PrivacyLedger(3, accountant="moments")  # type: ignore[arg-type]
