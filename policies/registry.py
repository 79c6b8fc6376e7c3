"""Registry of scheduling policies: name → ``"module:Class"``, imported lazily.

Shaped like Opacus' accountant registry and Gymnasium's string entry points: the
registry holds strings, so importing it imports no policy module; ``make_policy``
imports the one it builds.
"""

from __future__ import annotations

import importlib
from typing import Any

from policies.base import Policy

POLICIES: dict[str, str] = {
    "random": "policies.random:RandomPolicy",
    "round_robin": "policies.round_robin:RoundRobinPolicy",
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


def register_policy(name: str, entry_point: str, *, force: bool = False) -> None:
    """Register a policy under ``name``.

    Args:
        name: Registry name, e.g. ``"my_policy"``.
        entry_point: ``"package.module:ClassName"`` of a :class:`Policy` subclass.
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
    module, _, attribute = entry_point.partition(":")
    if not module or not attribute:
        raise ValueError(
            f"entry_point must look like 'module:Class', got {entry_point!r}"
        )
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


def policy_class(name: str) -> type[Policy]:
    """Import and return the class registered under ``name``.

    Raises:
        ValueError: If ``name`` is unknown (the message lists the known names).
    """
    if name not in POLICIES:
        raise ValueError(
            f"unknown policy {name!r}; known policies: {', '.join(sorted(POLICIES))}"
        )
    module, _, attribute = POLICIES[name].partition(":")
    cls: type[Policy] = getattr(importlib.import_module(module), attribute)
    return cls


def make_policy(name: str, env_or_spaces: Any = None, **params: Any) -> Policy:
    """Build the registered policy ``name`` for an env's spaces.

    Args:
        name: A key of :data:`POLICIES`.
        env_or_spaces: An env (its ``observation_space`` and ``action_space`` are
            used) or an ``(observation_space, action_space)`` tuple. If None, pass
            ``observation_space=`` and ``action_space=`` in ``params``.
        **params: The policy's own parameters, e.g. ``window=20`` for
            ``proportional_fair``.

    Returns:
        The policy, already ``reset()`` with fresh entropy; call ``reset(seed)``.

    Raises:
        ValueError: If ``name`` is unknown (the message lists the known names) or
            the spaces are missing.
    """
    if name not in POLICIES:
        raise ValueError(
            f"unknown policy {name!r}; known policies: {', '.join(sorted(POLICIES))}"
        )
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
    module, _, attribute = POLICIES[name].partition(":")
    policy_class = getattr(importlib.import_module(module), attribute)
    policy: Policy = policy_class(observation_space, action_space, **params)
    return policy
