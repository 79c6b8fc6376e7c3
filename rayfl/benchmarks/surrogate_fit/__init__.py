"""``rayfl bench fit-surrogate``: fit the star surrogate to emulate rollouts.

Two modules: :mod:`.fit` (the surrogate's model, the least-squares fit, the
trajectories' file) and :mod:`.cli` (the command: rollouts played on a
scenario of a topology with the ``fits_surrogate`` capability, the fit
written under ``--out``).

Example:
    rayfl bench fit-surrogate --scenario star-small --fit-seeds 2000:2003 --out fit/
"""

from __future__ import annotations

from rayfl.benchmarks.surrogate_fit.cli import (
    collect,
    fit_command,
    fittable,
    main,
    parser,
    write_fit,
)
from rayfl.benchmarks.surrogate_fit.fit import (
    FitResult,
    Trajectory,
    fit,
    load_trajectories,
    predict,
    save_trajectories,
)

__all__ = [
    "FitResult",
    "Trajectory",
    "collect",
    "fit",
    "fit_command",
    "fittable",
    "load_trajectories",
    "main",
    "parser",
    "predict",
    "save_trajectories",
    "write_fit",
]
