"""The scenarios of ``rayfl bench policies``: each topology plug-in's, three sizes each.

Each registered topology (:data:`rayfl.registry.TOPOLOGIES`) lists its own
scenarios (:meth:`rayfl.topology.TopologyPlugin.scenarios`: the star's in
:mod:`rayfl.star.scenarios`, the hierarchy's in :mod:`rayfl.hierarchy.scenarios`,
D2D's in :mod:`rayfl.d2d.scenarios`); a topology registered at run time
brings its own. Each scenario is a run config (a dict, loaded by
:func:`rayfl.config.load_config`) plus what it is for. Data are the 8×8 digits
shipped with scikit-learn (small, offline, fast in emulate mode) or, for the
large sizes, synthetic federated data. One scenario per shipped topology is
built to break the heuristics' assumptions:

| scenario | what breaks |
|----------|-------------|
| ``star-small-shadowed`` | heterogeneous links: 10 dB log-normal shadowing per client and a 300 m cell make a few clients' channels always bad, so channel-greedy rules (``best_channel``, ``minmax``'s Σρ matching) starve them while fairness-blind rules (``round_robin``) schedule them into deep fades with bit errors; very non-IID data (Dirichlet α = 0.1) makes starving a client expensive |
| ``hierarchical-small-skewed`` | pathological non-IID (one class per device) and devices up to 600 m from their edge (very unequal links) |
| ``d2d-small-shadowed`` | a 15 dB SINR threshold that only a few neighbours meet (Dirichlet α = 0.1 data) |

``hierarchical-small-nodp`` is ``hierarchical-small`` without DP: at ε = 1 the
emulated model does not learn (test losses near 27 nats), so the surrogate
check of the hierarchy runs here.

Sizes: small (N ≈ 10-20), medium (N ≈ 50-60), large (N = 200; D2D 101). D2D
scenarios have |F| = max(3, N // 3) sub-channels, fewer than the N − 1
candidate neighbours, so a top-K rule has to choose.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from rayfl.registry import topology_names, topology_of

__all__ = ["SIZES", "Scenario", "scenario_config", "scenarios", "scenarios_for"]

SIZES = ("small", "medium", "large")


@dataclass(frozen=True)
class Scenario:
    """One benchmark scenario.

    Attributes:
        name: Registered name, ``<topology>-<size>[-variant]``.
        topology: The registered topology it runs on (a plug-in's ``name``).
        size: ``small``, ``medium`` or ``large``.
        config: The run config (a plain dict).
        breaks: What it stresses beyond the heuristics' assumptions ("" if none).
    """

    name: str
    topology: str
    size: str
    config: dict[str, Any] = field(repr=False)
    breaks: str = ""


def scenarios() -> dict[str, Scenario]:
    """Every registered topology's scenarios, by name, in registration order.

    A plug-in that inherits its parent's :meth:`scenarios` (a toy subclass
    of the star) adds none of its own: the parent's are listed once, under
    the parent.

    Raises:
        ValueError: If two topologies list the same scenario name.
    """
    out: dict[str, Scenario] = {}
    seen: set[Any] = set()
    for name in topology_names():
        plugin = topology_of(name)
        hook = type(plugin).scenarios
        if hook in seen:
            continue
        seen.add(hook)
        for key, (size, config, *breaks) in plugin.scenarios().items():
            if key in out:
                raise ValueError(
                    f"scenario {key!r} is listed by topologies {out[key].topology!r} "
                    f"and {plugin.name!r}"
                )
            out[key] = Scenario(key, plugin.name, size, dict(config), *breaks)
    return out


def scenario_config(name: str) -> dict[str, Any]:
    """Return a copy of scenario ``name``'s config.

    Raises:
        ValueError: For an unknown name (the message lists the known ones).
    """
    known = scenarios()
    if name not in known:
        raise ValueError(f"--scenario must be one of {', '.join(known)}; got {name!r}")
    return copy.deepcopy(known[name].config)


def scenarios_for(topology: str = "all", size: str = "all") -> list[Scenario]:
    """The registered scenarios of ``topology`` and ``size`` (``all``: every one).

    Raises:
        ValueError: For an unknown topology or size.
    """
    plugin = None  # "all": every topology
    if topology != "all":
        try:
            plugin = topology_of(topology)  # an alias names its topology
        except ValueError:
            names = ", ".join(topology_names())
            raise ValueError(
                f"--topology must be one of {names}, all; got {topology!r}"
            ) from None
    if size not in (*SIZES, "all"):
        raise ValueError(f"--size must be one of {', '.join(SIZES)}, all; got {size!r}")
    return [
        s
        for s in scenarios().values()
        if (plugin is None or topology_of(s.topology) is plugin)
        and size in ("all", s.size)
    ]
