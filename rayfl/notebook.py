"""Session: a warm engine for runs in one Python session (notebooks).

``rayfl.run`` builds a run's actors (client hosts with their data, the cloud)
and kills them at the end, so every run pays actor start-up. A
:class:`Session` keeps the last run's engine alive and hands it to the next run
when that run needs no new actors::

    with rayfl.Session() as session:
        first = session.run("examples/quickstart.yaml", rounds=4)
        second = session.run("examples/quickstart.yaml", rounds=8,
                             scheduler__policy="round_robin")   # reuses the actors

The rule (:meth:`Session.reuse_blocker`): the live engine is reused when the
new config differs from the one it was built for only in :data:`WARM_FIELDS`
(``name``, ``rounds``, ``eval_every``, ``scheduler``, ``output``), the
topology keeps its actors warm (capability ``keeps_warm`` of its plug-in:
the star), the last run completed, and, when ``rounds`` changed,
the uplink's DP noise calibrated for it is unchanged (the client hosts build
their noise stages once). Anything else — the seed (it draws the data
partition), data, model, algorithm, privacy, compression, wireless, ray —
rebuilds. Each run prints one line saying which, and why.

A reused run restarts the engine (``Engine.restart``): ω⁰, batch order, noise,
channel and every client's state are drawn again from the seed, so its results
equal those of a cold ``rayfl.run`` of the same config (tests/test_warm_session.py
compares them).

The session starts Ray once (with the first run's ``ray`` section) unless Ray
is already running, and stops it on :meth:`Session.close` only if it started
it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rayfl.config import RunConfig
from rayfl.registry import topology_of
from rayfl.rundir.results import RunResult

__all__ = ["WARM_FIELDS", "Session"]

#: Run-config fields a reused engine may see change (no new actors needed).
WARM_FIELDS = frozenset({"name", "rounds", "eval_every", "scheduler", "output"})


class Session:
    """Runs that reuse the live actors when they can (see the module docstring).

    Attributes:
        last_reused: Whether the last run reused the live engine (None before any).
        last_reason: Why it was rebuilt ("" when reused).
    """

    def __init__(self) -> None:
        self._engine: Any = None
        self._ray: Any = None
        self._completed = False
        self.last_reused: bool | None = None
        self.last_reason = ""

    def run(
        self,
        config: str | Path | Mapping[str, Any] | RunConfig | None = None,
        overrides: Iterable[str] | Mapping[str, Any] = (),
        **kw_overrides: Any,
    ) -> RunResult:
        """Run one experiment on the warm engine (arguments as :func:`rayfl.run`).

        Returns:
            The run's results, as :func:`rayfl.run` returns them.

        Raises:
            ConfigError, RunFailed, RunInterrupted: As :func:`rayfl.run`; after
                a run that did not complete, the next run rebuilds the actors.
        """
        from rayfl.runner import _run, resolve_config

        cfg = resolve_config(config, overrides, kw_overrides)
        result = _run(cfg, source=self._system)
        self._completed = True
        return result

    def reuse_blocker(self, cfg: RunConfig) -> str | None:
        """Return why ``cfg`` needs new actors, or None if the live engine fits.

        Args:
            cfg: The next run's config.
        """
        engine = self._engine
        if engine is None:
            return "no live engine"
        if not self._completed:
            return "the last run did not complete"
        live = engine.config
        if live.seed != cfg.seed:
            return f"seed changed ({live.seed} -> {cfg.seed}; it draws the data)"
        changed = [
            name
            for name in type(cfg).model_fields
            if name not in WARM_FIELDS and getattr(live, name) != getattr(cfg, name)
        ]
        if changed:
            return f"{', '.join(changed)} changed"
        if "keeps_warm" not in topology_of(engine.config).capabilities:
            return f"topology {engine.topology} does not keep its actors warm"
        if live.rounds != cfg.rounds and _noise(engine, live) != _noise(engine, cfg):
            return "rounds changed the calibrated DP noise"
        return None

    def _system(self, cfg: RunConfig) -> Any:
        """Return the engine for ``cfg``: the live one restarted, or a new one."""
        from rayfl.cluster.session import RaySession
        from rayfl.engine import build_system

        if self._ray is None:
            self._ray = RaySession(cfg.ray)
        reason = self.reuse_blocker(cfg)
        self._completed = False  # until this run returns
        self.last_reused = reason is None
        self.last_reason = reason or ""
        if reason is None:
            engine = self._engine
            engine.config = cfg
            engine.restart(cfg.seed)
            engine.pool.state_refs.clear()  # the last run's snapshots
            print("rayfl: session: reusing the live actors", file=sys.stderr)
            return engine
        self._close_engine()
        print(f"rayfl: session: building new actors ({reason})", file=sys.stderr)
        self._engine = build_system(cfg)
        return self._engine

    def _close_engine(self) -> None:
        if self._engine is not None:
            engine, self._engine = self._engine, None
            engine.close()

    def close(self) -> None:
        """Kill the live actors; stop Ray if this session started it."""
        try:
            self._close_engine()
        finally:
            if self._ray is not None:
                self._ray.close()
                self._ray = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _noise(engine: Any, cfg: RunConfig) -> tuple[Any, ...]:
    """The uplink DP noise (σ, server σ, per-client σ_n) ``cfg`` calibrates."""
    from rayfl.uplink import UplinkModel

    uplink = UplinkModel(cfg, num_train=engine.num_train, model_dim=engine.dim)
    per_client = uplink.client_noise_std
    return (
        uplink.noise_std,
        uplink.server_noise_std,
        None if per_client is None else tuple(per_client.tolist()),
    )
