"""Scheduling policies behind one interface, ``policy(obs) -> action``."""

from policies.base import Policy
from policies.registry import POLICIES, make_policy, register_policy

__all__ = ["POLICIES", "Policy", "make_policy", "register_policy"]
