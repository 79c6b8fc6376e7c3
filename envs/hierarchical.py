"""Old import path of the hierarchy's env; it lives in :mod:`envs.hierarchy.scheduling`."""

from envs.hierarchy.scheduling import (
    DEFAULT_HIERARCHICAL_CONFIG,
    EdgePolicies,
    HierarchicalSchedulingEnv,
)

__all__ = ["DEFAULT_HIERARCHICAL_CONFIG", "EdgePolicies", "HierarchicalSchedulingEnv"]
