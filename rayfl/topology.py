"""The plug-in contract of a topology: :class:`TopologyPlugin`.

A topology (the star, the hierarchy, D2D, or one a user writes) is one class
deriving from :class:`TopologyPlugin`, named by one line of
:data:`rayfl.registry.TOPOLOGIES` (or :func:`rayfl.registry.register_topology`
at run time). Everything the rest of rayfl asks of a topology is a member here:
its config section, its engine strategy, its deciders, its observation keys and
action parts, its envs, its checks and its benchmark scenarios. No module
outside a topology's own folder compares against a topology's name; it asks
the plug-in instead (``topology_of(cfg).<member>``).

This module is light (no torch, no Ray, no gymnasium): config validation reads
the plug-ins' data members, and hooks import what they need when called.

Example:
    >>> from rayfl.registry import topology_of
    >>> topology_of("star").default_policy
    'all'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

__all__ = ["TopologyPlugin"]


class TopologyPlugin:
    """Base class of a topology plug-in; subclass it and set the data members.

    Data members (class attributes):

    | member | meaning |
    |---|---|
    | ``name`` | the value of ``topology.kind`` |
    | ``aliases`` | other accepted spellings of ``topology.kind`` (older configs) |
    | ``config`` | the ``topology:`` section model (a pydantic model with ``kind``) |
    | ``default_policy`` | ``scheduler.policy`` when the config names none |
    | ``removed_fields`` | topology fields that once named the policy (refused) |
    | ``observation_keys`` | the keys of a unit's observation (:mod:`rayfl.observation`) |
    | ``action_parts`` | the action parts a policy may fill here |
    | ``envs`` | env entry points by role: ``single``, ``flat``, ``rl_base``, ``lanes``, ``surrogate``... |
    | ``capabilities`` | optional features, e.g. ``keeps_warm`` |

    Hooks are methods; the default of each is what most topologies want.
    """

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    config: ClassVar[type[Any]]
    default_policy: ClassVar[str]
    removed_fields: ClassVar[tuple[str, ...]] = ()
    observation_keys: ClassVar[tuple[str, ...]]
    action_parts: ClassVar[frozenset[str]]
    envs: ClassVar[Mapping[str, str]] = {}
    capabilities: ClassVar[frozenset[str]] = frozenset()

    def __repr__(self) -> str:
        return f"<topology {self.name!r}>"

    # ------------------------------------------------------------ engine, runner
    def strategy(self) -> Any:
        """Return a new engine strategy (a :class:`rayfl.system.RoundStrategy`)."""
        raise NotImplementedError(f"topology {self.name!r} has no engine strategy")

    # -------------------------------------------------------------------- config

    # ------------------------------------------------------------ envs and RL

    # ------------------------------------------------------------- benchmarks
