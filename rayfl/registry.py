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
one line why a policy cannot run there. :func:`check_params` checks a policy's
parameters (``scheduler.params``) against its constructor's keyword arguments
(names and types), so a misspelt or mistyped parameter is a config error.

Example:
    >>> policy_class("best_channel").__name__
    'BestChannelPolicy'
    >>> check_policy("minmax", topology="d2d")
    Traceback (most recent call last):
    ...
    ValueError: scheduler.policy=minmax is meant for topology.kind=star; got d2d
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from rayfl.observation import ACTION_PARTS
from rayfl.topology import TopologyPlugin

__all__ = [
    "POLICIES",
    "RL_ENV",
    "TOPOLOGIES",
    "LEARNED_POLICY",
    "build_policy",
    "client_set_only",
    "lineage",
    "check_params",
    "check_policy",
    "load",
    "make_policy",
    "policy_class",
    "policy_parameters",
    "register_policy",
    "register_topology",
    "registered_names",
    "topology_names",
    "topology_of",
]

#: Registered topologies: ``topology.kind`` → ``"module:Class"`` of a
#: :class:`rayfl.topology.TopologyPlugin`. One line per topology.
TOPOLOGIES: dict[str, str] = {
    "star": "rayfl.star.plugin:Star",
    "hierarchical": "rayfl.hierarchy.plugin:Hierarchy",
    "d2d": "rayfl.d2d.plugin:D2D",
}

#: Registered policies: name → ``"module:Class"`` of a ``policies.base.Policy``.
POLICIES: dict[str, str] = {
    "all": "policies.all_clients:AllClientsPolicy",
    "random": "policies.random:RandomPolicy",
    "round_robin": "policies.round_robin:RoundRobinPolicy",
    "uniform": "policies.uniform:UniformPolicy",
    "proportional_fair": "policies.proportional_fair:ProportionalFairPolicy",
    "best_channel": "policies.best_channel:BestChannelPolicy",
    "age_based": "policies.age_based:AgeBasedPolicy",
    "deadline_max_weight": "policies.deadline_max_weight:DeadlineMaxWeightPolicy",
    "data_weighted": "policies.data_weighted:DataWeightedPolicy",
    "delay_min": "policies.delay_min:DelayMinPolicy",
    "minmax": "policies.minmax:MinMaxPolicy",
    "non_adjustment": "policies.minmax:NonAdjustmentPolicy",
    "channel_threshold": "policies.channel_threshold:ChannelThresholdPolicy",
    "lyapunov": "policies.lyapunov:LyapunovPolicy",
    "learned": "policies.learned:LearnedPolicy",
    "random_neighbors": "policies.random_neighbors:RandomNeighborsPolicy",
}

#: The policy ``rayfl train-policy`` produces (a trained network's checkpoint).
LEARNED_POLICY = "learned"

#: The RL-ready env of any topology (``make_rl_env``), loaded with :func:`load`.
#: Each topology's own envs are its plug-in's ``envs`` (by role).
RL_ENV = "envs.rl:make_rl_env"

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


def register_topology(name: str, entry_point: str, *, force: bool = False) -> None:
    """Register a topology plug-in under ``name`` (its ``topology.kind``).

    Args:
        name: The plug-in's ``name``, e.g. ``"ring"``.
        entry_point: ``"package.module:Class"`` of a
            :class:`rayfl.topology.TopologyPlugin` subclass.
        force: Replace an existing entry instead of raising.

    Raises:
        ValueError: If ``name`` is taken (and not ``force``) or ``entry_point``
            is not of the form ``"module:Class"``.
    """
    _split(entry_point)
    if name in TOPOLOGIES and not force:
        raise ValueError(
            f"topology {name!r} is already registered as {TOPOLOGIES[name]!r}; "
            "pass force=True to replace it"
        )
    TOPOLOGIES[name] = entry_point
    _PLUGINS.pop(name, None)


_PLUGINS: dict[str, TopologyPlugin] = {}


def topology_names() -> tuple[str, ...]:
    """Return the registered topologies' names, in registration order.

    Example:
        >>> topology_names()[:3]
        ('star', 'hierarchical', 'd2d')
    """
    return tuple(TOPOLOGIES)


