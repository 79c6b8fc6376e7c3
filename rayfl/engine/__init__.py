"""The engine: one ``System`` for every topology, and the one round loop.

- :class:`Engine` (``rayfl.engine.engine``): session, data, ω⁰, the actor pool;
  delegates the round to a topology strategy (the plug-in's ``strategy()``).
- :func:`build_system` (``rayfl.engine.build``): config → engine; the strategy
  comes from the topology plug-in (``rayfl.registry.topology_of``).
- :func:`run_rounds` (``rayfl.engine.loop``): observe → decide → run_round →
  evaluate → log → checkpoint, for fresh and resumed runs alike.
- ``rayfl.engine.rows``: the ``metrics.parquet`` / ``rounds.parquet`` rows and
  the ``summary.json`` fields built from them.
"""

from rayfl.engine.build import build_system
from rayfl.engine.engine import Engine

__all__ = ["Engine", "build_system"]
