"""Engine: the one implementation of ``rayfl.system.System``.

The engine owns what every topology shares — the Ray session, the federated
data, ω⁰ and the global model's ref, the :class:`rayfl.actors.pool.ActorPool`
— and delegates everything topology-specific to a strategy
(``rayfl.system.RoundStrategy``), the one the run's topology plug-in gives
(``topology_of(config).strategy()``): ``build(engine)`` starts its actors on
``engine.pool``, ``round(engine, t, decision)`` runs a round.

Strategy attributes the engine does not define (``uplink``, ``cloud``,
``algorithm``...) are readable on the engine itself
(``system.uplink.eligible()``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import ray

from rayfl.actors.pool import ActorPool
from rayfl.cluster.session import RaySession
from rayfl.data.federated import FederatedData, build_federated
from rayfl.registry import topology_of
from rayfl.schedule import Schedule
from rayfl.system import Decision, EvalRow, Observation, RoundResult, RoundStrategy
from rayfl.system import initial_vector as _initial_vector

__all__ = ["Engine"]


class Engine:
    """The actors of one run and one round at a time (``rayfl.system.System``).

    Args:
        config: The run config.
        data: A prebuilt federated dataset (default: built from ``config.data``).
        strategy: The topology strategy (default: a new one of the config's
            topology plug-in, ``topology_of(config).strategy()``).

    Example:
        >>> with Engine(load_config("examples/quickstart.yaml")) as system:  # doctest: +SKIP
        ...     result = system.run_round(0, Schedule.of([0, 1]))
    """

    def __init__(
        self,
        config: Any,
        data: FederatedData | None = None,
        *,
        strategy: RoundStrategy | None = None,
    ) -> None:
        self.config = config
        plugin = topology_of(config)
        self.strategy: Any = strategy if strategy is not None else plugin.strategy()
        #: The topology plug-in's name (``rayfl.registry.topology_of``).
        self.topology: str = plugin.name
        self.pool: ActorPool | None = None
        self.session = RaySession(config.ray)
        try:
            self._build(data)
        except BaseException:
            self.close()
            raise

    def _build(self, data: FederatedData | None) -> None:
        cfg = self.config
        self.data = (
            data if data is not None else build_federated(cfg.data, seed=cfg.seed)
        )
        self.num_clients = self.data.num_clients
        self.num_train = np.asarray(self.data.num_train, dtype=np.int64)
        self.num_test = np.asarray(self.data.num_test, dtype=np.int64)
        self._put_initial()
        self.strategy.build(self)

    def _put_initial(self) -> None:
        """Draw ω⁰ from ``config.seed`` and make it the global model."""
        vector = _initial_vector(
            self.config, tuple(self.data.input_shape), self.data.num_classes
        )
        self.dim = len(vector)
        self.global_ref = ray.put(vector)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the engine lacks: the strategy's own attributes.
        strategy = self.__dict__.get("strategy")
        if strategy is None or name.startswith("__"):
            raise AttributeError(name)
        try:
            return getattr(strategy, name)
        except AttributeError:
            raise AttributeError(
                f"{type(self).__name__} ({self.topology}) has no attribute {name!r}"
            ) from None

    # ------------------------------------------------------------------ System
    @property
    def num_units(self) -> int:
        """Decision units (the strategy's count: one, an edge each, a target each...)."""
        return int(self.strategy.num_units(self))

    @property
    def actors(self) -> list[Any]:
        """The client-hosting actors (``pool.actors``)."""
        return self.pool.actors if self.pool is not None else []

    @property
    def groups(self) -> list[list[int]]:
        """Client ids of each actor (``pool.groups``)."""
        return self.pool.groups if self.pool is not None else []

    @property
    def actor_of(self) -> npt.NDArray[np.int64]:
        """Actor index of each client (``pool.actor_of``)."""
        assert self.pool is not None
        return self.pool.actor_of

    def observe(self, t: int) -> tuple[Observation, ...]:
        """Return round ``t``'s observation of each unit."""
        return tuple(self.strategy.observe(self, t))

    def exhausted(self) -> bool:
        """Return True when no client may upload any more (T0, budgets)."""
        return bool(self.strategy.exhausted(self))

    def run_round(self, round: int, decision: Decision | Schedule) -> RoundResult:
        """Run round ``round`` with one schedule per unit.

        Args:
            round: Round index t.
            decision: One schedule per unit; a bare :class:`Schedule` is the
                decision of a one-unit (star) system.
        """
        if isinstance(decision, Schedule):
            decision = (decision,)
        return self.strategy.round(self, round, tuple(decision))

    def evaluate(self) -> list[EvalRow] | None:
        """Evaluate every client; one record per client, by id."""
        return self.strategy.evaluate(self)

    def restart(self, seed: int) -> None:
        """Start a new run with ``seed`` on the same actors and federated data.

        Model initialisation, batch order, noise, channel geometry and fading are
        redrawn from ``seed``; the data partition (drawn when the system was
        built) is kept, so restarting costs no actor start-up.
        """
        self.config = self.config.model_copy(update={"seed": int(seed)})
        self._put_initial()
        self.strategy.restart(self, int(seed))

    def state_dict(self) -> dict[str, Any]:
        """Return the run state for a checkpoint (pulls the model and client states)."""
        return {"global": self.global_vector(), **self.strategy.state_dict(self)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` (the packing may differ from the saved run)."""
        self.global_ref = ray.put(np.asarray(state["global"], dtype=np.float32))
        self.strategy.load_state_dict(self, state)

    def placement(self) -> dict[str, Any]:
        """Return where the actors run (node ids)."""
        return self.strategy.placement(self)

    def summary(self) -> dict[str, Any]:
        """Return the topology's block of ``summary.json``."""
        return self.strategy.summary(self)

    def write_extra(self, run_dir: Path) -> None:
        """Write the topology's extra files into ``run_dir``."""
        self.strategy.write_extra(self, Path(run_dir))

    def close(self) -> None:
        """Kill the actors and stop Ray if this system started it."""
        self.strategy.close(self)
        if self.pool is not None:
            self.pool.close()
        self.session.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ clients
    def client_states(self) -> dict[int, dict[str, Any]]:
        """Pull every client's state from the actors (small dicts, personal models)."""
        assert self.pool is not None
        self.pool.restore_failed()
        states = ray.get([a.get_client_states.remote() for a in self.pool.actors])
        return {int(c): dict(v) for state in states for c, v in state.items()}

    def set_client_states(self, clients: dict[int, dict[str, Any]]) -> None:
        """Push client states to the actors hosting them (any packing)."""
        assert self.pool is not None
        ray.get(
            [
                actor.set_client_states.remote(
                    {c: clients[c] for c in group if c in clients}
                )
                for actor, group in zip(self.pool.actors, self.pool.groups, strict=True)
            ]
        )

    def local_updates(self) -> list[int]:
        """Return how many local updates each client has made (pulls small dicts)."""
        own = getattr(self.strategy, "local_updates", None)
        if own is not None:  # a strategy that counts them on the driver
            return list(own(self))
        counts = [0] * self.num_clients
        for c, s in self.client_states().items():
            counts[c] = int(s.get("local_updates", 0))
        return counts

    def global_vector(self) -> npt.NDArray[np.float32]:
        """Return ω^t (pulls the array: not for the hot path)."""
        return np.array(ray.get(self.global_ref))
