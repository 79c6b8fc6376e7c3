"""The two dynamics behind the scheduling env: the real engine, or a surrogate.

Both expose the same small interface to :class:`envs.star.scheduling.WirelessFLEnv`:
``restart(seed)``, ``initial()``, ``observe(t)`` (the engine's star observation,
:func:`rayfl.star.star_observation`), ``uplink``, ``data_size``,
``run(t, schedule) -> Outcome`` and ``close()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from envs.surrogate import SurrogateDynamics
from rayfl.compression.payload import payload_size_bits
from rayfl.config import RunConfig
from rayfl.data.federated import FederatedData, build_federated
from rayfl.observation import ObservationTracker
from rayfl.rl.config import RLConfig
from rayfl.schedule import Schedule
from rayfl.seeding import rng_for
from rayfl.star import star_observation
from rayfl.system import Observation, initial_vector
from rayfl.uplink import UplinkModel
from rayfl.wireless.modulation import element_error_probability

__all__ = ["EmulatedBackend", "Outcome", "SurrogateBackend"]


@dataclass(frozen=True)
class Outcome:
    """What one round returns to the env.

    Attributes:
        rows: One record per scheduled client (train_loss, delivered, latency_s...).
        delivered: Ids of the clients whose update was aggregated.
        test_loss: Test loss of each client's evaluated model (N,).
        test_acc: Test accuracy of each (N,); NaN in surrogate mode.
        evals: The raw per-client evaluation records (emulate mode), else None.
    """

    rows: list[dict[str, Any]]
    delivered: list[int]
    test_loss: npt.NDArray[np.float64]
    test_acc: npt.NDArray[np.float64]
    evals: list[dict[str, Any]] | None = None


def _eval_arrays(evals: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    key = "personal" if "personal_loss" in evals[0] else "test"
    loss = np.array([e[f"{key}_loss"] for e in evals], dtype=np.float64)
    acc = np.array([e[f"{key}_acc"] for e in evals], dtype=np.float64)
    return loss, acc


class EmulatedBackend:
    """Real FL on Ray: one env step is one round of :class:`rayfl.engine.Engine`."""

    def __init__(self, config: RunConfig) -> None:
        from rayfl.engine import Engine

        self.system = Engine(config)
        self.data_size = self.system.num_train.astype(np.float64)

    @property
    def uplink(self) -> UplinkModel:
        """The system's uplink model (channel, ledger)."""
        return self.system.uplink

    def restart(self, seed: int) -> None:
        """Start a new run with ``seed`` (the first observation evaluates the clients)."""
        self.system.restart(seed)

    def observe(self, round: int) -> Observation:
        """Return the engine's star observation of round ``round``."""
        return self.system.observe(round)[0]

    def initial(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Test loss and accuracy of every client's model before the first round."""
        evals = self.system.evaluate()
        assert evals is not None  # the star evaluates every client
        return _eval_arrays(evals)

    def run(self, round: int, schedule: Schedule) -> Outcome:
        """Run one real round and evaluate every client."""
        result = self.system.run_round(round, schedule)
        evals = self.system.evaluate()
        assert evals is not None  # the star evaluates every client
        loss, acc = _eval_arrays(evals)
        return Outcome(result.rows, result.delivered, loss, acc, evals)

    def close(self) -> None:
        """Stop the actors (and Ray if the system started it)."""
        self.system.close()


class SurrogateBackend:
    """Cheap dynamics (``envs.surrogate``) on the real channel and ledger models."""

    def __init__(self, config: RunConfig, data: FederatedData | None = None) -> None:
        self.config = config
        data = (
            data if data is not None else build_federated(config.data, seed=config.seed)
        )
        self.num_classes = data.num_classes
        self.data_size = np.asarray(data.num_train, dtype=np.float64)
        self.dim = len(
            initial_vector(config, tuple(data.input_shape), data.num_classes)
        )
        self.restart(config.seed)

    def restart(self, seed: int) -> None:
        """Start a new episode with ``seed``."""
        self.config = self.config.model_copy(update={"seed": int(seed)})
        self.uplink = UplinkModel(
            self.config, num_train=self.data_size, model_dim=self.dim
        )
        comp = self.config.compression
        self.payload_bits = float(
            payload_size_bits(
                dim=self.dim,
                carried=self.dim * comp.sparsify_fraction,  # expected kept values
                bits_per_element=comp.quantize_bits or 32,
                sparse=comp.sparsify_fraction < 1,
            )
        )
        rl = self.config.rl or RLConfig()
        self.dynamics = SurrogateDynamics(
            self.data_size / self.data_size.sum(),
            self.num_classes,
            self.uplink.noise_std,
            rng_for(seed, "env"),
            contraction=rl.surrogate_contraction,
            noise_weight=rl.surrogate_noise_weight,
            channel_weight=rl.surrogate_channel_weight,
            participation_scale=rl.surrogate_participation_scale,
            recency_weight=rl.surrogate_recency,
            recency_scale=rl.surrogate_recency_rounds,
            floor_low=rl.surrogate_floor[0],
            floor_high=rl.surrogate_floor[1],
            heterogeneity_low=rl.surrogate_heterogeneity[0],
            heterogeneity_high=rl.surrogate_heterogeneity[1],
        )
        self.tracker = ObservationTracker(
            len(self.data_size), self.dynamics.client_loss()
        )

    def observe(self, round: int) -> Observation:
        """Return the star observation of round ``round`` (as the engine builds it)."""
        return star_observation(self.uplink, self.tracker, self.data_size, round)

    def initial(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Surrogate test losses at reset (no accuracy: NaN)."""
        loss = self.dynamics.client_loss()
        return loss, np.full(len(loss), np.nan)

    def run(self, round: int, schedule: Schedule) -> Outcome:
        """Advance the surrogate by one round."""
        bits = np.full(len(schedule.clients), self.payload_bits)
        link_rows, link = self.uplink.link(round, schedule, bits)
        delivered = (
            schedule.clients[link.delivered] if link is not None else schedule.clients
        )
        r = self.config.compression.quantize_bits or 32
        ber = (
            np.array([link_rows[int(c)]["bit_error_rate"] for c in delivered])
            if link_rows
            else np.zeros(len(delivered))
        )
        element_error = element_error_probability(ber, bits_per_element=r)  # eq. 14
        observed = self.dynamics.step(delivered, element_error)
        self.uplink.record_releases(schedule.clients)
        obs_loss = dict(zip(delivered.tolist(), observed.tolist(), strict=False))
        rows = []
        for c in schedule.clients.tolist():
            row = {"client": c, "bits": self.payload_bits, **link_rows.get(c, {})}
            row["delivered"] = c in obs_loss
            row["train_loss"] = obs_loss.get(c, float("nan"))
            rows.append(row)
        loss = self.dynamics.client_loss()
        self.tracker.record(rows, sorted(obs_loss))
        return Outcome(rows, sorted(obs_loss), loss, np.full(len(loss), np.nan))

    def close(self) -> None:
        """Nothing to release."""
