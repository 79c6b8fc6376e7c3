"""Kill an actor and wait until Ray has restarted it, for the fault tests.

``ray.kill`` returns before the actor dies: a call submitted right after it can
still run on the old process (seen under load), and the round the test expects
to lose then succeeds. Waiting until the actor answers from a restarted process
(its state marked lost, ``rayfl.actors.restart``) makes the next round's loss
certain: the restarted host refuses it until its state is restored.
"""

from __future__ import annotations

import time
from typing import Any

import ray


def _state_lost(host: Any) -> bool:
    return bool(host.__dict__.get("_state_lost", False))


def kill_until_restarted(actor: Any, timeout_s: float = 60.0) -> None:
    """``ray.kill(actor, no_restart=False)``, then wait for the restarted actor."""
    ray.kill(actor, no_restart=False)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if ray.get(actor.__ray_call__.remote(_state_lost), timeout=5):
                return
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            pass
        assert time.monotonic() < deadline, "the actor did not restart"
        time.sleep(0.2)
