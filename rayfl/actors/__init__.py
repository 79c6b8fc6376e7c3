"""Ray actors: client hosts and the cloud server (thin shells over the engine).

The names are imported lazily (on first access): an actor process that
unpickles a class of one module (the data holder of ``shared_data``, the
cloud) does not import the others' dependencies (``client``: torch).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rayfl.actors.client import ClientActor, ClientHost
    from rayfl.actors.cloud import CloudServer, LinkOutcome, ServerHost
    from rayfl.actors.messages import Uploads
    from rayfl.actors.setup import ActorSetup

__all__ = [
    "ActorSetup",
    "ClientActor",
    "ClientHost",
    "CloudServer",
    "LinkOutcome",
    "ServerHost",
    "Uploads",
]

_LAZY = {
    "ActorSetup": "rayfl.actors.setup",
    "ClientActor": "rayfl.actors.client",
    "ClientHost": "rayfl.actors.client",
    "CloudServer": "rayfl.actors.cloud",
    "LinkOutcome": "rayfl.actors.cloud",
    "ServerHost": "rayfl.actors.cloud",
    "Uploads": "rayfl.actors.messages",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rayfl.actors' has no attribute {name!r}")
