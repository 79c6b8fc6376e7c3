"""The ``constant_tuned`` baseline of ``rayfl bench policies``: what is tuned, and how.

A learned policy is read beside tuned constants (DESIGN.md): round robin
(:data:`TUNED_BASE`) with
each constant the algorithm or the config exposes held at the grid value
(:data:`CONSTANT_GRID` × the configured value) with the best mean return on the
training seeds, disjoint from the held-out ones. A best value at the grid's
edge is not a tuned one, so the search (``search="extend"``, the default) goes
on past that edge in steps of ×2 (or ÷2), up to :data:`MAX_EXTENSIONS` steps,
until the best value has a worse neighbour on both sides or sits at the
control's range limit; ``search="fixed"`` keeps the four grid values (what
benchmark runs before 29 Nov 2026 did).

What is tuned is the topology plug-in's answer
(:meth:`rayfl.topology.TopologyPlugin.tunable_constants`); how it is applied,
its ``"tunes_config"`` capability:

| topology | what is tuned (:func:`tunable_constants`) | how it is applied |
|----------|-------------------------------------------|-------------------|
| star | the algorithm's per-client controls (FedAvg: ``lr``) | the env's ``controls`` action, the same for every client and round (:class:`ConstantControls`) |
| hierarchical (``tunes_config``) | the configured step size: ``topology.lr.gamma`` (``lr.mode: manual``, η_k = γ/√(k+1)) or ``algorithm.lr`` (``constant``); nothing in ``theory`` | a config value (:func:`env_config`): the env schedules subchannels only, it has no per-device controls |
| d2d | nothing | – |
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from rayfl.config import RunConfig, load_config
from rayfl.registry import topology_of

__all__ = [
    "CONSTANT",
    "CONSTANT_GRID",
    "MAX_EXTENSIONS",
    "SEARCHES",
    "TUNED_BASE",
    "ConstantControls",
    "constant_grid",
    "env_config",
    "tunes_config",
    "tunable_constants",
    "tune_constants",
]

#: Multiples of the configured value tried by ``constant_tuned``.
CONSTANT_GRID = (1.0, 0.2, 0.5, 2.0)
CONSTANT = "constant_tuned"
#: The policy ``constant_tuned`` schedules with (a benchmark choice).
TUNED_BASE = "round_robin"
#: Most values ``search="extend"`` adds past the grid's edge (×2 each: the
#: best of 2× can move to 32× the configured value, clipped to the range).
MAX_EXTENSIONS = 4
#: How ``constant_tuned`` searches: the grid, or the grid extended past its edge.
SEARCHES = ("extend", "fixed")
Spec = tuple[str, str, dict[str, Any]]  # (label, registered name, params)


def tunes_config(cfg: RunConfig) -> bool:
    """True if ``constant_tuned``'s constants on ``cfg`` are config values (dotted keys).

    Otherwise they are the env's controls (:class:`ConstantControls`).
    """
    return "tunes_config" in topology_of(cfg).capabilities


def tunable_constants(cfg: RunConfig) -> dict[str, tuple[float, float, float]]:
    """What ``constant_tuned`` tunes on ``cfg``: {name: (configured, low, high)}.

    The topology plug-in's answer
    (:meth:`rayfl.topology.TopologyPlugin.tunable_constants`). Star: the
    algorithm's per-client controls (the env's ``controls``, held constant
    over clients and rounds; FedAvg: ``lr``). Hierarchy: its env sets the
    schedule only, so the constant is the configured step size, a config value
    (a dotted key) every device uses: ``topology.lr.gamma`` in
    ``lr.mode: manual`` (η_k = γ/√(k+1)), ``algorithm.lr`` in ``constant``;
    nothing in ``theory``. D2D: nothing.
    """
    return dict(topology_of(cfg).tunable_constants(cfg))


def constant_grid(configured: float, low: float, high: float) -> list[float]:
    """The values ``constant_tuned`` tries: :data:`CONSTANT_GRID` × ``configured``.

    Clipped to [``low``, ``high``], without repeats, the configured value first
    (a tie keeps it).

    Example:
        >>> constant_grid(0.05, 0.0, 1.0)
        [0.05, 0.01, 0.025, 0.1]
    """
    return sorted(
        {_round(np.clip(f * configured, low, high)) for f in CONSTANT_GRID},
        key=lambda v: (v != _round(configured), v),
    )


def _round(value: float) -> float:
    """``value`` to 12 significant digits (0.2 × 0.05 is 0.01, not 0.010000000000000002)."""
    return float(f"{float(value):.12g}")


def env_config(cfg: RunConfig, spec: Spec) -> RunConfig:
    """The config ``spec`` plays on: ``cfg``, or with its tuned config values.

    Where the topology :func:`tunes_config` (the hierarchy),
    ``constant_tuned``'s parameters are dotted config keys
    (:func:`tunable_constants`); elsewhere they are env controls
    (``rayfl.benchmarks.policies.build_policy``), so the config is ``cfg``.
    """
    label, _, params = spec
    if not label.startswith(CONSTANT) or not params or not tunes_config(cfg):
        return cfg
    return load_config(cfg, params)


def next_value(
    tried: Sequence[float], best: float, low: float, high: float
) -> float | None:
    """The value ``search="extend"`` tries next, or None when ``best`` is tuned.

    ``best`` at the top of ``tried`` and below ``high``: 2 × ``best`` (clipped);
    at the bottom and above ``low``: ``best`` / 2 (clipped). Otherwise (a worse
    value on each side, or the range's limit) None.

    Example:
        >>> next_value([0.01, 0.025, 0.05, 0.1], 0.1, 0.0, 1.0)
        0.2
        >>> next_value([0.01, 0.025, 0.05, 0.1], 0.05, 0.0, 1.0) is None
        True
    """
    ordered = sorted(tried)
    if best >= ordered[-1] and best < high:
        value = _round(min(2.0 * best, high))
    elif best <= ordered[0] and best > low:
        value = _round(max(best / 2.0, low))
    else:
        return None
    return None if value in ordered else value


def tune_constants(
    cfg: RunConfig,
    seeds: Sequence[int],
    mode: str,
    *,
    play: Callable[..., list[dict[str, Any]]],
    scores: dict[str, dict[str, float]] | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    search: str = "extend",
) -> dict[str, float]:
    """The constants of ``constant_tuned``: best grid value on ``seeds``.

    Each constant of :func:`tunable_constants` (star, FedAvg: ``lr``;
    hierarchy: ``topology.lr.gamma``) is tried at :data:`CONSTANT_GRID` × its
    configured value (clipped to its range), one at a time, under
    :data:`TUNED_BASE`;
    with ``search="extend"`` the grid then grows past an edge that holds the
    best value (:func:`next_value`, at most :data:`MAX_EXTENSIONS` values). The
    best mean return wins; ties keep the configured value, then the earlier
    value.

    Args:
        cfg: The scenario's config.
        seeds: The training seeds (disjoint from the held-out ones).
        mode: ``surrogate`` or ``emulate``.
        play: Plays specs on seeds, one row per episode
            (``rayfl.benchmarks.policies.play``).
        scores: If given, filled with {name: {value: mean return}} of every
            value tried.
        progress: Called with each training episode's row.
        search: ``extend`` (default) or ``fixed`` (:data:`SEARCHES`).

    Raises:
        ValueError: For an unknown ``search``.
    """
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {', '.join(SEARCHES)}; got {search!r}")
    chosen: dict[str, float] = {}
    for name, (configured, low, high) in tunable_constants(cfg).items():

        def means(values: Sequence[float], name: str = name) -> dict[float, float]:
            specs: list[Spec] = [
                (f"{CONSTANT}={value}", TUNED_BASE, {**chosen, name: value})
                for value in values
            ]
            rows = pd.DataFrame(play(cfg, specs, seeds, mode, progress))
            by = rows.groupby("policy", sort=False)["return"].mean()
            return {
                value: float(by[label])
                for (label, _, _), value in zip(specs, values, strict=True)
            }

        mine = means(constant_grid(configured, low, high))  # configured first
        for _ in range(MAX_EXTENSIONS if search == "extend" else 0):
            best = max(mine, key=lambda v: mine[v])  # first max: configured
            value = next_value(list(mine), best, low, high)
            if value is None:
                break
            mine |= means([value])
        chosen[name] = max(mine, key=lambda v: mine[v])
        if scores is not None:
            scores[name] = {str(v): mine[v] for v in sorted(mine)}
    return chosen


class ConstantControls:
    """A policy's schedule with every client's controls fixed to ``table``.

    Args:
        policy: The scheduling policy (its own controls, if any, are replaced).
        table: (N, C) control values, the env's ``control_names`` order.
    """

    def __init__(self, policy: Any, table: np.ndarray) -> None:
        self.policy, self.table = policy, np.asarray(table, np.float32)

    def reset(self, seed: int | None = None) -> None:
        """Reset the wrapped policy."""
        self.policy.reset(seed=seed)

    def __call__(self, obs: Any) -> Any:
        """The wrapped policy's schedule with the constant controls."""
        action = self.policy(obs)
        if not isinstance(action, dict):
            action = {"assignment": action}
        return {**action, "controls": self.table.copy()}
