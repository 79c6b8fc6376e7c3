"""The D2D lane host: a D2D client host that runs one pFedWN round of E lanes per call.

A *lane* is one D2D run (one ``D2DNeighbor-v0`` episode) on the shared data;
:class:`rayfl.d2d.lanes.D2DLanes` steps E lanes in lockstep. A
:class:`D2DLaneHost` is a :class:`~rayfl.d2d.host.D2DClientHost` (same data,
same model) whose run state is kept per lane as arrays: every hosted client's
pure local model ``(E, hosted, dim)`` and each lane's personal model of its
target ``(E, dim)``, with ω⁰ and the seed of each lane. A lockstep round is two
calls per host:

1. :meth:`D2DLaneHost.train_local`: every (lane, neighbor) pair hosted here
   trains its local model one local run, all in one
   :func:`~rayfl.learning.vectorized.local_sgd_many` call, each with the batch
   order of its lane's seed (``rng_for(seed, "batch", round, client)``, as
   :meth:`D2DClientHost._train_one`);
2. :meth:`D2DLaneHost.target_lanes`: for every lane whose target is hosted
   here, the E/M steps (eqs. 9–10: per-sample losses of the arrived models in
   one batched forward pass per target client), eq. 1, the evaluations of the
   mixed and trained models (one batched pass per target client) and the
   target's local run (one stacked call for all lanes).

Implementation details:
    1. Equal to :class:`D2DClientHost` to float32 rounding, not bit for bit:
       the stacked trainer matches ``fast_local_sgd`` to ~3e-8
       (:mod:`rayfl.learning.vectorized`, Implementation details 6) and the
       batched evaluations match ``evaluate`` to float32 rounding
       (:mod:`rayfl.learning.segment_eval`). Each lane's numbers do not depend
       on its stack partners: the batch slot is fixed for the run
       (``min(B, largest client)``; vectorized, Implementation details 9).
    2. π after the round's E/M steps is computed here with the arithmetic of
       :meth:`rayfl.d2d.em.EMState.apply`, so eq. 1 uses the weights the driver's
       ``EMState`` then holds (bit for bit).
    3. A host restarted by Ray has lost its lanes: every lane call raises
       :class:`~rayfl.actors.restart.StateLost` until :meth:`reset_lanes`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import ray
import torch

from rayfl.actors.cloud import REJECT_NON_FINITE
from rayfl.actors.restart import needs_state, state_restored
from rayfl.actors.setup import ActorSetup
from rayfl.algorithms.pfedwn import aggregate_target
from rayfl.d2d.host import D2DClientHost
from rayfl.learning.segment_eval import _linear_stack_logits, evaluate_segments_many
from rayfl.learning.vectorized import local_sgd_many
from rayfl.learning.vectorized_kernels import linear_stack_shapes
from rayfl.seeding import rng_for_many

__all__ = ["D2DLaneActor", "D2DLaneHost", "TargetJob", "em_steps_many"]

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True)
class TargetJob:
    """One lane's target round on the target's host.

    Attributes:
        lane: The lane.
        round: Its round index t.
        target: Its target n (hosted here).
        neighbors: The usable neighbors (whose models enter eq. 1).
        sources: Per usable neighbor, (index of the ``train_local`` reply, row).
        idx: Positions of the usable neighbors in the selection M_n.
        log_pi: log π over M_n before the round.
        em_steps: E/M steps to run on the usable models (0: none).
        alpha: α of eq. 1.
    """

    lane: int
    round: int
    target: int
    neighbors: list[int]
    sources: list[tuple[int, int]]
    idx: list[int]
    log_pi: npt.NDArray[np.float64]
    em_steps: int
    alpha: float


class D2DLaneHost(D2DClientHost):
    """A :class:`D2DClientHost` for E lanes (see the module docstring).

    Args:
        data: The federated dataset, or where to fetch it.
        clients: Ids of the clients hosted here.
        setup: A setup of the shared config (its seed is not used).
        num_lanes: E.
        slot: Rows per padded batch slot of the stacked trainer (run-level).
    """

    def __init__(
        self, data: Any, clients: Any, setup: ActorSetup, num_lanes: int, slot: int
    ) -> None:
        super().__init__(data, clients, setup)
        self.num_lanes, self.slot = int(num_lanes), int(slot)
        self.row = {c: i for i, c in enumerate(self.clients)}
        dim = self.model.spec.dim
        self.local = np.zeros((self.num_lanes, len(self.clients), dim), np.float32)
        self.has_local = np.zeros((self.num_lanes, len(self.clients)), bool)
        self.personal = np.zeros((self.num_lanes, dim), np.float32)
        self.has_personal = np.zeros(self.num_lanes, bool)
        self.init = np.zeros((self.num_lanes, dim), np.float32)
        self.seeds = np.zeros(self.num_lanes, np.int64)
        self.shapes = linear_stack_shapes(self.model.module)

    def reset_lanes(self, starts: dict[int, tuple[int, Vector]]) -> None:
        """Start a new run in each given lane: lane → (its seed, its ω⁰)."""
        for lane, (seed, init) in starts.items():
            self.seeds[lane], self.init[lane] = int(seed), init
            self.has_local[lane] = False
            self.has_personal[lane] = False
        state_restored(self)

    def _train(
        self,
        starts: Vector,
        clients: list[int],
        rngs: list[np.random.Generator],
    ) -> tuple[Vector, npt.NDArray[np.float64]]:
        """One local run of each client from its start (stacked); vectors, losses."""
        cfg = self.setup.algorithm
        results = local_sgd_many(
            self.model,
            starts,
            [self.data.train(c) for c in clients],
            lr=cfg.lr,
            batch_size=cfg.batch_size,
            local_epochs=cfg.local_epochs,
            local_steps=cfg.local_steps,
            rngs=rngs,
            slot=self.slot,
        )
        # np.array of equal rows: np.stack without its per-row expand_dims
        vectors = np.array([r.vector for r in results]).astype(np.float32, copy=False)
        return vectors, np.array([r.train_loss for r in results], dtype=np.float64)

    @needs_state
    def train_local(
        self, lanes: list[int], clients: list[int], rounds: list[int]
    ) -> tuple[npt.NDArray[np.float64], Vector]:
        """Train each (lane, client) pair's local model one local run.

        Returns:
            The train losses (P,) and the trained models, float32 (P, dim).
        """
        if not lanes:
            return np.zeros(0), np.zeros((0, self.model.spec.dim), np.float32)
        lane = np.asarray(lanes, dtype=np.int64)
        row = np.array([self.row[c] for c in clients], dtype=np.int64)
        starts = self.local[lane, row]
        fresh = ~self.has_local[lane, row]
        starts[fresh] = self.init[lane[fresh]]
        rngs = rng_for_many(self.seeds[lane], "batch", rounds=rounds, clients=clients)
        vectors, losses = self._train(starts, clients, rngs)
        self.local[lane, row] = vectors
        self.has_local[lane, row] = True
        return losses, vectors

    @needs_state
    def target_lanes(self, jobs: list[TargetJob], *replies: Vector) -> dict[str, Any]:
        """Run each job's target round: E/M, eq. 1, evaluate, train, evaluate.

        Args:
            jobs: The lanes whose target is hosted here.
            *replies: Every ``train_local`` reply's models, in the order the
                jobs' ``sources`` index.

        Returns:
            Arrays over the jobs: ``post_agg_loss``/``post_agg_acc``,
            ``post_train_loss``/``post_train_acc``, ``train_loss``; lists
            ``em`` (new log π over the usable models and log-likelihood, or
            None) and ``rejected`` (neighbor → reason).
        """
        models = _gather(jobs, replies, self.model.spec.dim)
        em = self._em(jobs, models)
        mixed, rejected = [], []
        for job, mine, step in zip(jobs, models, em, strict=True):
            weights = _weights_after(job, step)
            finite = np.asarray(np.isfinite(mine).all(axis=1), dtype=bool).reshape(-1)
            rejected.append(
                {job.neighbors[i]: REJECT_NON_FINITE for i in np.flatnonzero(~finite)}
            )
            own = self.personal[job.lane] if self.has_personal[job.lane] else None
            mixed.append(
                aggregate_target(
                    self.init[job.lane] if own is None else own,
                    mine[finite],
                    [w for w, ok in zip(weights, finite, strict=True) if ok],
                    alpha=job.alpha,
                )
            )
        start: npt.NDArray[np.float32] = (
            np.array(mixed) if mixed else np.zeros((0, self.model.spec.dim), np.float32)
        )
        agg_loss, agg_acc = self._evaluate(jobs, start)
        rngs = rng_for_many(
            self.seeds[[j.lane for j in jobs]],
            "d2d_personal_batch",
            rounds=[j.round for j in jobs],
            clients=[j.target for j in jobs],
        )
        trained, losses = self._train(start, [j.target for j in jobs], rngs)
        lanes = [j.lane for j in jobs]
        self.personal[lanes], self.has_personal[lanes] = trained, True
        loss, acc = self._evaluate(jobs, trained)
        return {
            "post_agg_loss": agg_loss,
            "post_agg_acc": agg_acc,
            "post_train_loss": loss,
            "post_train_acc": acc,
            "train_loss": losses,
            "em": em,
            "rejected": rejected,
        }

    def _em(
        self, jobs: list[TargetJob], models: list[Vector]
    ) -> list[tuple[npt.NDArray[np.float64], float] | None]:
        """The E/M steps of every job that runs them, batched over the lanes.

        One forward pass per target client gives the per-sample losses of every
        lane's usable models; the lanes with the same target and steps then run
        :func:`em_steps_many` together, their selections padded to the widest
        (a padded model has log π = −∞: it takes no responsibility and no mass).
        """
        out: list[tuple[npt.NDArray[np.float64], float] | None] = [None] * len(jobs)
        by_target: dict[int, list[int]] = defaultdict(list)
        for i, job in enumerate(jobs):
            if job.em_steps:
                by_target[job.target].append(i)
        for target, mine in by_target.items():
            x, y = self.data.train(target)
            losses = self._sample_losses_many(
                np.concatenate([models[i] for i in mine]), x, y
            )
            groups: dict[int, list[int]] = defaultdict(list)
            first, rows = 0, {}
            for i in mine:
                rows[i] = first
                first += len(models[i])
                groups[jobs[i].em_steps].append(i)
            for steps, members in groups.items():  # the lanes' k differ: padded
                width = max(len(models[i]) for i in members)
                block = np.zeros((len(members), len(y), width))
                sub = np.full((len(members), width), -np.inf)
                for j, i in enumerate(members):
                    k = len(models[i])
                    block[j, :, :k] = losses[rows[i] : rows[i] + k].T
                    sub[j, :k] = jobs[i].log_pi[jobs[i].idx]
                log_pi, loglik = em_steps_many(
                    sub - _logsumexp(sub, axis=1)[:, None], block, steps
                )
                for j, i in enumerate(members):
                    out[i] = (log_pi[j, : len(models[i])], float(loglik[j]))
        return out

    def _sample_losses_many(
        self, vectors: Vector, x: npt.NDArray[np.float32], y: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """Per-sample cross-entropy of each model (rows) on (x, y): (models, n)."""
        n = len(y)
        xt = torch.from_numpy(np.asarray(x, dtype=np.float32)).reshape(n, -1).T
        yt = torch.from_numpy(np.asarray(y)).reshape(1, 1, n)
        with torch.no_grad():
            stack = torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32))
            assert self.shapes is not None  # D2DLanes checks the model
            logits = _linear_stack_logits(self.model, self.shapes, stack, xt)
            log_p = torch.log_softmax(logits, dim=-2)
            target = yt.expand(len(stack), 1, n)
            return (-log_p.gather(-2, target).squeeze(-2)).double().numpy()

    def _evaluate(
        self, jobs: list[TargetJob], vectors: Vector
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Loss and accuracy of row i of ``vectors`` on job i's target test split."""
        loss, acc = np.zeros(len(jobs)), np.zeros(len(jobs))
        by_target: dict[int, list[int]] = defaultdict(list)
        for i, job in enumerate(jobs):
            by_target[job.target].append(i)
        for target, mine in by_target.items():
            x, y = self.data.test(target)
            got_loss, got_acc = evaluate_segments_many(
                self.model, vectors[mine], x, y, [0, len(y)]
            )
            loss[mine], acc[mine] = got_loss[:, 0], got_acc[:, 0]
        return loss, acc


