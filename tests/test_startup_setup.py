"""A run's set-up (issue 35): the data is built while Ray starts, no holder actor.

``Engine`` builds the federated data in a thread while ``RaySession`` starts
Ray; the star's cloud holds the dataset's ref for the client hosts, so the set-up
starts no separate data-holder actor. ``rayfl bench startup`` times these
phases by patching the engine's names: they must exist.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import rayfl.engine.engine as engine_module
from rayfl.config import load_config
from rayfl.data.federated import build_federated

pytestmark = pytest.mark.quick

QUICKSTART = "examples/quickstart.yaml"


def test_the_background_build_returns_the_same_data_as_building_it_directly():
    # Arrange
    cfg = load_config(QUICKSTART)
    # Act
    built = engine_module._DataBuild(cfg).result()
    direct = build_federated(cfg.data, seed=cfg.seed)
    # Assert: bit-identical arrays and partition
    assert np.array_equal(built.x, direct.x)
    assert np.array_equal(built.y, direct.y)
    assert np.array_equal(built.num_train, direct.num_train)
    assert built.num_clients == direct.num_clients == cfg.data.num_clients


def test_the_background_build_raises_its_error_in_the_caller(monkeypatch):
    # Arrange
    def broken(config, *, seed):
        raise FileNotFoundError("no such dataset file")

    monkeypatch.setattr(engine_module, "build_federated", broken)
    pending = engine_module._DataBuild(load_config(QUICKSTART))
    # Act / Assert
    with pytest.raises(FileNotFoundError, match="no such dataset file"):
        pending.result()


def test_the_startup_bench_patches_names_that_exist():
    # The cold run of `rayfl bench startup` wraps these to time the phases; a
    # rename would make the bench fail (or time nothing) only when it is run.
    import rayfl
    import rayfl.session
    import rayfl.star.round
    from rayfl.benchmarks import startup

    owners = {
        "rayfl.session.RaySession": rayfl.session.RaySession,
        "engine._DataBuild": engine_module._DataBuild,
        "engine": engine_module,
        "rayfl.star.round.StarRound": rayfl.star.round.StarRound,
    }
    patched = re.findall(r'timed\(([\w.]+), "(\w+)", "(\w+)"\)', startup._COLD)
    assert {phase for _, _, phase in patched} == {
        "ray_start",
        "data",
        "data_build",
        "actors",
    }
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
