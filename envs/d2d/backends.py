"""What a ``D2DNeighbor-v0`` round returns, and the real system behind emulate mode.

:class:`D2DOutcome` is what both backends return per round;
:class:`D2DEmulatedBackend` drives the D2D engine (:mod:`rayfl.d2d.round`, Ray
actors, real data). The surrogate backend is :mod:`envs.d2d.surrogate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.config import RunConfig
from rayfl.d2d.motion import D2DMotion
from rayfl.d2d.selection import D2DLayout, pi_vector
from rayfl.data.federated import FederatedData, build_federated

__all__ = ["D2DEmulatedBackend", "D2DOutcome", "Selections"]

#: Target → (its neighbors M_n ascending, the sub-channel of each).
Selections = dict[int, tuple[tuple[int, ...], tuple[int, ...]]]


@dataclass
class D2DOutcome:
    """What one round returns to the env, per target.

    Attributes:
        test_loss: Target → loss of its reported model on its test split.
        test_acc: Target → accuracy (NaN in surrogate mode).
        delivered: Target → neighbors whose model arrived.
        em_weight: Target → (N,) π over its neighbors (0 elsewhere).
        train_loss: Client → train loss of the round (clients that trained).
    """

    test_loss: dict[int, float]
    test_acc: dict[int, float]
    delivered: dict[int, list[int]]
    em_weight: dict[int, npt.NDArray[np.float64]]
    train_loss: dict[int, float] = field(default_factory=dict)


class D2DEmulatedBackend:
    """Real pFedWN (or baseline) rounds of the D2D engine (:mod:`rayfl.d2d.round`).

    Args:
        config: The run config (``topology.kind == "d2d"``).
        system: An existing system to drive (the runner's); the env then covers
            exactly that run and cannot be reset to another seed.
        data: A prebuilt federated dataset (kept across resets).
    """

    def __init__(
        self,
        config: RunConfig,
        system: Any = None,
        data: FederatedData | None = None,
    ) -> None:
        self.config = config
        self.system = system
        self.owned = system is None
        self.fresh = system is not None
        self.data = data if system is None else system.data
        self.rows: list[dict[str, Any]] = []

    def restart(self, seed: int) -> D2DLayout:
        """Start a run with ``seed`` (reuse an unstepped system of that seed)."""
        from rayfl.engine import build_system

        system = self.system
        if system is not None and self.fresh and system.config.seed == seed:
            return system.layout
        if not self.owned:
            raise RuntimeError(
                "this env drives an external D2D engine (the runner's): it covers "
                "one run and cannot be reset to a new episode"
            )
        self.close()
        if self.data is None:
            self.data = build_federated(self.config.data, seed=self.config.seed)
        cfg = self.config.model_copy(update={"seed": int(seed)})
        self.system = build_system(cfg, data=self.data)
        self.fresh = True
        return self.system.layout

    @property
    def motion(self) -> D2DMotion:
        """The engine's round-t layouts and P^err (one per run, shared with the env)."""
        assert self.system is not None
        motion: D2DMotion = self.system.motion
        return motion

    @property
    def data_size(self) -> npt.NDArray[np.int64]:
        """(N,) train samples per client."""
        assert self.system is not None
        return self.system.data.num_train

    def initial(
        self, targets: Sequence[int]
    ) -> tuple[dict[int, float], dict[int, float]]:
        """Loss and accuracy of ω⁰ on each target's test split."""
        from rayfl.learning.models import FlatModel, build_model
        from rayfl.learning.train import evaluate

        system = self.system
        assert system is not None
        cfg = system.config
        model = FlatModel(
            build_model(
                cfg.model.kind,
                input_shape=tuple(system.data.input_shape),
                num_classes=system.data.num_classes,
                hidden=cfg.model.hidden,
            )
        )
        import ray

        init = ray.get(system.init_ref)
        loss, acc = {}, {}
        for t in targets:
            x, y = system.data.test(t)
            loss[t], acc[t] = (float(v) for v in evaluate(model, init, x, y))
        return loss, acc

    def run(self, round: int, selections: Selections) -> D2DOutcome:
        """Set every target's M_n and run one real round (its rows: ``self.rows``)."""
        system = self.system
        assert system is not None
        self.fresh = False
        for t, (neighbors, subchannel) in selections.items():
            system.set_selection(t, neighbors, subchannel)
        self.rows = rows = system.run_round(round, system.decision()).rows
        by_client = {int(r["client"]): r for r in rows}
        n = system.num_clients
        out = D2DOutcome(
            {}, {}, {}, {}, {c: r["train_loss"] for c, r in by_client.items()}
        )
        for t in selections:
            neighbors = system.selections[t].neighbors
            out.test_loss[t] = float(by_client[t]["test_loss"])
            out.test_acc[t] = float(by_client[t]["test_acc"])
            out.delivered[t] = list(system.arrived[t])
            out.em_weight[t] = pi_vector(n, neighbors, system.em_weights(t))
        return out

    def close(self) -> None:
        """Stop the system's actors if this backend built them."""
        if self.owned and self.system is not None:
            self.system.close()
            self.system = None
