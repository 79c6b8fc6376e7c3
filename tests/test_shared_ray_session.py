"""The shared Ray session of tests/conftest.py: run order and what ends a session."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import ray

from tests import conftest

pytestmark = pytest.mark.usefixtures("ray_session")  # runs in the Ray block


def _item(module: str, name: str, *fixtures: str) -> SimpleNamespace:
    return SimpleNamespace(nodeid=f"{module}::{name}", fixturenames=list(fixtures))


def test_modules_using_ray_run_last_in_file_order_each_kept_whole():
    # Arrange: a (no Ray), b (Ray from its 2nd test), c (Ray first), d (no Ray)
    items = [
        _item("a.py", "t1"),
        _item("b.py", "t1"),
        _item("b.py", "t2", "ray_session"),
        _item("c.py", "t1", "ray_session"),
        _item("c.py", "t2"),
        _item("d.py", "t1", "tmp_path"),
        _item("e.py", "t1", "ray_session"),
    ]
    # Act
    conftest.pytest_collection_modifyitems(None, None, items)
    # Assert: no-Ray modules, then Ray-later ones, then Ray-first ones
    assert [i.nodeid for i in items] == [
        "a.py::t1",
        "d.py::t1",
        "b.py::t1",
        "b.py::t2",
        "c.py::t1",
        "c.py::t2",
        "e.py::t1",
    ]


def test_a_live_actor_or_busy_cpu_ends_the_shared_session():
    @ray.remote(num_cpus=1)
    class Holder:
        def ping(self) -> int:
            return 1

    assert conftest._shared_session_running()
    holder = Holder.remote()
    ray.get(holder.ping.remote())
    left = conftest._leftovers(wait=0.0)
    assert any("Holder ALIVE" in s for s in left), left
    assert "1 CPU in use" in left
    ray.kill(holder)
    assert conftest._leftovers(wait=120.0) == []  # a busy machine is slow


def test_a_session_started_elsewhere_is_not_the_shared_one(monkeypatch):
    assert conftest._shared_session_running()
    monkeypatch.setitem(conftest._SHARED, "job", "another-job")
    assert not conftest._shared_session_running()


def test_the_shared_sessions_workers_run_one_thread_without_a_runtime_env():
    import os

    @ray.remote
    def omp() -> str | None:
        return os.environ.get("OMP_NUM_THREADS")

    assert conftest._shared_session_running()
    assert ray.get(omp.remote()) == "1"  # inherited by the raylet, not a runtime_env
    assert ray.get_runtime_context().runtime_env.get("env_vars") is None
