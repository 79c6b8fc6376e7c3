"""The ``scheduler`` section of a run config: which clients upload each round.

Re-exported by :mod:`rayfl.config`. Policy names are checked against
:func:`rayfl.names.policy_names` (the built-in rules and every registered policy).

Example:
    >>> SchedulerConfig(policy="round_robin", clients_per_round=4).clients_per_round
    4
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rayfl.names import UnknownNameError, policy_names

__all__ = ["SchedulerConfig", "topology_policy"]


class SchedulerConfig(BaseModel):
    """Which clients upload in each round."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    policy: str = Field(
        "all",
        description="Scheduling policy name, for every topology: star runs take "
        "`all` (default: every eligible client every round), `random` or "
        "`round_robin` with or without a `wireless` section, and every other star "
        "policy in policies.POLICIES with one; hierarchical runs default to "
        "`uniform` (one policy instance per edge), D2D runs to "
        "`channel_threshold` (one per target). A policy meant for another "
        "topology is refused at validation.",
    )
    clients_per_round: int | None = Field(
        None,
        ge=1,
        description="Clients scheduled per round (partial participation), star "
        "topology only (hierarchical and d2d runs refuse it: their policies pick "
        "devices per edge or neighbors per target). None: all clients, or "
        "wireless.num_subchannels when a wireless model is set.",
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Keyword arguments of the policy's constructor (e.g. "
        "{window: 20} for proportional_fair); names and types are checked "
        "against it when the config is validated.",
    )
    controls: bool = Field(
        False,
        description="Expose the algorithm's per-client controls (e.g. sparse_dp's "
        "`sparsity`) in the env's action, so the policy can set them.",
    )

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, name: str) -> str:
        if name not in policy_names():
            raise UnknownNameError("scheduler.policy", name, policy_names())
        return name


def _plain(section: Any) -> Any:
    """A section given as a model, as its dict (a dict or anything else: as is)."""
    return section.model_dump() if isinstance(section, BaseModel) else section


def _plugin(kind: Any) -> Any:
    """The plug-in of ``kind`` (None: the default topology's); None if unknown."""
    from rayfl.registry import topology_names, topology_of

    if kind is None:
        kind = topology_names()[0]
    if not isinstance(kind, str):
        return None
    try:
        return topology_of(kind)
    except ValueError:
        return None


def topology_policy(data: dict[str, Any]) -> dict[str, Any]:
    """Give ``scheduler.policy`` the topology's default when it is not set.

    The default is the topology plug-in's ``default_policy``
    (:func:`rayfl.registry.topology_of`).

    Args:
        data: A run config as a dict (before validation).

    Returns:
        The data, with ``scheduler.policy`` set.

    Raises:
        ValueError: If the topology section names a policy in a removed field
            (its plug-in's ``removed_fields``: ``topology.scheduling.policy``,
            ``topology.policy``...).
    """
    topology = data.get("topology")
    kind = getattr(topology, "kind", None)
    if isinstance(topology, dict):
        kind = topology.get("kind")
    plugin = _plugin(kind)
    if isinstance(topology, dict) and plugin is not None:
        for path in plugin.removed_fields:
            *parents, key = path.split(".")
            holder: Any = topology
            for parent in parents:
                holder = (
                    _plain(holder.get(parent)) if isinstance(holder, dict) else None
                )
            if isinstance(holder, dict) and key in holder:
                new = "params" if key.endswith("params") else "policy"
                raise ValueError(
                    f"topology.{path} is no longer read: give scheduler.{new} "
                    "(one field names the policy on every topology)"
                )
    scheduler = data.get("scheduler")
    if isinstance(scheduler, BaseModel):
        if "policy" in scheduler.model_fields_set:
            return data
        scheduler = scheduler.model_dump()
    if scheduler is not None and not isinstance(scheduler, dict):
        return data  # the field's own validator says what is wrong
    if scheduler and "policy" in scheduler:
        return data
    policy = (plugin or _plugin(None)).default_policy  # unknown kind: refused later
    return {**data, "scheduler": {**(scheduler or {}), "policy": policy}}
