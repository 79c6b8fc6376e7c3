"""The tuned baselines of ``rayfl bench policies``: what is tuned, and how.

A learned policy is read beside tuned constants (DESIGN.md), and beside each
heuristic tuned for itself (issue 47):

| row | policy | what is tuned |
|-----|--------|---------------|
| ``constant_tuned`` | round robin (:data:`TUNED_BASE`) | the topology's constants (:func:`tunable_constants`) |
| ``<policy>_tuned`` (``--self-tune``) | that policy | the topology's constants, unless the policy sets them itself, then its own parameters (:func:`policy_knobs`) |

Each knob is held at the grid value (:data:`CONSTANT_GRID` × its configured or
default value, clipped to its range) with the best mean return on the training
seeds, disjoint from the held-out ones, one knob at a time (a coordinate
search: the topology's constants first, then the policy's own parameters, each
at the values already chosen). A best value at the grid's
edge is not a tuned one, so the search (``search="extend"``, the default) goes
on past that edge in steps of ×2 (or ÷2), up to :data:`MAX_EXTENSIONS` steps,
until the best value has a worse neighbour on both sides or sits at the
knob's range limit; if a policy's own parameter is still best at an edge
after them, the range's (finite) limit itself is tried (:func:`edge_limit`:
÷2 never reaches 0, and a neighbour probability or an ε of 0 is local
training; not for the topology's step sizes, where 0 learns nothing); ``search="fixed"`` keeps the four grid values (what
benchmark runs before 29 Nov 2026 did). Ties keep the configured (default)
value, then the earlier value.

The topology's constants are the topology plug-in's answer
(:meth:`rayfl.topology.TopologyPlugin.tunable_constants`); how they are applied,
its ``"tunes_config"`` capability:

| topology | what is tuned (:func:`tunable_constants`) | how it is applied |
|----------|-------------------------------------------|-------------------|
| star | the algorithm's per-client controls (FedAvg: ``lr``) | the env's ``controls`` action, the same for every client and round (:class:`ConstantControls`); not for a policy that sets the controls itself (``uses_controls``: ``minmax``) |
| hierarchical (``tunes_config``) | the configured step size: ``topology.lr.gamma`` (``lr.mode: manual``, η_k = γ/√(k+1)) or ``algorithm.lr`` (``constant``); nothing in ``theory`` | a config value (:func:`env_config`): the env schedules subchannels only, it has no per-device controls |
| d2d | nothing | – |

A policy's own parameters are those it declares in its ``tunable`` class
attribute (:class:`policies.base.Policy`: {name: (default, low, high)}), passed
to its constructor:

| policy | parameter | default | range |
|--------|-----------|---------|-------|
| ``data_weighted`` | ``power``, the data size's exponent | 1 | [0, 16] |
| ``proportional_fair`` | ``window`` W, rounds of the SNR average | 20 | [1, ∞) |
| ``lyapunov`` | ``V`` (λ), the drift-plus-penalty weight | 50 | (0, ∞) |
| ``minmax`` | ``mu`` μ of the bound, η_F = μ/(2(1 + ϕ1)L²) (P5) | 0.05 | [0.026, 0.58] (C11 at L = 0.29) |
| ``channel_threshold`` | ``epsilon`` ε, the error-probability threshold | 0.05 | (0, 1] |
| ``random_neighbors`` | ``probability`` p | 0.5 | [0, 1] |

``minmax`` has no lr of its own to tune: it sends η_F as the ``lr`` control,
so its ``μ`` is what moves the step size. The other heuristics
(``round_robin``, ``random``, ``best_channel``, ``age_based``, ``delay_min``,
``deadline_max_weight``, ``non_adjustment``) have no numeric knob of their own
(``delay_min``'s and ``deadline_max_weight``'s are the link's constants: the
deadline, ρ, the upload size): their ``_tuned`` row tunes the topology's
constants only, so on D2D they have none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from rayfl.benchmarks.policies.search_values import (
    CONSTANT_GRID,
    MAX_EXTENSIONS,
    constant_grid,
    edge_limit,
    next_value,
)
from rayfl.config import RunConfig, load_config
from rayfl.registry import LEARNED_POLICY, policy_class, topology_of

__all__ = [
    "CONSTANT",
    "CONSTANT_GRID",
    "MAX_EXTENSIONS",
    "SEARCHES",
    "TUNED",
    "TUNED_BASE",
    "ConstantControls",
    "check_tunable",
    "constant_grid",
    "env_config",
    "is_tuned",
    "policy_knobs",
    "row_knobs",
    "split_params",
    "tunes_config",
    "tunable_constants",
    "tune_constants",
    "tune_policy",
    "tune_rows",
    "edge_limit",
]

CONSTANT = "constant_tuned"
#: The policy ``constant_tuned`` schedules with (a benchmark choice).
TUNED_BASE = "round_robin"
#: How ``constant_tuned`` searches: the grid, or the grid extended past its edge.
SEARCHES = ("extend", "fixed")
#: The suffix of a self-tuned heuristic's label: ``<policy>_tuned``.
TUNED = "_tuned"
Spec = tuple[str, str, dict[str, Any]]  # (label, registered name, params)
Knobs = dict[str, tuple[float, float, float]]  # name: (configured, low, high)


def is_tuned(spec: Spec) -> bool:
    """True for a tuned row's spec: ``constant_tuned`` or ``<policy>_tuned``.

    Its tuning specs (``<label>:<knob>=<value>``, ``constant_tuned=<value>``)
    too; never a learned policy.

    Example:
        >>> is_tuned(("data_weighted_tuned:power=0.5", "data_weighted", {}))
        True
        >>> is_tuned(("data_weighted", "data_weighted", {}))
        False
    """
    label, name, _ = spec
    row = label.partition("=")[0].partition(":")[0]
    return row.endswith(TUNED) and name != LEARNED_POLICY


def check_tunable(name: str) -> Knobs:
    """Policy ``name``'s own tunable parameters (its ``tunable``), checked.

    Raises:
        ValueError: For an unknown policy, or a declaration that is not
            (default, low, high) with low ≤ default ≤ high and default ≠ 0
            (the grid multiplies the default).
    """
    declared = dict(getattr(policy_class(name), "tunable", {}) or {})
    for param, entry in declared.items():
        ok = isinstance(entry, tuple) and len(entry) == 3
        if ok:
            default, low, high = (float(v) for v in entry)
            ok = low <= default <= high and default != 0
        if not ok:
            raise ValueError(
                f"policy {name!r}: tunable[{param!r}] must be (default, low, high) "
                f"with low <= default <= high and default != 0; got {entry!r}"
            )
    return {k: tuple(float(v) for v in e) for k, e in declared.items()}  # type: ignore[misc]


def policy_knobs(cfg: RunConfig, name: str) -> Knobs:
    """What ``<name>_tuned`` tunes on ``cfg``, in search order: {name: (default, low, high)}.

    The topology's constants (:func:`tunable_constants`), except env controls
    for a policy that sets the controls itself (``uses_controls``: ``minmax``
    sends η_F as ``lr``), then the policy's own parameters (:func:`check_tunable`).

    Raises:
        ValueError: For an unknown policy, a bad ``tunable`` or a parameter
            named like a topology constant.
    """
    own = check_tunable(name)
    constants = tunable_constants(cfg)
    if not tunes_config(cfg) and getattr(policy_class(name), "uses_controls", False):
        constants = {}
    clash = sorted(set(own) & set(constants))
    if clash:
        raise ValueError(
            f"policy {name!r}: tunable parameters {clash} are also the topology's "
            "constants; rename them"
        )
    return constants | own


def split_params(
    cfg: RunConfig, name: str, params: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A tuned spec's params as (the policy's own, the topology's constants).

    Own parameters (policy ``name``'s ``tunable``) go to its constructor,
    checked against their range; the rest are the topology's constants
    (controls or config values).

    Raises:
        ValueError: For an own parameter outside its range, or a parameter
            that is neither.

    Example:
        >>> from rayfl.config import load_config
        >>> cfg = load_config({"name": "x", "data": {"num_clients": 4}})
        >>> split_params(cfg, "data_weighted", {"power": 0.5, "lr": 0.1})
        ({'power': 0.5}, {'lr': 0.1})
    """
    own_knobs, constants = check_tunable(name), tunable_constants(cfg)
    own: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in params.items():
        if key in own_knobs:
            _, low, high = own_knobs[key]
            if not low <= float(value) <= high:
                raise ValueError(
                    f"policy {name!r}: {key}={value} is outside its range "
                    f"[{low:g}, {high:g}]"
                )
            own[key] = value
        elif key in constants:
            rest[key] = value
        else:
            known = sorted(own_knobs) + sorted(constants)
            raise ValueError(
                f"policy {name!r} has no tunable parameter {key!r} on {cfg.name}; "
                f"it has {known or 'none'}"
            )
    return own, rest


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


