"""A restarted actor refuses work until its clients' state is back.

Ray restarts a dead actor (``ray.max_actor_restarts``) by running its
constructor again: the clients it hosts start over from empty state. When the
restart completes before the driver's next call, Ray delivers that call to the
fresh actor and it would succeed — silently on lost state (personal models,
counters, generators). :func:`needs_state` makes such a call raise
:class:`StateLost` instead, until ``set_state`` (or ``reset``) gives the actor
its state back; :meth:`rayfl.actors.pool.ActorPool.gather` treats it like a dead
actor (the call's results are lost and the actor is restored before the next
call), so a restart never passes for a normal round, whatever its timing.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import ray

__all__ = [
    "LOST_CALL",
    "StateLost",
    "mark_restarted",
    "needs_state",
    "state_restored",
]

F = TypeVar("F", bound=Callable[..., Any])


class StateLost(RuntimeError):
    """An actor restarted by Ray was called before its state was restored."""


#: The errors that mean an actor call's result is lost: the actor died, or Ray
#: restarted it and it refused the call (``ray.get`` raises ``StateLost``
#: wrapped in a ``RayTaskError`` that is also a ``StateLost``).
LOST_CALL = (ray.exceptions.RayActorError, StateLost)


def mark_restarted(actor: Any) -> None:
    """In an actor's constructor: remember whether Ray restarted this actor.

    Outside a Ray actor (a host built in-process, as tests do) it never was.
    """
    try:
        with warnings.catch_warnings():  # Ray's property reads its own deprecated API
            warnings.simplefilter("ignore")
            restarted = ray.get_runtime_context().was_current_actor_reconstructed
    except (AssertionError, RuntimeError):  # not a Ray worker process
        restarted = False
    actor._state_lost = bool(restarted)


def state_restored(actor: Any) -> None:
    """The actor's state is back (``set_state``) or deliberately new (``reset``)."""
    actor._state_lost = False


def needs_state(method: F) -> F:
    """Decorate an actor method that reads or returns its clients' state."""

    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.__dict__.get("_state_lost"):
            raise StateLost(
                f"{type(self).__name__}.{method.__name__}: this actor was restarted "
                "and has not had its clients' state back yet"
            )
        return method(self, *args, **kwargs)

    return guarded  # type: ignore[return-value]
