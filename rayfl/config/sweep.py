"""The ``sweep:`` section against overrides, and every sweep variant validated.

Two rules, applied by :func:`rayfl.config.load_config`:

* **An override of a swept key replaces that axis of the sweep.** The value
  the user gave on the command line (or in an overrides mapping) wins: the
  sweep loses that axis, and when no axis remains the config is a single run.
  A key "overlaps" a swept key when they are equal or one is a dotted prefix of
  the other (``privacy=...`` replaces a sweep over ``privacy.epsilon``). The
  config records what was replaced in ``replaced_sweep`` (swept key → the
  override and the sweep's values); ``rayfl run`` says so in one line on the
  console (:func:`replaced_sweep_lines`) and in each run's ``summary.json``.
  Overrides of ``sweep.<key>`` set the sweep itself and replace nothing.
* **Every variant is valid before anything runs**: each value of each axis
  is validated on the base config (:func:`check_variants`), and the whole grid
  when it has at most :data:`MAX_GRID_CHECKS` points, so a bad value fails in
  one line naming ``sweep.<key>`` and the value, before Ray starts. A sweep
  over a field the shared Ray session reads at start (:data:`SESSION_KEYS`)
  is refused: its values would be ignored.

Example:
    >>> tree = {"sweep": {"privacy.epsilon": [1, 4, None]}}
    >>> take_swept(tree, {"privacy.epsilon": 2.5})
    {'privacy.epsilon': {'override': 'privacy.epsilon=2.5', 'values': [1, 4, None]}}
    >>> tree
    {'sweep': {}}
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rayfl.config.loader import ConfigError, clip, clip_text

__all__ = [
    "MAX_GRID_CHECKS",
    "SESSION_KEYS",
    "check_variants",
    "overlaps",
    "record_replaced_sweep",
    "replaced_sweep_lines",
    "set_dotted",
    "take_swept",
]

MAX_GRID_CHECKS = 256
#: The ``ray`` fields read when the Ray session starts (``rayfl.cluster.session``): the
#: variants of a sweep share one session, started with the base config's.
SESSION_KEYS = (
    "ray.address",
    "ray.num_cpus",
    "ray.local_processes",
    "ray.object_store_memory_mb",
)


def overlaps(key: str, swept: str) -> bool:
    """Whether setting ``key`` changes what the sweep over ``swept`` sets.

    Example:
        >>> overlaps("privacy", "privacy.epsilon"), overlaps("privacy.delta", "privacy.epsilon")
        (True, False)
    """
    return key == swept or swept.startswith(key + ".") or key.startswith(swept + ".")


def _yaml_text(value: Any) -> str:
    """``value`` as a user would write it (``null``, ``2.5``...), kept short."""
    try:
        return clip_text(json.dumps(value, allow_nan=True), 40)
    except (TypeError, ValueError):
        return clip(value, 40)


def take_swept(tree: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Remove from ``tree["sweep"]`` every axis an override sets; return them.

    Returns:
        Swept key → ``{"override": "key=value", "values": [...]}``.
    """
    sweep = tree.get("sweep")
    if not isinstance(sweep, dict):
        return {}
    replaced = {}
    for key, value in overrides.items():
        if key == "sweep" or key.startswith("sweep."):
            continue
        for swept in [s for s in sweep if isinstance(s, str) and overlaps(key, s)]:
            values = sweep.pop(swept)
            replaced[swept] = {
                "override": f"{clip_text(key)}={_yaml_text(value)}",
                "values": values,
            }
    return replaced


def replaced_sweep_lines(replaced: Mapping[str, Any]) -> list[str]:
    """The console lines telling which sweep axes an override replaced.

    Example:
        >>> replaced_sweep_lines({"privacy.epsilon": {
        ...     "override": "privacy.epsilon=2.5", "values": [1, None]}})
        ["rayfl: privacy.epsilon=2.5 replaces the config's sweep over privacy.epsilon (1, null)"]
    """
    lines = []
    for swept, entry in replaced.items():
        values = entry.get("values")
        shown = (
            ", ".join(_yaml_text(v) for v in values) if isinstance(values, list) else ""
        )
        lines.append(
            f"rayfl: {entry.get('override')} replaces the config's sweep over "
            f"{swept} ({clip_text(shown, 120)})"
        )
    return lines


def record_replaced_sweep(run_dir: Path, replaced: Mapping[str, Any]) -> None:
    """Add ``replaced_sweep`` to ``run_dir/summary.json`` (atomically)."""
    from rayfl.rundir.atomic import atomic_write
    from rayfl.rundir.status import json_safe

    path = Path(run_dir) / "summary.json"
    if not replaced or not path.is_file():
        return
    summary = json.loads(path.read_text())
    summary["replaced_sweep"] = json_safe(dict(replaced))  # strict JSON: NaN → null
    text = json.dumps(summary, indent=2, allow_nan=False)
    atomic_write(path, lambda p: p.write_text(text))


def set_dotted(tree: dict[str, Any], path: list[str], value: Any) -> None:
    """Set ``tree[a][b]... = value`` for ``path`` ``[a, b, ...]``, making sections.

    ``sweep.<dotted key>`` sets one axis of the sweep (its key keeps its dots).
    """
    if path[0] == "sweep" and len(path) > 1:
        path = ["sweep", ".".join(path[1:])]
    node = tree
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def _variant_tree(base: dict[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    tree = json.loads(json.dumps(base, allow_nan=True))  # a deep copy of plain data
    tree["sweep"] = {}
    for key, value in values.items():
        set_dotted(tree, key.split("."), value)
    return tree


def _problem(error: ConfigError) -> str:
    lines = [ln.strip() for ln in str(error).splitlines()]
    return "; ".join(ln for ln in lines if ln and ln != "invalid config:")


def check_variants(
    base: dict[str, Any],
    sweep: Mapping[str, list[Any]],
    validate: Callable[[dict[str, Any]], Any],
) -> None:
    """Validate every value of every axis of ``sweep`` on ``base`` (a resolved tree).

    Each axis's values are validated with the other keys at the base's values;
    then the whole grid when it has at most :data:`MAX_GRID_CHECKS` points.

    Raises:
        ConfigError: ``invalid config:`` then one line naming ``sweep.<key>``
            and the bad value (or the grid point) and the problem.
    """
    for key, values in sweep.items():
        for value in values:
            try:
                validate(_variant_tree(base, {key: value}))
            except ConfigError as e:
                raise ConfigError(
                    f"invalid config:\n  sweep.{key}: the value {clip(value)} is "
                    f"invalid: {_problem(e)}"
                ) from None
    for key in sweep:
        shared = [k for k in SESSION_KEYS if overlaps(key, k)]
        if shared:
            raise ConfigError(
                f"invalid config:\n  sweep.{clip_text(key)}: the sweep's runs share one "
                f"Ray session, started with the config's {shared[0]}; set it "
                "outside the sweep (or run the config once per value)"
            )
    keys = list(sweep)
    if len(keys) < 2 or math.prod(len(v) for v in sweep.values()) > MAX_GRID_CHECKS:
        return
    for combo in itertools.product(*(sweep[k] for k in keys)):
        point = dict(zip(keys, combo, strict=True))
        try:
            validate(_variant_tree(base, point))
        except ConfigError as e:
            shown = ", ".join(f"{k}={clip(v)}" for k, v in point.items())
            raise ConfigError(
                f"invalid config:\n  sweep: the variant {clip_text(shown, 200)} is "
                f"invalid: {_problem(e)}"
            ) from None
