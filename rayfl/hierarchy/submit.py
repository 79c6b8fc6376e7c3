"""One global round's calls: devices → edge → devices → … → cloud, refs only.

:class:`RoundCalls` submits the whole interval without waiting: for each
segment of :func:`segments`, every actor hosting participants of subnet c trains
them from w̄_c and returns one exact sum (noised per device when the edge is
untrusted), then edge c aggregates (adding its own noise when trusted); the last
segment's edge outputs are the v_c the cloud averages (eq. 14). The driver gets
the small records once per round (``rayfl.hierarchy.round``).

Symbol table: τ_k → ``plan.segments`` sum, m_k → ``period``, K_ℓ →
``num_local``, S_c^k → ``plan.chosen[c]``, s_c^k → ``plan.participants[c]``,
η_k → ``plan.eta``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rayfl.hierarchy.config import TopologyConfig
from rayfl.hierarchy.dp import StreamStds, stream_stds

__all__ = ["Plan", "RoundCalls", "Sent", "make_plan", "segments"]


def segments(tau: int, period: int, num_local: int | None = None) -> list[int]:
    """Return the SGD steps between aggregations in one interval.

    Args:
        tau: τ_k.
        period: m_k.
        num_local: K_ℓ cap (None: as many as fit, ⌈τ/m⌉ − 1).

    Returns:
        [m]·K + [τ − K m] with K = min(K_ℓ, ⌈τ/m⌉ − 1).

    Example:
        >>> segments(20, 5), segments(7, 5), segments(3, 1, num_local=1)
        ([5, 5, 5, 5], [5, 2], [1, 2])
    """
    k = math.ceil(tau / period) - 1
    if num_local is not None:
        k = min(k, num_local)
    return [period] * k + [tau - k * period]


@dataclass(frozen=True)
class Plan:
    """Global round k's choices: S_c^k, η_k, the segments, the noise stds.

    ``subchannel`` maps each participant to its subchannel of its edge's band,
    or is None when the decision named participants only.
    """

    k: int
    chosen: list[list[int]]
    participants: np.ndarray  # s_c^k, int64 (C,)
    eta: float
    segments: list[int]
    stds: StreamStds
    subchannel: dict[int, int] | None = None


def make_plan(
    k: int,
    chosen: list[list[int]],
    *,
    subchannel: dict[int, int] | None,
    topo: TopologyConfig,
    interval: Any,
    eta: float,
    dp_enabled: bool,
    trusted: np.ndarray,
    num_global: int,
    sample_rate: float,
) -> Plan:
    """Return interval k's plan for S_c^k = ``chosen``: its segments and noise stds.

    Args:
        k: Global round index.
        chosen: S_c^k per edge (device ids).
        subchannel: Each participant's subchannel, or None.
        topo: The ``topology`` section.
        interval: τ_k, m_k, K_ℓ (``rayfl.hierarchy.interval.Interval``).
        eta: η_k.
        dp_enabled: Whether any noise is added.
        trusted: Trust flag of each edge (C,).
        num_global: K_g, global rounds of the run.
        sample_rate: q of eq. 15.
    """
    s_now = np.array([len(p) for p in chosen], dtype=np.int64)
    stds = stream_stds(
        topo.dp,
        enabled=dp_enabled,
        trusted=trusted,
        participants=s_now,
        learning_rate=eta,
        tau=interval.tau,
        period=interval.period,
        num_global=num_global,
        num_local=interval.num_local,
        sample_rate=sample_rate,
    )
    plan_local = (
        interval.num_local - int(topo.local_at_global) if topo.control.enabled else None
    )
    segs = segments(interval.tau, interval.period, plan_local)
    return Plan(k, chosen, s_now, eta, segs, stds, subchannel)


@dataclass
class Sent:
    """The round's submitted calls (refs only) and the edge models' refs."""

    edge_refs: list[Any]
    device_calls: list[tuple[int, int, list[int], Any]] = field(default_factory=list)
    actors: list[int] = field(default_factory=list)  # actor of each device call
    edge_calls: list[Any] = field(default_factory=list)
    periods: list[tuple[int, int]] = field(default_factory=list)  # (p, steps)


@dataclass(frozen=True)
class RoundCalls:
    """Who one round calls, and how: the edges, the cloud, the device actors.

    Attributes:
        topology: The ``topology`` section.
        edges: Edge server actors, one per subnet.
        cloud: The cloud actor.
        actors: Device-hosting actors (``engine.pool.actors``).
        actor_of: Actor index of each device (I,).
        trusted: Trust flag of each edge (C,).
        subnets: Device ids of each edge.
    """

    topology: TopologyConfig
    edges: list[Any]
    cloud: Any
    actors: list[Any]
    actor_of: np.ndarray
    trusted: np.ndarray
    subnets: tuple[tuple[int, ...], ...]

    def submit_segments(
        self, plan: Plan, *, global_ref: Any, first_period: int
    ) -> Sent:
        """Submit every segment's device training and edge aggregation (no wait).

        Local periods are numbered from ``first_period`` (one per segment, one
        more for the ``local_at_global`` release).
        """
        topo = self.topology
        stds = plan.stds
        sent = Sent(edge_refs=[global_ref] * len(self.edges))
        for j, steps in enumerate(plan.segments):
            p = first_period + j
            sent.periods.append((p, steps))
            is_global = j == len(plan.segments) - 1 and not topo.local_at_global
            new_refs = []
            for c in range(len(plan.chosen)):
                # 0 where unused: device σ under a trusted edge, edge σ otherwise
                device_std = stds.std(c, edge=False, is_global=is_global)
                sums = self._submit_devices(plan, sent, c, p, steps, device_std)
                edge_std = stds.std(c, edge=True, is_global=is_global)
                new, rec = (
                    self.edges[c]
                    .aggregate.options(num_returns=2)
                    .remote(p, sent.edge_refs[c], edge_std, 0.0, *sums)
                )
                new_refs.append(new)
                sent.edge_calls.append(rec)
            sent.edge_refs = new_refs
        if topo.local_at_global:  # spec A3 option: a global-only release on top
            self._submit_global_only(plan, sent, first_period + len(plan.segments))
        return sent

    def _submit_devices(
        self, plan: Plan, sent: Sent, c: int, p: int, steps: int, std: float
    ) -> list[Any]:
        """Submit subnet c's segment to each actor hosting its participants."""
        members = plan.chosen[c]
        g = self.topology.dp.grad_bound
        equal = self.topology.weighting == "equal"
        sums = []
        for a in np.unique(self.actor_of[members]) if members else []:
            mine = [i for i in members if self.actor_of[i] == a]
            recs, fixed = (
                self.actors[a]
                .train_segment.options(num_returns=2)
                .remote(
                    p,
                    sent.edge_refs[c],
                    mine,
                    plan.eta,
                    steps,
                    None if g is None else plan.eta * steps * g,
                    [float(std)] * len(mine),
                    equal,
                )
            )
            sent.device_calls.append((c, p, mine, recs))
            sent.actors.append(int(a))
            # wrapped: the edge fetches it, so a lost actor is a lost upload
            sums.append([fixed])
        return sums

    def _submit_global_only(self, plan: Plan, sent: Sent, p: int) -> None:
        """Submit the ``local_at_global`` release: each edge noises its v_c."""
        stds = plan.stds
        new_refs = []
        for c in range(len(self.edges)):
            if self.trusted[c]:
                std, extra = stds.edge_global[c], 0.0
            else:
                std, extra = (
                    0.0,
                    stds.device_global[c] / math.sqrt(max(plan.participants[c], 1)),
                )
            new, rec = (
                self.edges[c]
                .aggregate.options(num_returns=2)
                .remote(p, sent.edge_refs[c], float(std), float(extra))
            )
            new_refs.append(new)
            sent.edge_calls.append(rec)
        sent.edge_refs = new_refs

    def global_step(
        self, sent: Sent, weights: list[float]
    ) -> tuple[Any, list[tuple[int, Any, int]]]:
        """Submit the cloud's average of the v_c (eq. 14) and the subnet evaluations.

        Returns:
            The ref of w̄^(t_{k+1}) and ``(edge, evaluation ref, actor)`` of each
            subnet evaluation call.
        """
        global_ref = self.cloud.global_aggregate.remote(weights, *sent.edge_refs)
        edge_evals = []
        if self.topology.edge_eval:
            for c, members in enumerate(self.subnets):
                for a in np.unique(self.actor_of[list(members)]):
                    mine = [i for i in members if self.actor_of[i] == a]
                    ref = self.actors[a].evaluate.remote(sent.edge_refs[c], mine)
                    edge_evals.append((c, ref, int(a)))
        return global_ref, edge_evals
