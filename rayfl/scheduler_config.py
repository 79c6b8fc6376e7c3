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

__all__ = [
    "BUILTIN_POLICIES",
    "DEFAULT_POLICY",
    "SchedulerConfig",
    "topology_policy",
]

#: The policies that run without a channel model: each picks a client set
#: (``all``: every eligible client, ``random``, ``round_robin``). Every other
#: star policy assigns subchannels and needs a ``wireless`` section.
BUILTIN_POLICIES: tuple[str, ...] = ("all", "random", "round_robin")


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


#: Each topology's policy when ``scheduler.policy`` is not given.
DEFAULT_POLICY: dict[str, str] = {
    "flat": "all",
    "hierarchical": "uniform",
    "d2d": "channel_threshold",
}

#: Fields that named the policy before ``scheduler`` did, per topology (removed).
REMOVED_FIELDS: dict[str, tuple[str, ...]] = {
    "hierarchical": ("scheduling.policy", "scheduling.params"),
    "d2d": ("policy", "policy_params"),
}


def _plain(section: Any) -> Any:
    """A section given as a model, as its dict (a dict or anything else: as is)."""
    return section.model_dump() if isinstance(section, BaseModel) else section


def topology_policy(data: dict[str, Any]) -> dict[str, Any]:
    """Give ``scheduler.policy`` the topology's default when it is not set.

    Args:
        data: A run config as a dict (before validation).

    Returns:
        The data, with ``scheduler.policy`` set.

    Raises:
        ValueError: If the topology section names a policy in a removed field
            (``topology.scheduling.policy``, ``topology.policy``...).
    """
    topology = data.get("topology")
    kind = getattr(topology, "kind", None)
    if isinstance(topology, dict):
        kind = topology.get("kind")
        for path in REMOVED_FIELDS.get(str(kind), ()):
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
    policy = DEFAULT_POLICY.get(str(kind or "flat"), "all")
    return {**data, "scheduler": {**(scheduler or {}), "policy": policy}}
