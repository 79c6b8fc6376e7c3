"""Surrogate dynamics of ``D2DNeighbor-v0``: a label-marginal model, no training, no Ray."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from envs.d2d.backends import D2DOutcome, Selections
from rayfl.config import RunConfig
from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.links import deliveries
from rayfl.d2d.motion import D2DMotion
from rayfl.d2d.selection import (
    D2DLayout,
    Selection,
    make_layout,
    pi_vector,
    selection_observation,
)
from rayfl.data.federated import FederatedData, build_federated
from rayfl.seeding import rng_for
from rayfl.system import initial_vector

__all__ = ["D2DSurrogateBackend", "D2DSurrogateDynamics"]


@dataclass
class D2DSurrogateDynamics:
    """Label-marginal surrogate of one target's personalized training (no Ray).

    The target's model is summarised by its predictive label marginal ŷ_t, which
    moves towards the label distribution of the data it is trained on:

        p_t     = α q_n + (1 − α) Σ_{m ∈ D_t} π̃_m q_m     (eq. 1 on label marginals)
        η_t     = c · S_t / (S_t + s_0),  S_t = n_n + (1 − α) Σ_{m ∈ D_t} n_m
        ŷ_{t+1} = (1 − η_t) ŷ_t + η_t p_t,      loss_t = −Σ_y q_n(y) log ŷ_t(y)

    where q_m is client m's train label histogram (smoothed), n_m its sample
    count, D_t the neighbors whose model arrived, and π̃ the EM weights over them
    (renormalised). π runs the pFedWN EM on label histograms — E step r_m(y) ∝
    π_m q_m(y), M step π_m = Σ_y q_n(y) r_m(y) — ``em_steps`` steps per round.
    More neighbors speed learning (η grows with S_t); neighbors whose labels
    differ from the target's pull ŷ away from q_n unless EM down-weights them;
    α = 1 is pure local training whatever M_n (as in the real system).

    | symbol | code name | default |
    |--------|-----------|---------|
    | q_n | ``labels[n]`` | train label histogram + 1e-3, normalised |
    | c | ``rate`` | 0.5 |
    | s_0 | ``scale`` | mean n_m |

    Args:
        labels: (N, C) label distributions q_m.
        sizes: (N,) train sample counts n_m.
        target: n.
        alpha: α of eq. 1.
        em_steps: E/M steps per round.
    """

    labels: npt.NDArray[np.float64]
    sizes: npt.NDArray[np.float64]
    target: int
    alpha: float
    em_steps: int = 1
    rate: float = 0.5

    def __post_init__(self) -> None:
        c = self.labels.shape[1]
        self.scale = float(self.sizes.mean())
        self.prediction = np.full(c, 1.0 / c)
        self.neighbors: tuple[int, ...] = ()
        self.pi = np.zeros(0)

    def loss(self) -> float:
        """Cross-entropy of ŷ_t on the target's label distribution."""
        q = self.labels[self.target]
        return float(-(q * np.log(self.prediction)).sum())

    def set_neighbors(self, neighbors: tuple[int, ...]) -> None:
        """New M_n: kept neighbors keep π, new ones get 1/abs(M_n) (as the system)."""
        if neighbors == self.neighbors:
            return
        old = dict(zip(self.neighbors, self.pi.tolist(), strict=True))
        pi = np.array([old.get(m, 1.0 / len(neighbors)) for m in neighbors])
        self.pi = pi / pi.sum() if len(neighbors) else pi
        self.neighbors = neighbors

    def step(self, delivered: Sequence[int]) -> float:
        """Advance one round with the arrived neighbors; return loss_{t+1}."""
        q = self.labels
        arrived = [self.neighbors.index(m) for m in delivered]
        if len(arrived) >= 1 and len(self.neighbors) > 1:
            idx = np.asarray(arrived)
            mass = self.pi[idx].sum()
            sub = self.pi[idx] / mass
            qm = q[np.asarray(delivered)]
            for _ in range(self.em_steps):
                joint = sub[:, None] * qm
                resp = joint / joint.sum(axis=0, keepdims=True)
                sub = (resp * q[self.target][None, :]).sum(axis=1)
            self.pi[idx] = mass * sub
        mix = q[self.target].copy()
        total = float(self.sizes[self.target])
        if delivered:
            w = self.pi[np.asarray(arrived)]
            w = w / w.sum()
            mix = self.alpha * mix + (1 - self.alpha) * (w @ q[np.asarray(delivered)])
            total += (1 - self.alpha) * float(self.sizes[np.asarray(delivered)].sum())
        eta = self.rate * total / (total + self.scale)
        self.prediction = (1 - eta) * self.prediction + eta * mix
        return self.loss()


