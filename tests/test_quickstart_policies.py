"""The quickstart schedules on a channel model: every star policy runs on it (issue 35).

``rayfl run examples/quickstart.yaml scheduler.policy=P rounds=2`` for every
registered policy meant for the star topology, in one Ray session (the Python API
of the same command). The run directory's columns are the ones
docs/getting_started.md lists.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rayfl.registry import POLICIES, policy_class

# All tests here use the shared Ray session (tests/conftest.py): the module then runs
# with the other Ray modules instead of starting Ray again at its first Ray test.
pytestmark = pytest.mark.usefixtures("ray_session")

ROOT = Path(__file__).resolve().parents[1]
STAR = sorted(n for n in POLICIES if "star" in policy_class(n).topologies)


def _run(policy: str, out: Path):
    import rayfl

    return rayfl.run(
        str(ROOT / "examples" / "quickstart.yaml"),
        [
            f"scheduler.policy={policy}",
            "rounds=2",
            f"output.dir={out}",
            "output.plots=false",
            "output.progress=false",
            "ray.num_cpus=2",
        ],
    )


def test_every_star_policy_is_covered():
    # the list the parametrization runs, checked against a hand-written floor
    assert {"random", "round_robin", "best_channel", "minmax", "lyapunov"} <= set(STAR)
    assert "random_neighbors" not in STAR  # a D2D rule


@pytest.mark.parametrize(
    "policy",
    [
        # One policy in the default suite; every other star policy runs in the
        # slow suite (each run ~40 s on a busy machine). `make test-quick`'s star
        # is tests/test_quick_smoke.py's run and resume.
        p if p == "best_channel" else pytest.param(p, marks=pytest.mark.slow)
        for p in STAR
    ],
)
def test_quickstart_runs_under_every_star_policy(policy, ray_session, tmp_path):
    result = _run(policy, tmp_path)
    scheduled = result.metrics[result.metrics["scheduled"]]
    assert result.summary["status"] == "completed"
    assert len(result.rounds) == 2
    # the channel model is on: every scheduled client has a subchannel and an SNR
    assert (scheduled["subchannel"] >= 0).all()
    assert scheduled["snr_db"].notna().all()
    assert 0 < scheduled.groupby("round").size().max() <= 10  # K = 10 subchannels


def _documented_columns() -> set[str]:
    text = (ROOT / "docs" / "getting_started.md").read_text()
    section = text.split("## What a run writes", 1)[1].split("\n## ", 1)[0]
    names = set()
    for quoted in re.findall(r"`([^`]+)`", section):
        names |= {n.strip() for n in quoted.split(",")}
    return names


def test_getting_started_lists_every_column_a_run_writes(ray_session, tmp_path):
    result = _run("round_robin", tmp_path)
    documented = _documented_columns()
    prefixes = [d[:-1] for d in documented if d.endswith("*")]
    written = set(result.rounds.columns) | set(result.metrics.columns)
    missing = sorted(
        c for c in written if c not in documented and not c.startswith(tuple(prefixes))
    )
    assert not missing, f"docs/getting_started.md does not list: {missing}"