def env_config(cfg: RunConfig, spec: Spec) -> RunConfig:
    """The config ``spec`` plays on: ``cfg``, or with its tuned config values.

    Where the topology :func:`tunes_config` (the hierarchy), a tuned row's
    topology constants are dotted config keys (:func:`tunable_constants`; its
    own parameters go to the policy, :func:`split_params`); elsewhere they are env controls
    (``rayfl.benchmarks.policies.build_policy``), so the config is ``cfg``.
    """
    if not is_tuned(spec) or not spec[2] or not tunes_config(cfg):
        return cfg
    _, constants = split_params(cfg, spec[1], spec[2])
    return load_config(cfg, constants) if constants else cfg


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
    hierarchy: ``topology.lr.gamma``) is searched under :data:`TUNED_BASE`
    by :func:`tune_policy`.

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
    return tune_policy(
        cfg,
        seeds,
        mode,
        play=play,
        policy=TUNED_BASE,
        label=CONSTANT,
        knobs=tunable_constants(cfg),
        scores=scores,
        progress=progress,
        search=search,
    )


def tune_policy(
    cfg: RunConfig,
    seeds: Sequence[int],
    mode: str,
    *,
    play: Callable[..., list[dict[str, Any]]],
    policy: str,
    label: str | None = None,
    knobs: Knobs | None = None,
    scores: dict[str, dict[str, float]] | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    search: str = "extend",
) -> dict[str, float]:
    """The values of a tuned row's knobs: each the best on ``seeds``, one at a time.

    Each knob (in order) is tried at :data:`CONSTANT_GRID` × its configured
    value (clipped to its range) under ``policy``, the knobs already chosen
    held; with ``search="extend"`` the grid then grows past an edge that
    holds the best value (:func:`next_value`, at most :data:`MAX_EXTENSIONS`
    values; then, for a policy's own parameter still best at an edge, the
    range's limit, :func:`edge_limit`). The best mean return wins; ties keep the configured value, then
    the earlier value. The specs played are ``(f"{label}:{knob}={value}",
    policy, params)`` (``constant_tuned``: ``f"constant_tuned={value}"``, as
    before).

    Args:
        cfg: The scenario's config.
        seeds: The training seeds (disjoint from the held-out ones).
        mode: ``surrogate`` or ``emulate``.
        play: Plays specs on seeds, one row per episode
            (``rayfl.benchmarks.policies.play``).
        policy: The registered policy that plays.
        label: The tuned row's label (default ``<policy>_tuned``).
        knobs: {name: (configured, low, high)} (default:
            :func:`policy_knobs` of ``policy``).
        scores: If given, filled with {name: {value: mean return}} of every
            value tried.
        progress: Called with each training episode's row.
        search: ``extend`` (default) or ``fixed`` (:data:`SEARCHES`).

    Raises:
        ValueError: For an unknown ``search``.
    """
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {', '.join(SEARCHES)}; got {search!r}")
    label = label or f"{policy}{TUNED}"
    knobs = policy_knobs(cfg, policy) if knobs is None else knobs
    own = set() if label == CONSTANT else set(check_tunable(policy))
    chosen: dict[str, float] = {}
    for name, (configured, low, high) in knobs.items():

        def means(values: Sequence[float], name: str = name) -> dict[float, float]:
            prefix = label if label == CONSTANT else f"{label}:{name}"
            specs: list[Spec] = [
                (f"{prefix}={value}", policy, {**chosen, name: value})
                for value in values
            ]
            rows = pd.DataFrame(play(cfg, specs, seeds, mode, progress))
            by = rows.groupby("policy", sort=False)["return"].mean()
            return {
                value: float(by[spec_label])
                for (spec_label, _, _), value in zip(specs, values, strict=True)
            }

        mine = means(constant_grid(configured, low, high))  # configured first
        for _ in range(MAX_EXTENSIONS if search == "extend" else 0):
            best = max(mine, key=lambda v: mine[v])  # first max: configured
            value = next_value(list(mine), best, low, high)
            if value is None:
                break
            mine |= means([value])
        if search == "extend" and name in own:
            limit = edge_limit(list(mine), max(mine, key=lambda v: mine[v]), low, high)
            if limit is not None:  # still at an edge: try the range's limit
                mine |= means([limit])
        chosen[name] = max(mine, key=lambda v: mine[v])
        if scores is not None:
            scores[name] = {str(v): mine[v] for v in sorted(mine)}
    return chosen


