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

__all__ = ["BUILTIN_POLICIES", "SchedulerConfig"]

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
