"""The policy registry, re-exported from :mod:`rayfl.registry` (the one registry).

``POLICIES`` here *is* ``rayfl.registry.POLICIES`` (the same dict object), so a
policy registered through either module is known to both, and to every config
field that names a policy.

Example:
    >>> import rayfl.registry
    >>> POLICIES is rayfl.registry.POLICIES
    True
"""

from __future__ import annotations

from rayfl.registry import (
    POLICIES,
    check_policy,
    make_policy,
    policy_class,
    register_policy,
    registered_names,
)

__all__ = [
    "POLICIES",
    "check_policy",
    "make_policy",
    "policy_class",
    "register_policy",
    "registered_names",
]