def row_knobs(cfg: RunConfig, spec: Spec) -> Knobs:
    """What a tuned row tunes: ``constant_tuned``'s constants or :func:`policy_knobs`."""
    label, name, _ = spec
    return tunable_constants(cfg) if label == CONSTANT else policy_knobs(cfg, name)


def tune_rows(
    cfg: RunConfig,
    specs: Sequence[Spec],
    seeds: Sequence[int],
    mode: str,
    *,
    play: Callable[..., list[dict[str, Any]]],
    progress: Callable[[dict[str, Any]], None] | None = None,
    search: str = "extend",
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, dict[str, float]]]]:
    """Tune every tuned row of ``specs`` (:func:`is_tuned`) on ``seeds``.

    ``constant_tuned`` by :func:`tune_constants`, each ``<policy>_tuned`` by
    :func:`tune_policy`, with the same ``play``, ``progress`` and ``search``.

    Returns:
        ({label: {knob: value}}, {label: {knob: {value: mean return}}}).
    """
    chosen: dict[str, dict[str, float]] = {}
    grids: dict[str, dict[str, dict[str, float]]] = {}
    for spec in filter(is_tuned, specs):
        label, name, _ = spec
        grids[label] = {}
        chosen[label] = tune_policy(
            cfg,
            seeds,
            mode,
            play=play,
            policy=TUNED_BASE if label == CONSTANT else name,
            label=label,
            knobs=row_knobs(cfg, spec),
            scores=grids[label],
            progress=progress,
            search=search,
        )
    return chosen, grids


class ConstantControls:
    """A policy's schedule with every client's controls fixed to ``table``.

    Args:
        policy: The scheduling policy.
        table: (N, C) control values, the env's ``control_names`` order.
        columns: The tuned columns: where the policy sends controls of its
            own, only these are replaced (``lyapunov``'s); None: all. A policy
            without controls gets ``table`` whole.
    """

    def __init__(
        self, policy: Any, table: np.ndarray, columns: Sequence[int] | None = None
    ) -> None:
        self.policy, self.table = policy, np.asarray(table, np.float32)
        self.columns = None if columns is None else list(columns)

    def reset(self, seed: int | None = None) -> None:
        """Reset the wrapped policy."""
        self.policy.reset(seed=seed)

    def __call__(self, obs: Any) -> Any:
        """The wrapped policy's schedule with the constant controls."""
        action = self.policy(obs)
        if not isinstance(action, dict):
            action = {"assignment": action}
        table = self.table.copy()
        if self.columns is not None and "controls" in action:
            table = np.array(action["controls"], dtype=np.float32)
            table[:, self.columns] = self.table[:, self.columns]
        return {**action, "controls": table}
