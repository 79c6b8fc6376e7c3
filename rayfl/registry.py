"""The one registry of scheduling policies (and envs): name → ``"module:Class"``.

The registry holds strings, so importing it imports no policy: :func:`policy_class`
imports the one module it needs. ``policies.POLICIES`` is this same dict, and
every config field that names a policy reads it (through
:func:`rayfl.names.policy_names`).

Each policy class declares where it applies (see :class:`policies.base.Policy`):

| attribute | meaning |
|---|---|
| ``topologies`` | the values of ``topology.kind`` it is meant for |
| ``required_keys`` | observation keys it reads (:mod:`rayfl.observation`) |
| ``action_parts`` | action parts it can fill; one of ``participants``/``assignment`` must be offered, every other one it lists too |
| ``optional_parts`` | parts it fills when offered and does without otherwise |

:func:`check_policy` compares those declarations with a topology and says in
one line why a policy cannot run there.

Example:
    >>> policy_class("best_channel").__name__
    'BestChannelPolicy'
    >>> check_policy("learned", topology="d2d")
    Traceback (most recent call last):
    ...
    ValueError: scheduler.policy=learned reads 'loss', which only topology.kind=star or hierarchical observe; got d2d
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

from rayfl.observation import ACTION_PARTS, TOPOLOGIES, TOPOLOGY_KEYS, TOPOLOGY_PARTS

__all__ = [
    "ENVS",
    "PARTICIPANT_RULES",
    "POLICIES",
    "check_policy",
    "load",
    "make_policy",
    "policy_class",
    "register_policy",
    "registered_names",
]

#: Registered policies: name → ``"module:Class"`` of a ``policies.base.Policy``.
POLICIES: dict[str, str] = {
    "all": "policies.all_clients:AllClientsPolicy",
    "random": "policies.random:RandomPolicy",
    "round_robin": "policies.round_robin:RoundRobinPolicy",
    "uniform": "policies.uniform:UniformPolicy",
    "proportional_fair": "policies.proportional_fair:ProportionalFairPolicy",
    "best_channel": "policies.best_channel:BestChannelPolicy",
    "age_based": "policies.age_based:AgeBasedPolicy",
    "delay_min": "policies.delay_min:DelayMinPolicy",
    "minmax": "policies.minmax:MinMaxPolicy",
    "non_adjustment": "policies.minmax:NonAdjustmentPolicy",
    "channel_threshold": "policies.channel_threshold:ChannelThresholdPolicy",
    "lyapunov": "policies.lyapunov:LyapunovPolicy",
    "learned": "policies.learned:LearnedPolicy",
    "random_neighbors": "policies.random_neighbors:RandomNeighborsPolicy",
}

#: Registered policies that choose a client set only (action part
#: ``participants``): the engine gives the subchannels itself. Fields that need a
#: subchannel assignment (D2D selection) leave them out.
PARTICIPANT_RULES: tuple[str, ...] = ("all", "uniform")

#: Environments by topology: name → ``"module:attribute"``, loaded with :func:`load`.
ENVS: dict[str, str] = {
    "star": "envs.scheduling:WirelessFLEnv",
    "hierarchical": "envs.hierarchical:HierarchicalSchedulingEnv",
    "d2d": "envs.d2d:D2DNeighborEnv",
    "rl": "envs.rl:make_rl_env",
}

_MODULE_CACHE: dict[str, Any] = {}


def _split(entry_point: str) -> tuple[str, str]:
    module, _, attribute = entry_point.partition(":")
    if not module or not attribute:
        raise ValueError(
            f"entry_point must look like 'module:Class', got {entry_point!r}"
        )
    return module, attribute


def load(entry_point: str) -> Any:
    """Import ``"package.module:attribute"`` and return the attribute.

    Raises:
        ValueError: If ``entry_point`` is not of the form ``"module:attribute"``.
        ImportError, AttributeError: If the module or attribute does not exist.

    Example:
        >>> load("rayfl.observation:CORE_KEYS")[0]
        'channel_gain'
    """
    module, attribute = _split(entry_point)
    if module not in _MODULE_CACHE:
        _MODULE_CACHE[module] = importlib.import_module(module)
    return getattr(_MODULE_CACHE[module], attribute)


def register_policy(name: str, entry_point: str, *, force: bool = False) -> None:
    """Register a policy under ``name``.

    Args:
        name: Registry name, e.g. ``"my_policy"``.
        entry_point: ``"package.module:ClassName"`` of a ``policies.base.Policy``
            subclass.
        force: Replace an existing entry instead of raising.

    Raises:
        ValueError: If ``name`` is taken (and not ``force``) or ``entry_point``
            is not of the form ``"module:Class"``.

    Example:
        >>> register_policy("random", "policies.random:RandomPolicy")
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: policy 'random' is already registered as ...
    """
    _split(entry_point)
    if name in POLICIES and not force:
        raise ValueError(
            f"policy {name!r} is already registered as {POLICIES[name]!r}; "
            "pass force=True to replace it"
        )
    POLICIES[name] = entry_point


def registered_names() -> list[str]:
    """Return the names in the registry, sorted (imports no policy module).

    Example:
        >>> "best_channel" in registered_names()
        True
    """
    return sorted(POLICIES)


def policy_class(name: str) -> type:
    """Import and return the class registered under ``name``.

    Raises:
        ValueError: If ``name`` is unknown (the message lists the known names).
    """
    if name not in POLICIES:
        raise ValueError(
            f"unknown policy {name!r}; known policies: {', '.join(sorted(POLICIES))}"
        )
    cls: type = load(POLICIES[name])
    return cls


def make_policy(
    name: str, env_or_spaces: Any = None, *, context: Any = None, **params: Any
) -> Any:
    """Build the registered policy ``name`` for an env's spaces.

    Args:
        name: A key of :data:`POLICIES`.
        env_or_spaces: An env (its ``observation_space`` and ``action_space`` are
            used) or an ``(observation_space, action_space)`` tuple. If None, pass
            ``observation_space=`` and ``action_space=`` in ``params``.
        context: A :class:`rayfl.observation.SystemContext` (run constants the
            policy fills its unset parameters from), or None.
        **params: The policy's own parameters, e.g. ``window=20`` for
            ``proportional_fair``.

    Returns:
        The policy, already ``reset()`` with fresh entropy; call ``reset(seed)``.

    Raises:
        ValueError: If ``name`` is unknown (the message lists the known names) or
            the spaces are missing.
    """
    cls = policy_class(name)
    if env_or_spaces is None:
        if "observation_space" not in params or "action_space" not in params:
            raise ValueError(
                "make_policy needs an env, an (observation_space, action_space) tuple, "
                "or observation_space= and action_space= keywords"
            )
        observation_space = params.pop("observation_space")
        action_space = params.pop("action_space")
    elif isinstance(env_or_spaces, tuple):
        if len(env_or_spaces) != 2:
            raise ValueError(
                "expected (observation_space, action_space), "
                f"got {len(env_or_spaces)} items"
            )
        observation_space, action_space = env_or_spaces
    else:
        observation_space = env_or_spaces.observation_space
        action_space = env_or_spaces.action_space
    if context is not None:
        params["context"] = context
    return cls(observation_space, action_space, **params)


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(repr(n) for n in names)


def check_policy(
    name: str,
    *,
    topology: str,
    keys: Iterable[str] | None = None,
    parts: Iterable[str] | None = None,
    field: str = "scheduler.policy",
) -> None:
    """Raise a one-line ``ValueError`` if policy ``name`` cannot run on ``topology``.

    Checks, in order: the topology is one the class declares; every key it
    reads is observed; one of its client-choice parts (``participants``,
    ``assignment``) and every other part it needs are offered. When the topology
    is not declared, the message gives the first reason found (a missing key or
    part) or, failing one, the declared topologies.

    Args:
        name: A registered policy name.
        topology: ``topology.kind`` of the run.
        keys: Observation keys the run offers (default: the topology's
            :data:`rayfl.observation.TOPOLOGY_KEYS`).
        parts: Action parts the run offers (default: the topology's
            :data:`rayfl.observation.TOPOLOGY_PARTS`).
        field: Config field named in the message.

    Raises:
        ValueError: If ``name`` or ``topology`` is unknown, or the policy cannot
            run there.
    """
    if topology not in TOPOLOGIES:
        raise ValueError(
            f"topology.kind must be one of {_quoted(TOPOLOGIES)}; got {topology!r}"
        )
    cls: Any = policy_class(name)
    offered_keys = set(TOPOLOGY_KEYS[topology] if keys is None else keys)
    offered = set(TOPOLOGY_PARTS[topology] if parts is None else parts)
    head = f"{field}={name}"
    where = f"topology.kind={topology}"
    missing_keys = [k for k in cls.required_keys if k not in offered_keys]
    if missing_keys:
        key = missing_keys[0]
        observers = [t for t in TOPOLOGIES if key in TOPOLOGY_KEYS[t]]
        if topology in observers or not observers:
            raise ValueError(
                f"{head} reads {key!r}, which this {where} run does not observe"
            )
        verb = "observes" if len(observers) == 1 else "observe"
        raise ValueError(
            f"{head} reads {key!r}, which only "
            f"topology.kind={' or '.join(observers)} {verb}; got {topology}"
        )
    offers = _quoted(p for p in ACTION_PARTS if p in offered) or "nothing"
    needed = set(cls.action_parts)
    choice = sorted(needed & {"participants", "assignment"})
    if choice and not offered.intersection(choice):
        raise ValueError(
            f"{head} needs action part {' or '.join(map(repr, choice))}; {where} offers {offers}"
        )
    missing_parts = sorted(needed - set(choice) - offered)
    if missing_parts:
        raise ValueError(
            f"{head} needs action part {_quoted(missing_parts)}; {where} offers {offers}"
        )
    if topology not in cls.topologies:
        declared = ", ".join(t for t in TOPOLOGIES if t in cls.topologies)
        raise ValueError(
            f"{head} is meant for topology.kind={declared}; got {topology}"
        )