def lineage(plugin: TopologyPlugin) -> tuple[str, ...]:
    """Return the names a plug-in answers to: its own, then its parents'.

    A policy declared for a topology runs on the topologies derived from it
    (a plug-in subclassing :class:`rayfl.star.plugin.Star` takes the star's
    policies).

    Example:
        >>> lineage(topology_of("d2d"))
        ('d2d',)
    """
    names = [
        vars(klass)["name"]
        for klass in type(plugin).__mro__
        if isinstance(vars(klass).get("name"), str)
    ]
    return tuple(dict.fromkeys(names))


def topology_of(kind: Any) -> TopologyPlugin:
    """Return the plug-in of a topology: by name, alias, or a run config.

    Args:
        kind: A ``topology.kind`` value (a name or an alias such as ``"flat"``),
            a ``topology`` section, or a run config.

    Raises:
        ValueError: If no registered topology has that name or alias.

    Example:
        >>> topology_of("flat").name
        'star'
    """
    if not isinstance(kind, str):
        kind = getattr(kind, "topology", kind).kind
    if kind in TOPOLOGIES:
        if kind not in _PLUGINS:
            _PLUGINS[kind] = load(TOPOLOGIES[kind])()
        return _PLUGINS[kind]
    for name in TOPOLOGIES:
        plugin = topology_of(name)
        if kind in plugin.aliases:
            return plugin
    raise ValueError(
        f"topology.kind must be one of {_quoted(TOPOLOGIES)}; got {kind!r}"
    )


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


def policy_class(name: str) -> type[Any]:
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


def client_set_only(name: str) -> bool:
    """Return True if policy ``name`` chooses a client set only (no subchannels).

    Read from its declaration (``action_parts == {"participants"}``).

    Example:
        >>> client_set_only("all"), client_set_only("round_robin")
        (True, False)
    """
    return frozenset(policy_class(name).action_parts) == {"participants"}


