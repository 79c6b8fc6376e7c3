"""``StarTopologyConfig``: the ``topology: {kind: star}`` section (the default)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

__all__ = ["StarTopologyConfig"]


class StarTopologyConfig(BaseModel):
    """Clients and one cloud server (the default; behaviour of every other run).

    ``kind: flat``, the star's name before issue 46, is still read (stored
    configs say it) and becomes ``star``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    kind: Literal["star", "flat"] = "star"

    @field_validator("kind")
    @classmethod
    def _star(cls, kind: str) -> str:
        return "star"
