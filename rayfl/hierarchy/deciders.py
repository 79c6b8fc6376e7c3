"""The hierarchy's decision units: one scheduling policy per edge, and its action rules.

Each edge c is a decision unit (``HierarchicalRound.num_units`` = C). Its policy
is ``scheduler.policy`` (default ``uniform``), built by
``rayfl.registry.build_policy`` for the edge's spaces
(``rayfl.hierarchy.scheduling.edge_spaces``) with the run's
``SystemContext`` (``unit`` = c; ``link``: the device→edge constants of
``topology.cost``, with no downlink or compute term). :class:`EdgeActions`
turns the policy's action into the edge's schedule, with global device ids:

| policy's action part | action space | schedule of edge c |
|---|---|---|
| participants (``uniform``) | ``MultiBinary(n_c)``, row j = device d_j | the marked devices, subchannel −1 |
| assignment (the others) | ``MultiDiscrete([n_c + 1] * K_e)`` | device d_j on subchannel k for each a[k] = j < n_c |

The round then keeps the devices on open subchannels (detail 1 of
``rayfl.hierarchy.scheduling``). The runner wraps each (policy, rules) pair in
``rayfl.engine.deciders.PolicyDecider``, so the policies' state goes through
the loop's checkpoints.

Implementation details:
    1. Edge c's policy is ``reset`` with a seed from (seed, "hier_policy", 0, c),
       so the same seed gives the same decisions.
    2. A policy runs here when it declares ``hierarchical`` among its
       topologies and reads only keys and fills only action parts the
       hierarchy has (``rayfl.registry.check_policy``): no ``controls``, no
       ``power``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.hierarchy.scheduling import edge_spaces, validate_action
from rayfl.observation import LinkConstants, SystemContext
from rayfl.registry import build_policy, check_policy, policy_class
from rayfl.schedule import Schedule
from rayfl.seeding import rng_for

__all__ = [
    "EdgeActions",
    "check_edge_policy",
    "edge_context",
    "edge_policies",
    "policy_seed",
]


@dataclass(frozen=True)
class EdgeActions:
    """Edge c's action rules: a policy's action → the edge's :class:`Schedule`.

    Attributes:
        edge: c.
        members: S_c, the subnet's device ids ascending (row j = device d_j).
        num_subchannels: K_e.
        participants: The action is a client set (``MultiBinary(n_c)``), not a
            subchannel assignment.

    Example:
        >>> rules = EdgeActions(1, np.array([4, 5, 6]), 2, participants=False)
        >>> schedule, _ = rules.to_schedule([2, 0])
        >>> schedule.clients.tolist(), schedule.subchannel.tolist()
        ([6, 4], [0, 1])
    """

    edge: int
    members: npt.NDArray[np.int64]
    num_subchannels: int
    participants: bool

    def spaces(self) -> tuple[Any, Any]:
        """Return the edge's (observation, action) spaces (the table above)."""
        from gymnasium import spaces

        n = len(self.members)
        observation, assignment = edge_spaces(n, self.num_subchannels)
        return observation, spaces.MultiBinary(n) if self.participants else assignment

    def to_schedule(
        self, action: Any, eligible: npt.NDArray[np.bool_] | None = None
    ) -> tuple[Schedule, list[int]]:
        """Return the schedule of ``action`` and the ineligible devices it named (none).

        Raises:
            ValueError: A malformed action (the message names the edge).
        """
        n = len(self.members)
        if self.participants:
            mask = np.asarray(action).reshape(-1)
            if mask.shape != (n,) or not np.isin(mask, (0, 1)).all():
                raise ValueError(
                    f"edge {self.edge}: a participants action is {n} zeros or ones, "
                    f"got {action!r}"
                )
            return Schedule.of(self.members[mask.astype(bool)]), []
        values = validate_action(
            action,
            edge=self.edge,
            num_devices=n,
            num_subchannels=self.num_subchannels,
        )
        on = np.flatnonzero(values < n)
        return Schedule(self.members[values[on]], subchannel=on), []


def check_edge_policy(name: str) -> type[Any]:
    """Return policy ``name``'s class, or raise if it is not declared for the hierarchy.

    Raises:
        ValueError: Unknown name, or a policy whose declared topologies, keys
            or action parts do not fit (``rayfl.registry.check_policy``).
    """
    check_policy(name, topology="hierarchical")
    return policy_class(name)


def policy_seed(seed: int, edge: int) -> int:
    """Return the ``reset`` seed of edge ``edge``'s policy (detail 1)."""
    return int(rng_for(seed, "hier_policy", client=edge).integers(2**31 - 1))


def edge_context(config: Any, system: Any = None) -> SystemContext:
    """Return edge 0's context (``replace(unit=c)`` gives edge c's).

    Args:
        config: The run config (``topology.cost``: the link constants).
        system: The hierarchical engine (its edges and model size), or None
            before one is built (one unit, model size 1).
    """
    cost = config.topology.cost
    link = LinkConstants(
        bandwidth_hz=cost.bandwidth_hz,
        noise_psd_dbm_hz=cost.noise_psd_dbm_hz,
        tx_power_dbm=cost.tx_power_dbm,
        bits_per_element=cost.bits_per_param,
    )
    return SystemContext(
        topology="hierarchical",
        seed=config.seed,
        rounds=config.rounds,
        model_dim=1 if system is None else int(system.dim),
        num_units=1 if system is None else len(system.edge_scheduling.subnets),
        link=link,
    )


def edge_policies(config: Any, system: Any) -> list[tuple[Any, EdgeActions]]:
    """Return one (policy, action rules) pair per edge, policies reset.

    Args:
        config: The run config (``scheduler``, ``topology.cost``, ``seed``,
            ``rounds``).
        system: The hierarchical engine (its ``edge_scheduling`` gives the
            subnets and K_e; ``dim`` the model size).

    Raises:
        ValueError: A policy the hierarchy cannot drive, or bad parameters.
    """
    scheduler = config.scheduler
    participants = "assignment" not in check_edge_policy(scheduler.policy).action_parts
    edges = system.edge_scheduling
    base = edge_context(config, system)
    out = []
    for c, members in enumerate(edges.subnets):
        rules = EdgeActions(c, members, edges.num_subchannels[c], participants)
        policy = build_policy(
            scheduler.policy,
            rules.spaces(),
            params=scheduler.params,
            context=base.replace(unit=c),
            seed=policy_seed(config.seed, c),
        )
        out.append((policy, rules))
    return out
