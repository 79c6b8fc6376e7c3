"""The star's rules on a run's ``scheduler`` (called by its plug-in's hooks).

Which action parts a star run offers its policy (a client set, or subchannels
with power levels and per-client controls when a channel model is set), and
what it refuses: a subchannel policy without a ``wireless`` section, a K
(``scheduler.clients_per_round``) no client-set rule reads.
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_star_scheduler", "check_star_world", "star_policy_parts"]


def check_star_world(cfg: Any) -> None:
    """Read ``wireless.availability_trace`` now, so a bad trace fails before Ray starts.

    Raises:
        ValueError: Naming the field, the file and the line of a bad row.
    """
    wireless = cfg.wireless
    if wireless is not None and wireless.availability == "trace":
        from rayfl.wireless.world import read_availability_trace

        read_availability_trace(wireless, cfg.data.num_clients)


def star_policy_parts(cfg: Any) -> frozenset[str]:
    """Return the action parts a star run offers its policy.

    Without a ``wireless`` section, or for a policy that chooses a client set
    only (:func:`rayfl.registry.client_set_only`, e.g. ``all``): the client
    set. Otherwise the subchannel assignment, plus power levels when
    ``wireless.power_levels > 1`` and per-client controls when
    ``scheduler.controls`` is set or the policy ``uses_controls``.
    """
    from rayfl.registry import client_set_only, policy_class

    policy = cfg.scheduler.policy
    if cfg.wireless is None or client_set_only(policy):
        return frozenset({"participants"})
    parts = {"assignment"}
    if cfg.wireless.power_levels > 1:
        parts.add("power")
    if cfg.scheduler.controls or getattr(policy_class(policy), "uses_controls", False):
        parts.add("controls")
    return frozenset(parts)


def check_star_scheduler(cfg: Any, topology: str) -> None:
    """The star's rules on ``scheduler``: subchannels need a channel; K is read or refused.

    Without a ``wireless`` section only a policy that can choose a client set
    (action part ``participants``: ``all``, ``random``, ``round_robin``) runs.
    K (``scheduler.clients_per_round``) is read by a client-set rule only.

    Args:
        cfg: The run config.
        topology: The plug-in's name (the star's, or a topology built on it).

    Raises:
        ValueError: One line naming the field and what to change.
    """
    from rayfl.registry import POLICIES, check_policy, policy_class

    policy = cfg.scheduler.policy
    if cfg.wireless is None and "participants" not in policy_class(policy).action_parts:
        chooses = [
            name
            for name in POLICIES
            if "participants" in policy_class(name).action_parts
            and topology in policy_class(name).topologies
        ]
        raise ValueError(
            f"scheduler.policy={policy} schedules subchannels: it needs a "
            f"`wireless` section (without one, use one of {', '.join(chooses)})"
        )
    check_policy(policy, topology=topology, parts=star_policy_parts(cfg))
    _check_clients_per_round(cfg)


def _check_clients_per_round(cfg: Any) -> None:
    """K (``scheduler.clients_per_round``) is read only by a client-set rule."""
    from rayfl.registry import client_set_only, policy_parameters

    policy = cfg.scheduler.policy
    in_params = "clients_per_round" in cfg.scheduler.params
    if cfg.wireless is not None and not client_set_only(policy):  # the policy fills K
        k = cfg.scheduler.clients_per_round
        name = (
            "scheduler.params.clients_per_round"
            if in_params
            else (None if k is None else f"scheduler.clients_per_round={k}")
        )
        if name is not None:
            raise ValueError(
                f"{name} is not used by scheduler.policy={policy} with a "
                "wireless section: the policy fills the "
                "wireless.num_subchannels subchannels; drop it"
            )
    elif in_params and "clients_per_round" in policy_parameters(policy):
        raise ValueError(  # the field would win
            "scheduler.params.clients_per_round: set scheduler.clients_per_round "
            f"instead (it decides k for scheduler.policy={policy})"
        )