def build_policy(
    name: str,
    env_or_spaces: Any = None,
    *,
    topology: str | None = None,
    params: Mapping[str, Any] | None = None,
    context: Any = None,
    seed: int | None = None,
) -> Any:
    """Build policy ``name`` for a topology and an env: the one builder rayfl uses.

    Args:
        name: A registered policy name.
        env_or_spaces: An env or an ``(observation_space, action_space)`` tuple
            (as :func:`make_policy`).
        topology: The run's ``topology.kind``; when given, the policy is first
            checked against it (:func:`check_policy`).
        params: The policy's own parameters (``scheduler.params``).
        context: A :class:`rayfl.observation.SystemContext`, or None.
        seed: When given, the policy is ``reset(seed)``.

    Returns:
        The policy.
    """
    if topology is not None:
        check_policy(name, topology=topology)
    policy = make_policy(name, env_or_spaces, context=context, **dict(params or {}))
    if seed is not None:
        policy.reset(seed)
    return policy


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
            ``observation_keys``).
        parts: Action parts the run offers (default: the topology's
            ``action_parts``).
        field: Config field named in the message.

    Raises:
        ValueError: If ``name`` or ``topology`` is unknown, or the policy cannot
            run there.
    """
    plugin = topology_of(topology)
    topology = plugin.name
    cls: Any = policy_class(name)
    offered_keys = set(plugin.observation_keys if keys is None else keys)
    offered = set(plugin.action_parts if parts is None else parts)
    head = f"{field}={name}"
    where = f"topology.kind={topology}"
    missing_keys = [k for k in cls.required_keys if k not in offered_keys]
    if missing_keys:
        key = missing_keys[0]
        observers = [t for t in TOPOLOGIES if key in topology_of(t).observation_keys]
        if key in plugin.observation_keys or not observers:
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
    if not set(lineage(plugin)) & set(cls.topologies):
        declared = ", ".join(t for t in TOPOLOGIES if t in cls.topologies)
        raise ValueError(
            f"{head} is meant for topology.kind={declared}; got {topology}"
        )


#: Constructor arguments that are not the policy's own parameters.
_NOT_PARAMS = frozenset({"self", "observation_space", "action_space", "context"})
_PARAM_MODELS: dict[type, Any] = {}


def _annotations(init: Any) -> dict[str, Any]:
    """The resolved annotations of ``init`` (Any where one cannot be resolved)."""
    try:
        return typing.get_type_hints(init, include_extras=True)
    except Exception:  # an annotation names something only a type checker sees
        hints: dict[str, Any] = {}
        for key, text in getattr(init, "__annotations__", {}).items():
            try:
                hints[key] = (
                    eval(text, init.__globals__) if isinstance(text, str) else text
                )
            except Exception:
                hints[key] = Any
        return hints


def policy_parameters(name: str) -> dict[str, tuple[Any, Any]]:
    """Return the parameters policy ``name`` accepts: name → (type, default).

    Read from the class's ``__init__`` (every argument but the spaces and
    ``context``), following ``**kwargs`` to the parent's ``__init__``; the class
    may add the keyword arguments it takes through ``**kwargs``
    (``extra_params``: name → type) and remove the ones it sets itself
    (``fixed_params``). A required parameter has default ``inspect.Parameter.empty``.

    Example:
        >>> policy_parameters("round_robin")["subchannels"]
        (typing.Literal['best_gain', 'index'], 'best_gain')
    """
    cls: Any = policy_class(name)
    found: dict[str, tuple[Any, Any]] = {}
    for klass in cls.__mro__:
        if klass is object or "__init__" not in vars(klass):
            continue
        init = vars(klass)["__init__"]
        hints = _annotations(init)
        forwards = False
        for arg in inspect.signature(init).parameters.values():
            if arg.kind is arg.VAR_KEYWORD:
                forwards = True
            elif arg.kind is not arg.VAR_POSITIONAL and arg.name not in _NOT_PARAMS:
                found.setdefault(arg.name, (hints.get(arg.name, Any), arg.default))
        if not forwards:
            break
    for key, kind in dict(getattr(cls, "extra_params", {})).items():
        found.setdefault(key, (kind, None))
    for key in getattr(cls, "fixed_params", ()):
        found.pop(key, None)
    return found


def _params_model(name: str) -> Any:
    from pydantic import ConfigDict, create_model

    cls = policy_class(name)
    if cls not in _PARAM_MODELS:
        fields = {
            key: (kind, ... if default is inspect.Parameter.empty else default)
            for key, (kind, default) in policy_parameters(name).items()
        }
        _PARAM_MODELS[cls] = create_model(  # type: ignore[call-overload]
            f"{cls.__name__}Params",
            __config__=ConfigDict(
                strict=True,
                extra="forbid",
                arbitrary_types_allowed=True,
                allow_inf_nan=False,
            ),
            **fields,
        )
    return _PARAM_MODELS[cls]


def _plain(value: Any) -> Any:
    """NumPy scalars as Python numbers (a policy takes either; the check is strict)."""
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        return value.item()
    return value


def check_params(
    name: str,
    params: Mapping[str, Any],
    *,
    field: str = "scheduler.params",
    policy_field: str = "scheduler.policy",
) -> None:
    """Raise a short ``ValueError`` if ``params`` do not fit policy ``name``.

    Every key must be a parameter of the policy (:func:`policy_parameters`) and
    every value of its declared type (strictly: ``"1e3"`` is not a number, an
    integer is a valid float, NumPy scalars count as numbers); a required
    parameter must be given. Value ranges the signature declares
    (``Annotated[float, Gt(0)]``, the aliases of :mod:`policies.base`) are
    checked here; other rules (e.g. ``qam_order`` a power of 4) when the policy
    is built.

    Args:
        name: A registered policy name.
        params: The keyword arguments the run passes to the policy.
        field: Config field of ``params``, named in the message.
        policy_field: Config field of ``name``, named in the message.

    Raises:
        ValueError: One line per bad parameter, each naming ``field.<key>``
            and what is allowed.

    Example:
        >>> check_params("round_robin", {"subchannels": "best"})
        Traceback (most recent call last):
        ...
        ValueError: scheduler.params.subchannels: Input should be 'best_gain' or 'index' (got 'best')
    """
    from pydantic import ValidationError

    allowed = sorted(policy_parameters(name))
    lines = []
    for key in sorted(set(params) - set(allowed), key=str):
        close = difflib.get_close_matches(str(key), allowed, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        listed = ", ".join(allowed) or "none"
        lines.append(
            f"{field}.{key}: {policy_field}={name} has no parameter {key!r}{hint} "
            f"(its parameters: {listed})"
        )
    if not lines:
        try:
            plain = {key: _plain(value) for key, value in params.items()}
            _params_model(name).model_validate(plain)
        except ValidationError as error:
            for err in error.errors()[:5]:
                where = ".".join(str(p) for p in err["loc"])
                got = "" if err["type"] == "missing" else f" (got {err['input']!r})"
                lines.append(f"{field}.{where}: {err['msg']}{got}")
    if lines:
        raise ValueError("\n".join(lines))
