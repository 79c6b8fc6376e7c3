"""A run's configuration: the typed tree, how it is read, checked and swept.

A run is configured by one YAML file (see ``examples/``) validated into
:class:`RunConfig`, a tree of frozen pydantic models, one per section.
Command-line overrides use dotted paths: ``rayfl run cfg.yaml rounds=5
data.num_clients=100``. A bad value raises :class:`ConfigError`, whose message
names the field path, the bad value and the allowed values in a few lines.

The package's modules:

- :mod:`.run`: :class:`RunConfig`, its cross-section checks, :func:`load_config`
  and the overrides;
- :mod:`.loader`: reading YAML safely (bounded, total, no YAML 1.1 surprises);
- :mod:`.errors`: validation errors as short lines;
- :mod:`.sweep`: the ``sweep:`` grid, checked before Ray starts, and overrides
  that replace a swept key;
- :mod:`.semantics`: checks across sections that need the runtime's rules
  (the quantizer's range, the uplink's noise calibration...);
- :mod:`.numbers`: number fields refuse booleans;
- :mod:`.scheduler`: the ``scheduler`` section and each topology's default
  policy;
- :mod:`.topology`: the ``topology`` section, one member per registered
  topology plug-in (each plug-in's ``check_run`` adds its own rules).

The sections themselves live beside their features (``rayfl/wireless/config.py``,
``rayfl/learning/config.py``, ``rayfl/cluster/config.py``, ...). The names below
are imported on first use: importing a module of the package does not import
every section through :class:`RunConfig`. Text and path fields are checked by
:mod:`rayfl.text_checks`, which every section may use.

Example:
    >>> from rayfl.config import load_config
    >>> cfg = load_config({"rounds": 3}, ["data.num_clients=8", "algorithm.lr=0.1"])
    >>> (cfg.rounds, cfg.data.num_clients, cfg.algorithm.lr)
    (3, 8, 0.1)
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rayfl.config.loader import ConfigError
    from rayfl.config.run import (
        ModelConfig,
        OutputConfig,
        RayConfig,
        RunConfig,
        SchedulerConfig,
        load_config,
        parse_overrides,
        replaced_sweep_lines,
    )

__all__ = [
    "ConfigError",
    "ModelConfig",
    "OutputConfig",
    "RayConfig",
    "RunConfig",
    "SchedulerConfig",
    "load_config",
    "parse_overrides",
    "replaced_sweep_lines",
]

_LAZY = {name: "rayfl.config.run" for name in __all__} | {
    "ConfigError": "rayfl.config.loader"
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rayfl.config' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
