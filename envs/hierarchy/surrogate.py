"""Surrogate dynamics of the hierarchy (devices → edges → cloud): no actors, no Ray.

The surrogate mode of :class:`envs.hierarchy.scheduling.HierarchicalSchedulingEnv`. One
:class:`envs.surrogate.SurrogateDynamics` per edge subnet S_c evolves the gap
g of the model edge c holds; each segment of the interval is one step of the
star recursion on the subnet, and the cloud's average restarts every edge from
the same gap:

    g_c ← (1 − c · Σ_{i∈S_c^k} p_i^c) · g_c + a_noise · σ_c² / max(abs(S_c^k), 1)
                                                             (per segment)
    g   ← Σ_c ϱ_c g_c / Σ_c ϱ_c,  then g_c ← g for every edge  (cloud, eq. 14)

with p_i^c = D_i / Σ_{j∈S_c} D_j the device's share of its subnet's data and
ϱ_c the cloud's weights (1, or the chosen devices' samples under ``weighting:
data_size``). σ_c is the per-upload equivalent of the edge's DP noise
(``rayfl.hierarchy.dp.stream_stds``): a trusted edge adds σ̄_c once to the
mean, so σ_c = σ̄_c · sqrt(abs(S_c^k)); an untrusted edge's devices each add
σ_{i}, so σ_c = σ_i. The ``local_at_global`` release adds a_noise · σ̄² once.
Uploads are error-free (Shannon-rate links): no channel term.

Energy and delay of every upload and of the backhaul come from
:class:`rayfl.hierarchy.cost.CostModel` with the fading of the assigned
subchannel (of the device for a device-set action, as the engine), and the observer ledger records the same releases as the engine
(``rayfl.hierarchy.accounting.record_ledger``), so the observation table has
the emulate mode's meaning.

Implementation details:
    1. g_0 = ln(num_classes) − mean f* over all devices (a uniform classifier).
    2. Edge c's constants are drawn from (seed, "env", client = c).
    3. The adaptive controller (``topology.control``) is not modelled: a
       config that enables it is refused; τ and m stay as configured and η_k
       is ``algorithm.lr`` (``lr.mode: constant``) or γ/sqrt(k + 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from envs.surrogate import SurrogateDynamics
from rayfl.config import RunConfig
from rayfl.data.federated import build_federated
from rayfl.hierarchy.accounting import record_ledger
from rayfl.hierarchy.config import TopologyConfig
from rayfl.hierarchy.cost import CostModel
from rayfl.hierarchy.dp import ObserverLedger
from rayfl.hierarchy.interval import Interval
from rayfl.hierarchy.scheduling import EdgeScheduling, upload_fading
from rayfl.hierarchy.submit import make_plan
from rayfl.hierarchy.topology import build_topology
from rayfl.rl.config import RLConfig
from rayfl.schedule import Schedule
from rayfl.seeding import rng_for
from rayfl.system import RoundResult, initial_vector

__all__ = ["HierarchicalSurrogate"]


class HierarchicalSurrogate:
    """The hierarchy's surrogate: per-edge loss recursion, cost model, ledger.

    Args:
        config: A run config with ``topology.kind: hierarchical``.

    Raises:
        ValueError: If the config enables the adaptive controller.
    """

    def __init__(self, config: RunConfig) -> None:
        topo = config.topology
        assert isinstance(topo, TopologyConfig)  # a hierarchical config
        if topo.control.enabled:
            raise ValueError(
                "the hierarchical surrogate does not model topology.control; "
                "set topology.control.enabled=false or use mode='emulate'"
            )
        data = build_federated(config.data, seed=config.seed)
        self.num_classes = data.num_classes
        self.num_train = np.asarray(data.num_train, dtype=np.float64)
        self.num_test = np.asarray(data.num_test, dtype=np.float64)
        self.topology = build_topology(topo, config.data.num_clients, config.seed)
        self.cost = CostModel(
            topo.cost,
            distance_m=self.topology.distance_m,
            model_dim=len(
                initial_vector(config, tuple(data.input_shape), data.num_classes)
            ),
            backhaul=topo.baseline != "pedpfl",
        )
        self.dp_enabled = topo.dp.enabled and topo.baseline != "hfl"
        self.sample_rate = topo.dp.calibration_sample_rate or min(
            1.0, config.algorithm.batch_size / float(self.num_train.mean())
        )
        self.config = config
        self.restart(config.seed)

    def restart(self, seed: int) -> None:
        """Start over from w⁰ with ``seed`` (same subnets and data)."""
        cfg = self.config = self.config.model_copy(update={"seed": int(seed)})
        topo = cfg.topology
        assert isinstance(topo, TopologyConfig)
        self.scheduling = EdgeScheduling(
            topo.scheduling,
            cost=topo.cost,
            seed=cfg.seed,
            subnets=self.topology.subnets,
            distance_m=self.topology.distance_m,
            num_train=self.num_train,
        )
        self.ledger = ObserverLedger(
            len(self.num_train), delta=topo.dp.delta, strict=topo.dp.strict_accounting
        )
        self.upload_count = np.zeros(len(self.num_train), dtype=np.int64)
        self.interval = Interval.start(
            topo, sizes=self.topology.sizes, num_clients=len(self.num_train)
        )
        rl = cfg.rl or RLConfig()
        self.dynamics = []
        for c, members in enumerate(self.scheduling.subnets):  # sorted ids
            size = self.num_train[members]
            self.dynamics.append(
                SurrogateDynamics(
                    size / size.sum(),
                    self.num_classes,
                    0.0,
                    rng_for(cfg.seed, "env", client=c),
                    recency_weight=rl.surrogate_recency,
                    recency_scale=rl.surrogate_recency_rounds,
                )
            )
        floor = np.concatenate([d.floor for d in self.dynamics])
        gap = max(math.log(self.num_classes) - float(floor.mean()), 0.0)
        for d in self.dynamics:
            d.gap = gap
        self.scheduling.loss = self.device_loss()

    def reset(self, **_: Any) -> None:
        """Start over with the same seed (the engine's ``reset``; keywords ignored)."""
        self.restart(self.config.seed)

    # ---------------------------------------------------------------- state
    @property
    def gap(self) -> float:
        """g, the global model's gap (every edge holds it after a round)."""
        return float(self.dynamics[0].gap)

    def device_loss(self) -> npt.NDArray[np.float64]:
        """Return each device's surrogate test loss, shape (I,)."""
        out = np.zeros(len(self.num_train))
        for members, dyn in zip(self.scheduling.subnets, self.dynamics, strict=True):
            out[members] = dyn.client_loss()
        return out

    def learning_rate(self, k: int) -> float:
        """Return η_k (detail 3)."""
        assert isinstance(self.config.topology, TopologyConfig)
        lr = self.config.topology.lr
        if lr.mode == "constant":
            return float(self.config.algorithm.lr)
        return lr.gamma / math.sqrt(k + 1)

    def scheduling_observations(self, k: int) -> list[dict[str, np.ndarray]]:
        """Return each edge's observation for global round k."""
        eps = self.ledger.epsilons()[0] if self.dp_enabled else None
        return self.scheduling.observations(
            k,
            self.interval.period_index,
            self.topology.sizes,
            upload_count=self.upload_count,
            privacy_spent=eps,
        )

    # ---------------------------------------------------------------- round
    def run_global_round(
        self, k: int, schedules: Sequence[Schedule]
    ) -> tuple[RoundResult, dict[str, Any]]:
        """Run interval k with one schedule per edge; return (result, extras)."""
        cfg = self.config
        topo = cfg.topology
        assert isinstance(topo, TopologyConfig)
        trusted = self.topology.trusted
        chosen, subchannel = self.scheduling.participants_of(
            schedules, self.topology.sizes
        )
        plan = make_plan(
            k,
            chosen,
            subchannel=subchannel,
            topo=topo,
            interval=self.interval,
            eta=self.learning_rate(k),
            dp_enabled=self.dp_enabled,
            trusted=trusted,
            num_global=cfg.rounds,
            sample_rate=self.sample_rate,
        )
        num_edges = len(chosen)
        energy, delay = np.zeros(num_edges), np.zeros(num_edges)
        loss_sum = {i: 0.0 for m in chosen for i in m}
        for j, _ in enumerate(plan.segments):
            p = self.interval.period_index
            self.interval.period_index += 1
            is_global = j == len(plan.segments) - 1 and not topo.local_at_global
            for c, members in enumerate(chosen):
                e_j, d_s = self._upload_cost(k, p, c, members, subchannel)
                energy[c] += e_j
                delay[c] += d_s
                std = self._upload_std(plan.stds, c, len(members), is_global)
                observed = self._edge_step(c, members, std)
                for i, value in zip(members, observed.tolist(), strict=True):
                    loss_sum[i] += value
        if topo.local_at_global:
            for c in range(num_edges):
                std = self._upload_std(plan.stds, c, 1, True)
                if not trusted[c]:
                    std /= math.sqrt(max(int(plan.participants[c]), 1))
                self.dynamics[c].gap += self.dynamics[c].noise_weight * std**2
            self.interval.period_index += 1
        self._cloud(chosen)
        hop_energy, hop_delay = self.cost.global_hop()
        energy += hop_energy
        delay += hop_delay
        record_ledger(
            ledger=self.ledger,
            chosen=chosen,
            refused=[set() for _ in chosen],
            trusted=trusted,
            stds=plan.stds,
            steps=plan.segments,
            local_at_global=topo.local_at_global,
            equal_weights=topo.weighting == "equal",
            num_train=self.num_train.astype(np.int64),
            learning_rate=plan.eta,
            grad_bound=topo.dp.grad_bound,
            dp_enabled=self.dp_enabled,
        )
        rows = [
            {
                "client": i,
                "train_loss": loss_sum[i] / len(plan.segments),
                "delivered": True,
                **({} if subchannel is None else {"subchannel": subchannel[i]}),
            }
            for i in sorted(loss_sum)
        ]
        self.scheduling.observe(chosen, rows)
        extras = {"energy_j": float(energy.sum()), "latency_s": float(delay.sum())}
        return RoundResult(k, rows, sorted(loss_sum), extras), extras

    def _upload_cost(
        self,
        k: int,
        p: int,
        c: int,
        members: list[int],
        subchannel: dict[int, int] | None,
    ) -> tuple[float, float]:
        """Return (energy_j, delay_s) of subnet c's uploads in period p."""
        if not members:
            return 0.0, 0.0
        fading = upload_fading(
            self.scheduling,
            subchannel,
            seed=self.config.seed,
            k=k,
            edge=c,
            period=p,
            devices=members,
        )
        time_s, energy_j = self.cost.uploads(members, fading)
        self.upload_count[members] += 1
        return self.cost.local_cost(time_s, energy_j)

    def _upload_std(self, stds: Any, c: int, size: int, is_global: bool) -> float:
        """Return σ_c, the per-upload equivalent of edge c's noise (module doc)."""
        trusted = bool(self.topology.trusted[c])
        std = stds.std(c, edge=trusted, is_global=is_global)
        return std * math.sqrt(max(size, 1)) if trusted else std

    def _edge_step(
        self, c: int, members: list[int], std: float
    ) -> npt.NDArray[np.float64]:
        """One segment of subnet c: the star recursion on its chosen devices."""
        local = np.searchsorted(self.scheduling.subnets[c], members)
        dyn = self.dynamics[c]
        dyn.noise_std = std
        return dyn.step(local.astype(np.int64), np.zeros(len(members)))

    def _cloud(self, chosen: list[list[int]]) -> None:
        """Average the edges' gaps with the cloud's weights (eq. 14)."""
        weights = np.array([self.num_train[m].sum() for m in chosen])
        assert isinstance(self.config.topology, TopologyConfig)
        if self.config.topology.weighting == "equal" or weights.sum() <= 0:
            weights = np.ones(len(chosen))
        gap = float(np.average([d.gap for d in self.dynamics], weights=weights))
        for d in self.dynamics:
            d.gap = gap

    def close(self) -> None:
        """Nothing to release."""
