"""An interrupted run names the signal it received (SIGTERM is not "SIGINT").

Ray turns a KeyboardInterrupt raised while it waits (``ray.get``) into a bare
KeyboardInterrupt, so the exception type alone cannot tell SIGTERM from Ctrl-C:
the signal handler records what came.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
import ray

import rayfl
from rayfl.cluster import session
from rayfl.rundir.status import RunInterrupted, interrupt_signals, signal_message

BASE = {
    "name": "signal",
    "rounds": 3,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"kind": "mlr"},
    "algorithm": {"local_steps": 2, "batch_size": 16, "lr": 0.1},
    "ray": {"num_cpus": 2, "clients_per_actor": 2},
    "output": {"progress": False, "plots": False},
}


@ray.remote
def _wait(seconds: float) -> None:
    time.sleep(seconds)


def _sigterm_soon() -> None:
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM)).start()


@pytest.mark.slow  # starts Ray in a subprocess and waits for it
def test_sigterm_while_ray_waits_is_reported_as_sigterm(
    ray_session, tmp_path, monkeypatch
):
    from rayfl.engine import Engine

    # Arrange: SIGTERM arrives while the driver waits in ray.get in round 1
    run_round = Engine.run_round

    def terminated(self, t, *args, **kwargs):
        if t == 1:
            _sigterm_soon()
            ray.get(_wait.remote(5.0))
        return run_round(self, t, *args, **kwargs)

    monkeypatch.setattr(Engine, "run_round", terminated)
    # Act
    with pytest.raises(RunInterrupted) as info:
        rayfl.run(BASE, {"output.dir": str(tmp_path)})
    # Assert
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert summary["error"]["message"] == "the driver received SIGTERM"
    assert summary["error"]["type"] == "RunInterrupted"
    assert summary["error"]["round"] == 1
    assert "the driver received SIGTERM" in str(info.value)


def test_sigterm_during_set_up_is_an_interrupt_naming_it(tmp_path, monkeypatch):
    import rayfl.runner

    def terminated_build(cfg):
        _sigterm_soon()
        time.sleep(30)  # the handler raises out of the sleep

    monkeypatch.setattr(rayfl.runner, "build_system", terminated_build)
    with pytest.raises(RunInterrupted) as info:
        rayfl.run(BASE, {"output.dir": str(tmp_path)})
    assert str(info.value) == (
        "run interrupted during set-up: the driver received SIGTERM"
    )
    assert info.value.run_dir is None
    assert list(tmp_path.iterdir()) == []  # nothing ran: no run directory
    assert signal.getsignal(signal.SIGTERM) is not None  # restored


def test_the_handler_is_restored_and_names_the_signal():
    before = signal.getsignal(signal.SIGTERM)
    with (
        pytest.raises(RunInterrupted, match="received SIGTERM"),
        interrupt_signals() as received,
    ):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    assert received == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) == before
    assert signal_message(signal.SIGINT) == "the driver received SIGINT (Ctrl-C)"


def test_ray_start_up_keeps_the_callers_sigterm_handler(monkeypatch):
    # ray.init installs its own SIGTERM handler (sys.exit); a run's stays
    def ray_like_init(**kwargs):
        signal.signal(signal.SIGTERM, lambda *a: None)

    def mine(signum, frame):
        raise RunInterrupted()

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        session._init_keeping_sigterm(ray_like_init)
        assert signal.getsignal(signal.SIGTERM) is mine
        # without a handler of the caller's (the default action), Ray's stays
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        session._init_keeping_sigterm(ray_like_init)
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)