class D2DSurrogateBackend:
    """Cheap dynamics: the real layout, P^err and link draws; no training.

    Links: ``link_model: ideal`` delivers every model; otherwise each arrives
    with probability 1 − P^err (draws from (seed, "d2d_surrogate", round t + 1,
    target)), round t's P^err when the nodes move (:mod:`rayfl.d2d.motion`). The learning is :class:`D2DSurrogateDynamics`, a model of pFedWN:
    ``method: local`` uses no neighbor, and ``method: federated`` is modelled
    as pFedWN too (the surrogate has no FedAvg dynamics). Train losses: a
    sending neighbor's local model is the same dynamics with α = 1 (pure local
    training), stepped each round it sends; a target reports its own loss.

    Args:
        config: The run config (``topology.kind == "d2d"``).
        data: A prebuilt federated dataset (its train label histograms are used).
    """

    def __init__(self, config: RunConfig, data: FederatedData | None = None) -> None:
        self.config = config
        self.topology: D2DTopologyConfig = config.topology  # type: ignore[assignment]
        data = (
            data if data is not None else build_federated(config.data, seed=config.seed)
        )
        n, c = data.num_clients, data.num_classes
        counts = np.zeros((n, c))
        for m in range(n):
            counts[m] = np.bincount(np.asarray(data.train(m)[1]), minlength=c)[:c]
        self.data_size = counts.sum(axis=1)  # (N,) train samples per client
        smooth = counts + 1e-3
        self.labels = smooth / smooth.sum(axis=1, keepdims=True)
        self.num_nodes = n
        self.seed = config.seed
        #: 32·dim bits of a sent model, for the round deadline's airtime.
        self.model_bits: float | None = None
        if self.topology.round_deadline_s is not None:
            shape = tuple(data.input_shape)
            self.model_bits = 32.0 * len(
                initial_vector(config, shape, data.num_classes)
            )
        self.layout: D2DLayout | None = None
        self.dynamics: dict[int, D2DSurrogateDynamics] = {}
        self.local: dict[int, D2DSurrogateDynamics] = {}
        self.error: dict[int, npt.NDArray[np.float64]] = {}

    def restart(self, seed: int) -> D2DLayout:
        """New episode: layout from ``seed``, fresh surrogate state."""
        self.seed = int(seed)
        self.layout = make_layout(self.topology, self.num_nodes, seed=self.seed)
        self.motion = D2DMotion(
            self.topology,
            self.layout,
            seed=self.seed,
            data_size=self.data_size,
            model_bits=self.model_bits,
            local_epochs=self.config.algorithm.local_epochs,
        )
        self.dynamics = {
            t: D2DSurrogateDynamics(
                self.labels,
                self.data_size,
                t,
                self.topology.alpha,
                self.topology.em_steps_per_round,
            )
            for t in self.layout.targets
        }
        self.local = {
            m: D2DSurrogateDynamics(self.labels, self.data_size, m, 1.0)
            for m in range(self.num_nodes)
        }
        # P^err of each target's candidates: the t = 0 CCM draw the env observes
        self.error = {
            t: selection_observation(
                self.layout, t, self.topology, seed=self.seed, motion=self.motion
            )[1]
            for t in self.layout.targets
        }
        return self.layout

    def initial(
        self, targets: Sequence[int]
    ) -> tuple[dict[int, float], dict[int, float]]:
        """Return the loss ln C of the uniform ŷ_0 and NaN accuracy per target."""
        return (
            {t: self.dynamics[t].loss() for t in targets},
            {t: math.nan for t in targets},
        )

    def run(self, round: int, selections: Selections) -> D2DOutcome:
        """Advance every target by one surrogate round."""
        out = D2DOutcome({}, {}, {}, {})
        topo = self.topology
        if topo.method != "local":
            senders = sorted({m for ms, _ in selections.values() for m in ms})
            out.train_loss = {m: self.local[m].step([]) for m in senders}
        for t, (neighbors, subs) in selections.items():
            dyn = self.dynamics[t]
            dyn.set_neighbors(tuple(sorted(neighbors)))
            senders = [] if topo.method == "local" else list(dyn.neighbors)
            state = self.motion.link_state(round, t)
            if topo.link_model == "ideal":
                delivered = senders
            elif state is not None and state.fading is not None:
                layout, moving = self.motion.links(round, t)
                error = self.error[t] if moving is None else moving
                # the links' own rule on correlated fading (rayfl.d2d.links)
                ok = deliveries(
                    topo,
                    layout,
                    Selection(t, tuple(neighbors), tuple(subs), error),
                    senders,
                    round=round,
                    seed=self.seed,
                    error=error,
                    state=state,
                )
                delivered = [m for m in senders if ok[m]]
            else:
                moving = self.motion.links(round, t)[1]  # round t's P^err
                error = self.error[t] if moving is None else moving
                draws = rng_for(
                    self.seed, "d2d_surrogate", round=round + 1, client=t
                ).random(self.num_nodes)
                delivered = [m for m in senders if draws[m] >= error[m]]
            if state is not None:  # away or late: nothing arrives
                delivered = [m for m in delivered if state.reason(m) is None]
            out.test_loss[t] = out.train_loss[t] = dyn.step(delivered)
            out.test_acc[t] = math.nan
            out.delivered[t] = delivered
            out.em_weight[t] = pi_vector(self.num_nodes, dyn.neighbors, dyn.pi)
        return out

    def close(self) -> None:
        """Nothing to release."""
