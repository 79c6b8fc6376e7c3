"""A run's set-up (issue 35): digits without sklearn, no data-holder actor.

The digits are read from scikit-learn's shipped file without importing sklearn
(the same arrays as ``load_digits``); the star's cloud holds the dataset's ref
for the client hosts, so the set-up starts no separate data-holder actor.
``rayfl bench startup`` times the phases by patching the engine's names: they
must exist.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rayfl.config import load_config
from rayfl.data.datasets import _sklearn_digits

pytestmark = pytest.mark.quick

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = str(ROOT / "examples" / "quickstart.yaml")


def test_digits_read_without_sklearn_are_sklearns_load_digits():
    # Oracle: scikit-learn's own loader, on the same shipped file.
    from sklearn.datasets import load_digits

    # Act
    images, target = _sklearn_digits()
    # Assert
    expected = load_digits()
    assert images.dtype == expected.images.dtype
    assert np.array_equal(images, expected.images)
    assert np.array_equal(target, expected.target)


def test_building_the_quickstart_data_imports_no_sklearn():
    # `import sklearn` (with scipy.stats) was ~0.8 s of the quickstart's set-up.
    code = """
import json, sys
from rayfl.config import load_config
from rayfl.data.federated import build_federated
cfg = load_config("examples/quickstart.yaml")
data = build_federated(cfg.data, seed=cfg.seed)
print(json.dumps({"clients": data.num_clients, "sklearn": "sklearn" in sys.modules}))
"""
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "clients": 20,
        "sklearn": False,
    }


def test_the_startup_bench_patches_names_that_exist():
    # The cold run of `rayfl bench startup` wraps these to time the phases; a
    # rename would make the bench fail (or time nothing) only when it is run.
    import rayfl
    import rayfl.cluster.session
    import rayfl.engine.engine as engine
    import rayfl.star.round
    from rayfl.benchmarks import startup

    owners = {
        "rayfl.cluster.session.RaySession": rayfl.cluster.session.RaySession,
        "engine": engine,
        "rayfl.star.round.StarRound": rayfl.star.round.StarRound,
    }
    patched = re.findall(r'timed\(([\w.]+), "(\w+)", "(\w+)"\)', startup._COLD)
    assert {phase for _, _, phase in patched} == {"ray_start", "data", "actors"}
    for owner, name, _ in patched:
        assert callable(getattr(owners[owner], name)), f"{owner}.{name}"
    assert callable(rayfl.run)


def test_a_star_run_starts_no_data_holder_and_its_hosts_read_the_data(ray_session):
    import ray

    from rayfl.engine import build_system

    cfg = load_config(QUICKSTART, {"data.num_clients": 4, "rounds": 1})
    system = build_system(cfg)
    try:
        # the cloud holds the dataset's ref: no holder actor of the pool's
        assert system.pool.data_holder is None
        names = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)}
        run_names = [n for n in names if n.startswith(f"rayfl-{system.pool.run_id}")]
        assert f"rayfl-{system.pool.run_id}-cloud" in run_names
        assert not any(n.endswith("-data") for n in run_names)
        # every client host has the data: each evaluates its clients
        evals = system.evaluate()
        assert [e["client"] for e in evals] == [0, 1, 2, 3]
        assert np.isfinite([e["test_loss"] for e in evals]).all()
    finally:
        system.close()


def test_shared_data_waits_for_a_holder_created_after_the_reader(ray_session):
    # the star creates its cloud (the holder) after the client hosts that read it
    import threading

    from rayfl.actors.shared_data import DataHolder, SharedData, hold_data

    name = f"rayfl-test-holder-{os.getpid()}"
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(SharedData(name).get(30.0)))
    reader.start()
    reader.join(0.5)
    assert reader.is_alive() and not got  # waiting: no holder of that name yet
    holder = DataHolder.options(name=name).remote(hold_data({"x": [1, 2, 3]}))  # type: ignore[arg-type]
    try:
        reader.join(30)
        assert got == [{"x": [1, 2, 3]}]
    finally:
        import ray

        ray.kill(holder)


def test_shared_data_without_its_holder_fails_after_the_wait(ray_session):
    from rayfl.actors.shared_data import SharedData

    with pytest.raises(ValueError):
        SharedData(f"rayfl-no-such-holder-{os.getpid()}").get(0.3)