def _logsumexp(values: npt.NDArray[np.float64], axis: int) -> npt.NDArray[np.float64]:
    """Log Σ exp over ``axis`` (``scipy.special.logsumexp``'s, to float64 rounding)."""
    top = np.max(values, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    total = np.sum(np.exp(values - top), axis=axis, keepdims=True)
    with np.errstate(divide="ignore"):
        return np.squeeze(np.log(total) + top, axis=axis)


def em_steps_many(
    log_pi: npt.NDArray[np.float64], losses: npt.NDArray[np.float64], steps: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """``steps`` of :func:`rayfl.algorithms.pfedwn.em_step` for L mixtures at once.

    Args:
        log_pi: log π per mixture, (L, M).
        losses: Per-sample losses, (L, k, M) (each mixture's L_im).
        steps: E/M steps (>= 1).

    Returns:
        The new log π (L, M) and each mixture's mean log-likelihood before the
        last step (L,), equal to ``em_step``'s to float64 rounding.
    """
    loglik = np.full(len(log_pi), np.nan)
    for _ in range(steps):
        joint = log_pi[:, None, :] - losses
        log_evidence = _logsumexp(joint, axis=2)  # (L, k)
        log_resp = joint - log_evidence[:, :, None]  # eq. 9
        new = _logsumexp(log_resp, axis=1) - np.log(losses.shape[1])  # eq. 10
        log_pi = new - _logsumexp(new, axis=1)[:, None]
        loglik = np.mean(log_evidence, axis=1)
    return log_pi, loglik


def _weights_after(
    job: TargetJob, step: tuple[npt.NDArray[np.float64], float] | None
) -> list[float]:
    """π of the usable neighbors after the round's E/M steps (``EMState.apply``'s math)."""
    if step is None:
        pi = np.exp(job.log_pi)
    else:
        old = np.exp(job.log_pi)
        mass = old[job.idx].sum()
        new = old.copy()
        new[job.idx] = mass * np.exp(step[0])
        pi = np.exp(np.log(np.maximum(new, 1e-300)))
    return [float(pi[i]) for i in job.idx]


def _gather(
    jobs: list[TargetJob], replies: tuple[Vector, ...], dim: int
) -> list[Vector]:
    """Each job's usable models (rows in ``neighbors`` order): one gather per reply."""
    sources = [src for job in jobs for src in job.sources]
    pairs = np.array(sources, np.int64).reshape(-1, 2)  # (0, 2): no model arrived
    stacked = np.zeros((len(pairs), dim), np.float32)
    for a, reply in enumerate(replies):
        hit = np.flatnonzero(pairs[:, 0] == a)
        stacked[hit] = reply[pairs[hit, 1]]
    bounds = np.cumsum([0] + [len(job.sources) for job in jobs])
    return [stacked[bounds[i] : bounds[i + 1]] for i in range(len(jobs))]


D2DLaneActor: Any = ray.remote(D2DLaneHost)
"""``D2DLaneHost`` as a Ray actor class."""
