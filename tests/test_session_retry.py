"""RaySession retries Ray's start-up timeout, and only that error."""

from __future__ import annotations

import pytest

from rayfl import session


class _FlakyInit:
    def __init__(self, failures: int, message: str) -> None:
        self.failures, self.message, self.calls = failures, message, []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        if len(self.calls) <= self.failures:
            raise Exception(self.message)


@pytest.fixture(autouse=True)
def _no_sleep_or_shutdown(monkeypatch):
    monkeypatch.setattr(session.time, "sleep", lambda s: None)
    monkeypatch.setattr(session.ray, "shutdown", lambda: None)


def test_startup_timeout_is_retried_with_the_same_arguments():
    init = _FlakyInit(2, "The current node timed out during startup. This could ...")
    session._init_with_retries(init, attempts=3, num_cpus=2)
    assert init.calls == [{"num_cpus": 2}] * 3


def test_gives_up_after_the_last_attempt():
    init = _FlakyInit(5, "The current node timed out during startup.")
    with pytest.raises(Exception, match="timed out during startup"):
        session._init_with_retries(init, attempts=2)
    assert len(init.calls) == 2


def test_other_errors_are_not_retried():
    init = _FlakyInit(1, "bad argument")
    with pytest.raises(Exception, match="bad argument"):
        session._init_with_retries(init, attempts=3)
    assert len(init.calls) == 1
