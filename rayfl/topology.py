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
    #: Keyword options of ``envs.rl.make_rl_env`` (and the ``rl`` section's
    #: fields of the same name) this topology's RL env takes besides ``mode``
    #: and ``reward``: ``controls`` (the star), ``neighbor_cost`` (D2D).
    rl_options: ClassVar[frozenset[str]] = frozenset()

    def env_entry(self, role: str) -> str:
        """Return the ``"module:attr"`` of the env in ``role`` (a key of ``envs``).

        Roles (a plug-in names the ones it has; ``rl_base`` and ``rl_scores``
        have defaults):

        | role | what the entry point is |
        |---|---|
        | ``single`` | the gym id's env class, ``(config, mode=, reward=, ...)`` |
        | ``flat`` | its ``-Flat-`` id's env class |
        | ``rl_base`` | ``(cfg, mode=, reward=, **rl_options)`` → the RL stack's base env (default: ``single``) |
        | ``rl_scores`` | ``(env, selection=)`` → scores in, features out (default: ``envs.rl:score_env``) |
        | ``lanes`` | the RL vector env over emulate lanes (``make_rl_vector_env``'s arguments) |
        | ``vector`` | the gym id's vector env (``gym.make_vec``) |
        | ``surrogate`` | the surrogate dynamics of ``mode="surrogate"`` |
        | ``policies`` | ``(env, name, **params)`` → one policy per decision unit, as one callable |
        | ``multiagent`` | a PettingZoo parallel env, one agent per decision unit |

        Raises:
            ValueError: If this topology has no env in ``role``.
        """
        defaults = {"rl_base": "single", "rl_scores": None}
        if role in self.envs:
            return self.envs[role]
        if role in defaults:
            fallback = defaults[role]
            return self.envs[fallback] if fallback else "envs.rl:score_env"
        raise ValueError(
            f"topology.kind={self.name} has no {role!r} env "
            f"(it has: {', '.join(sorted(self.envs)) or 'none'})"
        )

    def rl_meta(self, cfg: Any) -> dict[str, Any]:
        """How the learned scheduler's scores become a decision on ``cfg``.

        Returns:
            ``selection``: ``"top_k"`` (the K highest eligible scores) or
            ``"positive"`` (every eligible positive score, at most K);
            ``num_subchannels``: K of one decision (None: one per client).
        """
        where = cfg.wireless if cfg.wireless is not None else cfg.topology
        count = getattr(where, "num_subchannels", None)
        return {
            "selection": "top_k",
            "num_subchannels": None if count is None else int(count),
        }

    def check_lanes(self, cfg: Any) -> None:
        """Raise a one-line ``ValueError`` if emulate lanes cannot run ``cfg``.

        Lanes (E FL runs stepping together on shared client hosts, the
        ``lanes`` env) exist only where the plug-in names a ``lanes`` env and
        overrides this check; the default refuses.
        """
        raise ValueError(f"lanes need a topology with lanes, got {cfg.topology.kind}")

    def learned_controls(self, cfg: Any) -> dict[str, float]:
        """The per-client controls a learned policy sets here (``rl.controls``).

        Returns:
            Each control's name → its configured value, around which the
            network's output is decoded; the default: none.
        """
        return {}

    def check_train(self, cfg: Any) -> None:
        """Raise a one-line ``ValueError`` if ``rayfl train-policy`` cannot train ``cfg``.

        The default accepts every config of this topology.
        """

    # ------------------------------------------------------------- benchmarks
