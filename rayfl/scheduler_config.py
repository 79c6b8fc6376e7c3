"""The ``scheduler`` section of a run config: which clients upload each round.

Re-exported by :mod:`rayfl.config`. Policy names are checked against
:func:`rayfl.names.policy_names` (the built-in rules and every registered policy).

Example:
    >>> SchedulerConfig(policy="round_robin", clients_per_round=4).clients_per_round
    4
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rayfl.names import UnknownNameError, policy_names

__all__ = [
    "BUILTIN_POLICIES",
    "PolicyAlias",
    "SchedulerConfig",
    "one_policy_field",
    "override_policy",
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
        "`uniform` (alias topology.scheduling.policy), D2D runs to "
        "`channel_threshold` (alias topology.policy). A policy meant for another "
        "topology is refused at validation; naming two different policies here "
        "and in the alias is an error.",
    )
    clients_per_round: int | None = Field(
        None,
        ge=1,
        description="Clients scheduled per round (partial participation). None: all "
        "clients, or wireless.num_subchannels when a wireless model is set.",
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Keyword arguments of the policy's constructor (e.g. "
        "{window: 20} for proportional_fair); names and types are checked "
        "against it when the config is validated. Aliases: "
        "topology.scheduling.params (hierarchical), topology.policy_params (D2D).",
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


class PolicyAlias(NamedTuple):
    """Where a topology section names its policy (an alias of ``scheduler.policy``)."""

    parent: str | None  # the sub-section of ``topology`` holding the fields, or None
    policy: str  # key of the policy name
    params: str  # key of its parameters
    default: str  # the topology's default policy

    def fields(self) -> dict[str, str]:
        """The alias of ``policy`` and of ``params`` as dotted paths."""
        prefix = f"topology.{self.parent}." if self.parent else "topology."
        return {"policy": prefix + self.policy, "params": prefix + self.params}


def _plain(section: Any) -> Any:
    """A section given as a model, as its dict (a dict or anything else: as is)."""
    return section.model_dump() if isinstance(section, BaseModel) else section


def one_policy_field(
    data: dict[str, Any], aliases: dict[str, PolicyAlias]
) -> tuple[dict[str, Any], str, str]:
    """Give ``scheduler.policy/params`` and the topology's alias fields one value.

    A value given in one place is copied to the other (``scheduler.policy: all``,
    the star's default, yields to an alias; with neither, the topology's default
    policy). Unknown names are left to the fields' own validators.

    Args:
        data: A run config as a dict (before validation).
        aliases: ``topology.kind`` → where that topology names its policy.

    Returns:
        The data, and the policy and params fields the user wrote.

    Raises:
        ValueError: If the two places name different policies or parameters.
    """
    fields = ("scheduler.policy", "scheduler.params")
    topology, scheduler = _plain(data.get("topology")), _plain(data.get("scheduler"))
    scheduler = {} if scheduler is None else scheduler
    alias = aliases.get(topology.get("kind")) if isinstance(topology, dict) else None
    holder = None if alias is None else topology
    if alias is not None and alias.parent is not None:
        holder = _plain(topology.get(alias.parent, {}))
    if not isinstance(holder, dict) or not isinstance(scheduler, dict):
        return data, *fields
    new = {"policy": scheduler.get("policy"), "params": scheduler.get("params")}
    old = {"policy": holder.get(alias.policy), "params": holder.get(alias.params)}
    if new["policy"] == "all" and old["policy"]:  # the star's default, not a choice
        new["policy"] = None
    if any(n and n not in policy_names() for n in (new["policy"], old["policy"])):
        return data, *fields  # the field that names it says so, once
    names = alias.fields()
    for key in ("policy", "params"):
        if new[key] and old[key] and new[key] != old[key]:
            raise ValueError(
                f"scheduler.{key}={new[key]} and {names[key]}={old[key]} disagree: "
                f"give scheduler.{key} only"
            )
    policy = new["policy"] or old["policy"] or alias.default
    params = new["params"] or old["params"] or {}
    holder = {**holder, alias.policy: policy, alias.params: params}
    if alias.parent is not None:
        holder = {**topology, alias.parent: holder}
    scheduler = {**scheduler, "policy": policy, "params": params}
    return (
        {**data, "topology": holder, "scheduler": scheduler},
        fields[0] if new["policy"] else names["policy"],
        fields[1] if new["params"] else names["params"],
    )


def override_policy(
    tree: dict[str, Any], keys: Iterable[str], aliases: dict[str, PolicyAlias]
) -> None:
    """Let an override of the policy (or its params) in one place drop the other.

    So ``scheduler.policy=X`` replaces a policy the source names in its alias
    field (and the other way round) instead of disagreeing with it.

    Args:
        tree: The config tree, overrides applied (changed in place).
        keys: The dotted keys the overrides set.
        aliases: As for :func:`one_policy_field`.
    """
    keys = list(keys)
    topology = tree.get("topology")
    alias = aliases.get(topology.get("kind")) if isinstance(topology, dict) else None
    if alias is None:
        return
    holder = topology if alias.parent is None else topology.get(alias.parent)
    scheduler = tree.get("scheduler")
    for key, path in alias.fields().items():
        given = {p for p in (f"scheduler.{key}", path) if _touches(keys, p)}
        if given == {path}:
            if isinstance(scheduler, dict):
                scheduler.pop(key, None)
        elif given and isinstance(holder, dict):
            holder.pop(getattr(alias, key), None)


def _touches(keys: list[str], path: str) -> bool:
    return any(k == path or k.startswith(f"{path}.") for k in keys)
