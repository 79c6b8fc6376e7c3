"""``StarTopologyConfig``: the ``topology: {kind: flat}`` section (the default)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["StarTopologyConfig"]


class StarTopologyConfig(BaseModel):
    """Clients and one cloud server (the default; behaviour of every other run)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    kind: Literal["flat"] = "flat"
