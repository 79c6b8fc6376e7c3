"""The ``output`` section of a run config: where and what a run writes.

Re-exported by :mod:`rayfl.config`.

Example:
    >>> OutputConfig(dir="runs", plots=False).checkpoint_every
    0
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rayfl.text_checks import check_path

#: ``output.loggers`` → (module that must be importable, the extra that brings it);
#: the loggers themselves are :mod:`rayfl.rundir.tracking`.
LOGGER_EXTRAS = {
    "tensorboard": ("tensorboardX", "tensorboard"),
    "mlflow": ("mlflow", "mlflow"),
}

__all__ = ["OutputConfig"]


class OutputConfig(BaseModel):
    """Where and what a run writes."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    dir: str = Field(
        "runs",
        min_length=1,
        description="Root under which `<name>-<timestamp>/` is made; it (or its "
        "nearest existing parent) must be a writable directory. No control "
        "characters, no leading or trailing whitespace (a directory named by "
        "spaces is almost never meant), and no name longer than the file system "
        "allows (255 bytes a component, 4096 the path, or its own limits).",
    )
    plots: bool = Field(True, description="Write plots/*.png at the end of the run.")
    progress: bool = Field(True, description="Show a progress bar on a terminal.")
    checkpoint_every: int = Field(
        0,
        ge=0,
        description="Checkpoint the run every this many rounds (0 = never); "
        "`rayfl resume RUN_DIR` continues from the last one.",
    )
    loggers: list[Literal["tensorboard", "mlflow"]] = Field(
        default_factory=list,
        description="Experiment trackers that also get each round's metrics and "
        "the config: `tensorboard` (event files in RUN_DIR/tensorboard; extra "
        "`.[tensorboard]`), `mlflow` (a file store in RUN_DIR/mlruns; extra "
        "`.[mlflow]`). Empty: the run directory only.",
    )

    @model_validator(mode="after")
    def _check_loggers(self) -> OutputConfig:
        for name in self.loggers:
            module, extra = LOGGER_EXTRAS[name]
            if importlib.util.find_spec(module) is None:
                raise ValueError(
                    f"output.loggers: {name!r} needs the {module} package: "
                    f"pip install -e '.[{extra}]'"
                )
        return self

    client_rows_max: int = Field(
        100_000,
        ge=0,
        description="Largest population written as round × client rows "
        "(metrics.parquet); a larger one gets clients.parquet instead, one summary "
        "row per client (rayfl.rundir.stream), so a round costs O(participants).",
    )

    @model_validator(mode="after")
    def _check_dir(self) -> OutputConfig:
        check_path("output.dir", self.dir)
        path = Path(self.dir).expanduser()
        existing = path
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise ValueError(
                f"output.dir must be a directory (or one that can be created), but "
                f"{existing} is a file: got {self.dir!r}"
            )
        try:  # mkdir itself: os.access says yes to root where mkdir fails (/proc)
            os.rmdir(tempfile.mkdtemp(prefix=".rayfl-probe-", dir=existing))
        except OSError as e:
            raise ValueError(
                f"output.dir: cannot create a directory in {existing} "
                f"({e.strerror}; got {self.dir!r})"
            ) from None
        return self
