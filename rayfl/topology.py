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
    # (``rayfl bench``.) Capabilities read here: ``fits_surrogate`` (its
    # scenarios train the surrogate's fit, ``rayfl bench fit-surrogate``) and
    # ``tunes_config`` (``constant_tuned``'s constants are config keys).
    #: Action parts the benchmark's env offers (``rayfl bench policies``);
    #: None: :attr:`action_parts`.
    bench_parts: ClassVar[frozenset[str] | None] = None
    #: Keyword arguments of the benchmark's env (the ``single`` env of :attr:`envs`).
    bench_env_options: ClassVar[Mapping[str, Any]] = {}
    #: Parameters of the benchmark's ``learned_untrained`` baseline, beside
    #: ``untrained=True`` (e.g. the selection rule its policies are trained with).
    untrained_params: ClassVar[Mapping[str, Any]] = {}

    def scenarios(self) -> Mapping[str, tuple[Any, ...]]:
        """Return the benchmark's scenarios: name → ``(size, config[, breaks])``.

        ``size`` is ``small``, ``medium`` or ``large``; ``config`` a run config
        (a dict whose ``topology.kind`` is this topology); ``breaks`` says what
        the scenario stresses beyond the heuristics' assumptions. Names are
        unique over every topology (``<topology>-<size>[-variant]``). Default:
        none.
        """
        return {}

    def tunable_constants(self, cfg: Any) -> dict[str, tuple[float, float, float]]:
        """Return what the ``constant_tuned`` baseline tunes: {name: (configured, low, high)}.

        Names are the env's control names (the ``controls`` action, held
        constant), or dotted config keys when ``"tunes_config"`` is one of
        :attr:`capabilities`. Default: nothing (no ``constant_tuned`` row).
        """
        return {}

    def bench_policy(
        self, env: Any, cfg: Any, name: str, params: Mapping[str, Any], mode: str
    ) -> Any:
        """Build policy ``name`` for the benchmark's reset ``env``, as a run would.

        Args:
            env: The benchmark's env (reset; in emulate mode it holds the system).
            cfg: The scenario's run config.
            name: A registered policy name.
            params: The policy's parameters.
            mode: ``surrogate`` or ``emulate``.

        Returns:
            The policy, or None (the default): the benchmark builds it with
            :func:`rayfl.registry.build_policy` on ``env``'s spaces.
        """
        return None
