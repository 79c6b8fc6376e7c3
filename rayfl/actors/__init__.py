"""Ray actors: client hosts and the cloud server (thin shells over the engine)."""

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
