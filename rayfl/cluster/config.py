"""The ``ray`` section of a run config: how rayfl connects to Ray and packs actors.

Re-exported by :mod:`rayfl.config`; read by :class:`rayfl.cluster.session.RaySession`
(connection) and the systems (actor packing, CPU reservation).

Example:
    >>> RayConfig(num_cpus=2).clients_per_actor
    'auto'
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rayfl.text_checks import check_address

__all__ = ["MAX_OBJECT_STORE_MB", "RayConfig"]

MAX_OBJECT_STORE_MB = 2**40
"""Largest ``ray.object_store_memory_mb``: 2^40 MB (1 EiB) is more than any
machine has, and 2^60 bytes still fits Ray's 64-bit byte count."""


class RayConfig(BaseModel):
    """How rayfl connects to Ray and packs clients into actors (DESIGN.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    address: str | None = Field(
        None,
        description="None: reuse an initialized Ray session or start a local one; "
        "`auto`: connect to the running cluster; `local`: start a new local one; "
        "or `ray://host:port` / `host:port` (port 1..65535, no spaces or control "
        "characters).",
    )
    num_cpus: int | None = Field(
        None, ge=1, description="CPUs of a locally started Ray session (None: all)."
    )
    run_cpus: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="CPUs the run's client actors reserve in total (None: every CPU "
        "of the cluster, less those of the Ray actor the run is started in). Set it "
        "to share a cluster between runs at once; `rayfl train-policy` in emulate "
        "mode with remote EnvRunners gives each runner's run its share.",
    )
    local_processes: Literal["lean", "full"] = Field(
        "lean",
        description="What a local session started by rayfl runs. `lean`: the node "
        "without Ray's autoscaler monitor (nothing to scale on one machine) and "
        "without the dashboard's head process (so no job submission or state API, "
        "`ray list ...`), its workers at the driver's priority (Ray's default: "
        "nice +15); quicker to start on a few cores. `full`: what `ray.init()` "
        "starts. Sessions rayfl reuses or connects to are not affected.",
    )
    clients_per_actor: int | Literal["auto"] = Field(
        "auto",
        description="Virtual clients hosted by one client actor. `auto`: "
        "ceil(num_clients / CPUs) (CPUs: ray.run_cpus, at least 1), i.e. one actor "
        "per CPU; 1: one actor per client.",
    )
    reduce_in_actor: bool = Field(
        True,
        description="Let each client actor sum its clients' uploads before sending "
        "(exact sums, same result as at the server) when no channel effect acts on single uploads.",
    )
    max_actor_restarts: int = Field(
        3,
        ge=-1,
        description="Restarts of a client actor that dies (-1: unlimited). Its clients' "
        "updates of that round count as lost; their state is restored from the last "
        "round's snapshot.",
    )
    object_store_memory_mb: int | None = Field(
        None,
        ge=64,
        le=MAX_OBJECT_STORE_MB,
        description="Object store size of a session rayfl starts (ray.address "
        "null or local; refused with another address), in MB, "
        "64..2^40 (1 EiB: more than any machine; what fits in this machine's "
        "memory is checked when Ray starts).",
    )
    keep_logs: bool = Field(
        False,
        description="Keep the session directory of a local Ray session rayfl "
        "started (its workers' logs, under Ray's temp dir: `/tmp/ray/session_*`, "
        "or `$RAY_TMPDIR/ray`) when the session closes. false: it is removed then, "
        "unless a run in it failed (the failure's console message and `error.txt` "
        "give its path). A session rayfl reuses or connects to is never touched.",
    )
    reserve_timeout_s: float | None = Field(
        600.0,
        gt=0,
        allow_inf_nan=False,
        description="Seconds a run waits for the CPUs of all its client actors when "
        "other runs share the cluster (they are reserved at once, a placement group, "
        "with a message while waiting); then it fails with a clear error. "
        "null: wait for ever.",
    )

    @model_validator(mode="after")
    def _check_address(self) -> RayConfig:
        if self.address is None:
            return self
        check_address("ray.address", self.address)
        if self.object_store_memory_mb is not None and self.address != "local":
            raise ValueError(
                "ray.object_store_memory_mb sizes a session rayfl starts itself "
                f"(ray.address: null or local); with ray.address={self.address} Ray's own "
                "settings apply: remove ray.object_store_memory_mb"
            )
        return self

    @model_validator(mode="after")
    def _check_packing(self) -> RayConfig:
        if isinstance(self.clients_per_actor, int) and self.clients_per_actor < 1:
            raise ValueError(
                f"ray.clients_per_actor must be >= 1 or 'auto', got {self.clients_per_actor}"
            )
        return self
