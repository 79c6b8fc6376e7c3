"""Experiment tracking: each round's metrics and the config to TensorBoard and MLflow.

``output.loggers: [tensorboard, mlflow]`` in a run's config sends every row of
``rounds.parquet`` (its numeric columns, step = round) and the resolved config to:

| logger | extra | where, inside the run directory | view with |
|---|---|---|---|
| ``tensorboard`` | ``.[tensorboard]`` (tensorboardX) | ``tensorboard/`` (event files; the config as text) | ``tensorboard --logdir runs`` |
| ``mlflow`` | ``.[mlflow]`` (mlflow-skinny) | ``mlruns/`` (a file store: experiment = ``name``, run = the run directory's name; the config as params and ``config.yaml`` artifact) | ``mlflow ui --backend-store-uri runs/<run>/mlruns`` |

Nothing is imported until a run uses a logger; the run directory's own files
are written either way. A resumed run appends to the same TensorBoard folder and
MLflow run. The runner hooks in through the engine loop's ``on_round``
callback (:meth:`Tracker.chain`) and closes the tracker when the run ends.

Example:
    >>> flat_params({"data": {"dataset": "digits", "alpha": 0.5}, "seed": 0})
    {'data.dataset': 'digits', 'data.alpha': '0.5', 'seed': '0'}
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rayfl.rundir.config import LOGGER_EXTRAS

__all__ = ["LOGGERS", "Tracker", "flat_params", "metric_values"]

#: ``output.loggers`` names → (module that must be importable, extra to install).
LOGGERS: dict[str, tuple[str, str]] = LOGGER_EXTRAS

OnRound = Callable[[int, dict[str, Any], Any], None]


def flat_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Return a nested config as ``{"a.b": "value"}`` strings (MLflow params)."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat_params(value, f"{name}."))
        else:
            out[name] = str(value)[:6000]  # MLflow's limit on a param value
    return out


def metric_values(row: Mapping[str, Any]) -> dict[str, float]:
    """Return the finite numeric entries of a rounds row (``round`` left out).

    Example:
        >>> metric_values({"round": 3, "global_acc": 0.5, "status": "x",
        ...                "eval_acc": float("nan")})
        {'global_acc': 0.5}
    """
    out = {}
    for key, value in row.items():
        if key == "round" or isinstance(value, bool | str) or value is None:
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            out[key] = number
    return out


class _TensorBoard:
    """tensorboardX writer under ``run_dir/tensorboard``."""

    def __init__(self, run_dir: Path, config: Mapping[str, Any]) -> None:
        import yaml
        from tensorboardX import SummaryWriter

        self.writer = SummaryWriter(logdir=str(run_dir / "tensorboard"))
        text = yaml.safe_dump(dict(config), sort_keys=False)
        self.writer.add_text("config", f"```yaml\n{text}```", global_step=0)

    def log(self, step: int, values: dict[str, float]) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()

    def close(self, status: str) -> None:
        self.writer.close()


class _MLflow:
    """One MLflow run in a file store under ``run_dir/mlruns``."""

    def __init__(self, run_dir: Path, config: Mapping[str, Any]) -> None:
        # MLflow 3 asks for a database backend; a file store inside the run
        # directory keeps the run self-contained and needs no server.
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow import MlflowClient
        from mlflow.entities import Metric, Param

        self._metric = Metric
        self.client = MlflowClient(tracking_uri=(run_dir / "mlruns").resolve().as_uri())
        name = str(config.get("name") or "rayfl")
        found = self.client.get_experiment_by_name(name)
        experiment = (
            found.experiment_id if found else self.client.create_experiment(name)
        )
        runs = self.client.search_runs(
            [experiment], filter_string=f"tags.mlflow.runName = '{run_dir.name}'"
        )
        if runs:  # rayfl resume: the same MLflow run goes on
            self.run_id = runs[0].info.run_id
            self.client.update_run(self.run_id, status="RUNNING")
            return
        run = self.client.create_run(experiment, run_name=run_dir.name)
        self.run_id = run.info.run_id
        params = [Param(k, v) for k, v in flat_params(config).items()]
        for i in range(0, len(params), 100):  # MLflow takes 100 params a batch
            self.client.log_batch(self.run_id, params=params[i : i + 100])
        if (run_dir / "config.yaml").is_file():
            self.client.log_artifact(self.run_id, str(run_dir / "config.yaml"))

    def log(self, step: int, values: dict[str, float]) -> None:
        import time

        stamp = int(time.time() * 1000)
        metrics = [self._metric(k, v, stamp, step) for k, v in values.items()]
        self.client.log_batch(self.run_id, metrics=metrics)

    def close(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status=status)


class Tracker:
    """The loggers of one run: opened on the first round, closed at its end.

    Args:
        loggers: ``output.loggers`` (names of :data:`LOGGERS`).
        run_dir: The run directory.
        config: The resolved config (a dict), logged once.
    """

    def __init__(
        self, loggers: list[str], run_dir: Path, config: Mapping[str, Any]
    ) -> None:
        self.loggers, self.run_dir, self.config = list(loggers), Path(run_dir), config
        self.sinks: list[Any] | None = None

    @classmethod
    def for_run(cls, cfg: Any, run_dir: Path) -> Tracker:
        """The tracker of a run config's ``output.loggers`` (none: does nothing)."""
        return cls(list(cfg.output.loggers), run_dir, cfg.to_dict())

    def _open(self) -> list[Any]:
        if self.sinks is None:
            kinds = {"tensorboard": _TensorBoard, "mlflow": _MLflow}
            self.sinks = []
            for name in self.loggers:
                self.sinks.append(kinds[name](self.run_dir, self.config))
        return self.sinks

    def chain(self, inner: OnRound | None) -> OnRound | None:
        """Return an ``on_round`` callback logging each round, then calling ``inner``."""
        if not self.loggers:
            return inner

        def on_round(t: int, row: dict[str, Any], evals: Any) -> None:
            values = metric_values(row)
            for sink in self._open():
                sink.log(t, values)
            if inner is not None:
                inner(t, row, evals)

        return on_round

    def close(self) -> None:
        """End the loggers' runs: FINISHED, KILLED (interrupted) or FAILED."""
        if not self.sinks:
            return
        error = sys.exc_info()[1]
        status = "FINISHED"
        if error is not None:
            interrupted = isinstance(error, KeyboardInterrupt) or (
                getattr(error, "status", None) == "interrupted"
            )
            status = "KILLED" if interrupted else "FAILED"
        for sink in self.sinks:
            sink.close(status)
        self.sinks = []
