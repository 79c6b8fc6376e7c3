"""Golden metrics: every case re-run must equal its recording.

The recordings (``tests/golden/data``, made by ``tests/golden/record.py``) are
the behaviour of the engine before the one-engine refactor; a change must keep
every logged column, except where it is announced and the file re-recorded.
The three cases of ``FAST_CASES`` (one per topology) run in the default suite;
the rest are ``slow`` (``pytest -m slow tests/golden``).

Everything but floats must be equal exactly (ids, schedules, counts, types,
NaN where NaN). Floats must agree to :data:`REL_TOL`: torch's float32 kernels
round differently on another CPU (on an AVX-512 machine every case differed
from the recording by at most 1.7e-6 relative, in a variance of train losses;
none by anything else). ``RAYFL_GOLDEN_EXACT=1`` compares floats bit for bit,
for a refactor checked on the recording's machine.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from tests.golden.cases import ENV_CASES, FAST_CASES, RUN_CASES, env_case, run_case

# All tests here use the shared Ray session (tests/conftest.py): the module then runs
# with the other Ray modules instead of starting Ray again at its first Ray test.
pytestmark = pytest.mark.usefixtures("ray_session")

DATA = Path(__file__).with_name("data")

#: Relative tolerance of a float (0: bit for bit, with RAYFL_GOLDEN_EXACT=1).
REL_TOL = 0.0 if os.environ.get("RAYFL_GOLDEN_EXACT") == "1" else 1e-5


def first_difference(
    expected: Any, actual: Any, path: str = "", rel_tol: float = 0.0
) -> str | None:
    """Return where ``actual`` first differs from ``expected``, or None if equal.

    Exact comparison of JSON values, except that floats may differ by
    ``rel_tol`` relative (NaN equals NaN, an infinity only itself), and a
    value's type counts (1 vs 1.0 vs True differ: a changed column dtype is a
    change). For a table column the message names the column, the row and that
    row's round when the table has a ``round`` column.
    """
    if isinstance(expected, dict) and isinstance(actual, dict):
        if list(expected) != list(actual):
            missing = [k for k in expected if k not in actual]
            extra = [k for k in actual if k not in expected]
            return f"{path or 'record'}: keys differ (missing {missing}, new {extra})"
        for key in expected:
            found = first_difference(
                expected[key], actual[key], f"{path}.{key}", rel_tol
            )
            if found is not None:
                if isinstance(expected[key], list) and isinstance(
                    expected.get("round"), list
                ):
                    # a table column: say which round the first bad row belongs to
                    row = _first_bad_index(expected[key], actual[key], rel_tol)
                    if row is not None and row < len(expected["round"]):
                        found += f" (round {expected['round'][row]})"
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return f"{path}: length {len(actual)}, recorded {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            found = first_difference(e, a, f"{path}[{i}]", rel_tol)
            if found is not None:
                return found
        return None
    if type(expected) is not type(actual):
        return f"{path}: {actual!r} ({type(actual).__name__}), recorded {expected!r} ({type(expected).__name__})"
    if isinstance(expected, float) and math.isnan(expected) and math.isnan(actual):
        return None
    if isinstance(expected, float) and math.isclose(expected, actual, rel_tol=rel_tol):
        return None
    if expected != actual:
        return f"{path}: {actual!r}, recorded {expected!r}"
    return None


def _first_bad_index(
    expected: list[Any], actual: list[Any], rel_tol: float
) -> int | None:
    for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
        if first_difference(e, a, rel_tol=rel_tol) is not None:
            return i
    return None


def _recorded(name: str) -> dict[str, Any]:
    path = DATA / f"{name}.json"
    if not path.exists():
        pytest.fail(
            f"no recording {path}; record it with "
            f"`PYTHONPATH=$PWD python -m tests.golden.record {name}`"
        )
    return json.loads(path.read_text())


def _normalised(record: dict[str, Any]) -> dict[str, Any]:
    """The record as it reads back from its file (JSON turns tuples into lists)."""
    return json.loads(json.dumps(record))


def _param(name: str) -> Any:
    marks = () if name in FAST_CASES else (pytest.mark.slow,)
    return pytest.param(name, marks=marks, id=name)


def test_every_case_has_a_recording_and_every_recording_a_case():
    recorded = {p.stem for p in DATA.glob("*.json")}
    assert recorded == set(RUN_CASES) | set(ENV_CASES)
    assert set(FAST_CASES) <= set(RUN_CASES)


def test_the_comparison_finds_a_change_and_accepts_nan():
    table = {"round": [0, 0, 1], "loss": [1.0, float("nan"), 0.5]}
    assert first_difference(table, _normalised(table)) is None
    changed = {"round": [0, 0, 1], "loss": [1.0, float("nan"), 0.5000000000000001]}
    assert (
        first_difference(table, changed)
        == ".loss[2]: 0.5000000000000001, recorded 0.5 (round 1)"
    )
    as_int = {"round": [0, 0, 1], "loss": [1, float("nan"), 0.5]}
    assert "(int), recorded 1.0 (float)" in first_difference(table, as_int)
    assert "keys differ" in first_difference(table, {"round": [0, 0, 1]})


def test_the_tolerance_admits_round_off_only_in_floats():
    table = {"round": [0, 1], "client": [3, 4], "loss": [1.0, 0.5]}
    near = {"round": [0, 1], "client": [3, 4], "loss": [1.0, 0.5 * (1 + 2e-6)]}
    assert first_difference(table, near, rel_tol=1e-5) is None
    assert first_difference(table, near, rel_tol=0.0) is not None
    far = {"round": [0, 1], "client": [3, 4], "loss": [1.0, 0.5 * (1 + 1e-4)]}
    assert first_difference(table, far, rel_tol=1e-5).startswith(".loss[1]")
    other = {"round": [0, 1], "client": [3, 5], "loss": [1.0, 0.5]}
    assert first_difference(table, other, rel_tol=1e-5).startswith(".client[1]")
    inf = {"round": [0, 1], "client": [3, 4], "loss": [math.inf, 0.5]}
    assert first_difference(inf, table, rel_tol=1e-5).startswith(".loss[0]")
    assert 0 < REL_TOL <= 1e-5 or os.environ.get("RAYFL_GOLDEN_EXACT") == "1"


@pytest.mark.parametrize("name", [_param(n) for n in RUN_CASES])
def test_run_case_equals_its_recording(name, ray_session, tmp_path):
    expected = _recorded(name)
    actual = _normalised(run_case(name, str(tmp_path)))
    difference = first_difference(expected, actual, rel_tol=REL_TOL)
    assert difference is None, f"{name}: {difference}"


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ENV_CASES))
def test_env_rollout_equals_its_recording(name, ray_session):
    expected = _recorded(name)
    actual = _normalised(env_case(name))
    difference = first_difference(expected, actual, rel_tol=REL_TOL)
    assert difference is None, f"{name}: {difference}"
