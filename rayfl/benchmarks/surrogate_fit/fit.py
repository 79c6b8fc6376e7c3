"""``rayfl bench fit-surrogate``: fit the star surrogate to emulate rollouts.

The star surrogate (:mod:`envs.surrogate`) predicts every client's test loss
from the schedule alone:

    g_{t+1}  = (1 − c Σ_{n∈D_t} p_n) g_t + a_noise σ² / max(|D_t|, 1)
               + a_channel mean_{n∈D_t} ρ_n,        g_0 = ln K − mean f*
    loss_n,t = f_n* + g_t + h_n exp(−u_n,t / τ) + d_n (1 − exp(−a_n,t / κ))

:mod:`.cli` plays a few policies in emulate mode on FIT seeds (disjoint from
the benchmark's held-out seeds), records what the surrogate would be given —
each round's delivered clients D_t and their per-element error probabilities
ρ_n (eq. 14) — and what it should predict — every client's test loss after
every round — and fits the surrogate to it by least squares:

1. The shared constants c, τ, κ (and a_channel, a_noise when the rollouts
   have channel errors or DP noise) together with one (f_n*, h_n, d_n) per
   client and fit seed (a seed's clients are the same in every policy's
   rollout), minimising the squared error of loss_n,t over every (rollout,
   round, client): :func:`fit`.
2. The surrogate draws its per-client constants at random, so the fitted
   ones become the ranges it draws from (method of moments for a uniform:
   mean ± √3 std, clipped at 0; d̄ = mean d_n): :func:`FitResult.rl_fields`.

What the surrogate cannot represent, the fit cannot give it: the loss depends
on nothing but who delivered (not on the algorithm's controls such as the
learning rate, nor on which classes a client holds), and the per-client
constants are drawn at random per episode, not tied to a client's data.

Writes under ``--out``: ``trajectories.csv`` (one row per rollout, round and
client: seed, policy, round, client, test_loss, delivered, element_error,
data_share), ``surrogate_fit.json`` (the fitted values, the per-client
constants, RMSE of the fit and of the default surrogate: the default shared
constants with the per-client ones fitted), ``surrogate_fit.csv`` (name,
default, fitted) and ``surrogate_fit.yaml`` (the ``rl:`` fragment;
``rayfl bench policies --surrogate surrogate_fit.yaml`` or a config's ``rl``
section uses it). ``--fit-from trajectories.csv`` refits saved rollouts
without playing them again. a_channel is fitted only when some ρ_n > 1e-6
(otherwise the channel term is invisible in the losses and keeps its default).

Example:
    rayfl bench fit-surrogate --scenario star-small --fit-seeds 2000:2003
    --policies round_robin,random,best_channel,learned_untrained --out fit/
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

__all__ = [
    "FitResult",
    "Trajectory",
    "fit",
    "load_trajectories",
    "predict",
    "save_trajectories",
]

#: Shared constants of the surrogate the fit can set, with their bounds and
#: the surrogate's default (envs.surrogate.SurrogateDynamics).
SHARED: dict[str, tuple[float, float, float]] = {
    "contraction": (1e-3, 20.0, 0.5),
    "participation_scale": (0.05, 200.0, 3.0),
    "recency_scale": (0.05, 200.0, 1.0),
    "channel_weight": (0.0, 1e4, 5.0),
    "noise_weight": (0.0, 1e4, 1.0),
}
#: Per-client constants (floor f*, heterogeneity h, drift d): bounds, start.
CLIENT_BOUNDS = ((0.0, 10.0, 0.35), (0.0, 20.0, 0.5), (0.0, 20.0, 0.35))


@dataclass(frozen=True)
class Trajectory:
    """One rollout: what the surrogate is given and what it should predict.

    Attributes:
        seed: The fit seed (data partition and episode); clients of one seed
            share their per-client constants across rollouts.
        policy: The policy that played it.
        data_share: p_n, shape (N,).
        num_classes: K (the initial gap is ln K − mean f*).
        noise_std: σ of the DP noise per element (0 without DP).
        delivered: Per round, the ids of the clients whose update arrived.
        element_error: Per round, their per-element error probabilities ρ_n.
        loss: Test loss of every client at reset and after each round, (T+1, N).
    """

    seed: int
    policy: str
    data_share: npt.NDArray[np.float64]
    num_classes: int
    noise_std: float
    delivered: tuple[npt.NDArray[np.int64], ...]
    element_error: tuple[npt.NDArray[np.float64], ...]
    loss: npt.NDArray[np.float64]


def predict(
    shared: dict[str, float],
    floor: npt.NDArray[np.float64],
    heterogeneity: npt.NDArray[np.float64],
    drift: npt.NDArray[np.float64],
    traj: Trajectory,
) -> npt.NDArray[np.float64]:
    """The surrogate's test losses (T+1, N) on ``traj``'s deliveries.

    The same recursion as :class:`envs.surrogate.SurrogateDynamics` with
    given per-client constants (a test checks the two agree).
    """
    n = len(traj.data_share)
    gap = max(math.log(traj.num_classes) - float(floor.mean()), 0.0)
    uploads, age = np.zeros(n), np.zeros(n)
    tau, kappa = shared["participation_scale"], shared["recency_scale"]

    def loss() -> npt.NDArray[np.float64]:
        return (
            floor
            + gap
            + heterogeneity * np.exp(-uploads / tau)
            + drift * (1.0 - np.exp(-age / kappa))
        )

    out = [loss()]
    for delivered, rho in zip(traj.delivered, traj.element_error, strict=True):
        m = len(delivered)
        share = float(traj.data_share[delivered].sum()) if m else 0.0
        gap = (
            (1.0 - shared["contraction"] * share) * gap
            + shared["noise_weight"] * traj.noise_std**2 / max(m, 1)
            + (shared["channel_weight"] * float(np.mean(rho)) if m else 0.0)
        )
        uploads[delivered] += 1
        age += 1
        age[delivered] = 0
        out.append(loss())
    return np.array(out)


@dataclass
class FitResult:
    """The fitted surrogate.

    Attributes:
        shared: The shared constants (fitted or, if not identified, default).
        fitted: Names of the shared constants that were fitted.
        clients: Per (seed, client): fitted floor, heterogeneity, drift.
        rmse: Root mean squared error of the fit [nats].
        rmse_default: The same with the default shared constants (per-client
            constants re-fitted) [nats].
        residual_by_policy: RMSE of the fit per policy [nats].
    """

    shared: dict[str, float]
    fitted: list[str]
    clients: pd.DataFrame
    rmse: float
    rmse_default: float
    residual_by_policy: dict[str, float] = field(default_factory=dict)

    def rl_fields(self) -> dict[str, Any]:
        """The ``rl.surrogate_*`` config values of this fit."""

        def uniform(values: pd.Series) -> list[float]:
            mean, std = float(values.mean()), float(values.std(ddof=0))
            low = max(mean - math.sqrt(3.0) * std, 0.0)
            return [round(low, 4), round(max(mean + math.sqrt(3.0) * std, low), 4)]

        s = self.shared
        return {
            "surrogate_contraction": round(s["contraction"], 4),
            "surrogate_participation_scale": round(s["participation_scale"], 4),
            "surrogate_recency_rounds": round(s["recency_scale"], 4),
            "surrogate_channel_weight": round(s["channel_weight"], 4),
            "surrogate_noise_weight": round(s["noise_weight"], 4),
            "surrogate_floor": uniform(self.clients["floor"]),
            "surrogate_heterogeneity": uniform(self.clients["heterogeneity"]),
            "surrogate_recency": round(float(self.clients["drift"].mean()), 4),
        }


def _identified(trajs: Sequence[Trajectory]) -> list[str]:
    names = ["contraction", "participation_scale", "recency_scale"]
    if any(
        float(np.max(r, initial=0.0)) > 1e-6 for t in trajs for r in t.element_error
    ):
        names.append("channel_weight")
    if any(t.noise_std > 0 for t in trajs):
        names.append("noise_weight")
    return names


class _Layout:
    """Where each seed's per-client constants sit in the parameter vector."""

    def __init__(self, trajs: Sequence[Trajectory], k: int) -> None:
        self.k = k
        self.sizes = {t.seed: len(t.data_share) for t in trajs}
        self.seeds = sorted(self.sizes)
        self.offset, at = {}, k
        for s in self.seeds:
            self.offset[s], at = at, at + 3 * self.sizes[s]

    def clients(self, x: npt.NDArray[np.float64], seed: int) -> tuple[Any, Any, Any]:
        """(floor, heterogeneity, drift) of ``seed``'s clients in ``x``."""
        o, n = self.offset[seed], self.sizes[seed]
        block = x[o : o + 3 * n].reshape(3, n)
        return block[0], block[1], block[2]

    def vector(self, shared: list[float], column: int) -> npt.NDArray[np.float64]:
        """``shared`` then CLIENT_BOUNDS[·][column] for every client constant."""
        per_client = [
            np.repeat([b[column] for b in CLIENT_BOUNDS], self.sizes[s])
            for s in self.seeds
        ]
        return np.concatenate([np.asarray(shared, dtype=np.float64), *per_client])


def _solve(
    trajs: Sequence[Trajectory], names: list[str], base: dict[str, float]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], _Layout]:
    """Least squares over ``names`` and every client constant; (x, residuals)."""
    from scipy.optimize import least_squares

    layout = _Layout(trajs, len(names))

    def residuals(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        shared = base | dict(zip(names, x[: len(names)], strict=True))
        return np.concatenate(
            [
                (predict(shared, *layout.clients(x, t.seed), t) - t.loss).ravel()
                for t in trajs
            ]
        )

    low = layout.vector([SHARED[n][0] for n in names], 0)
    high = layout.vector([SHARED[n][1] for n in names], 1)
    x0 = np.clip(layout.vector([base[n] for n in names], 2), low, high)
    result = least_squares(
        residuals,
        x0,
        bounds=(low, high),
        x_scale="jac",
        jac_sparsity=_sparsity(trajs, layout),
    )
    return result.x, result.fun, layout


def _sparsity(trajs: Sequence[Trajectory], layout: _Layout) -> Any:
    """Which residuals each parameter moves.

    The shared constants move all; f_n* its seed's (through g_0); h_n and
    d_n client n's of its seed.
    """
    from scipy.sparse import lil_matrix

    rows = sum(t.loss.size for t in trajs)
    pattern = lil_matrix((rows, layout.k + 3 * sum(layout.sizes.values())), dtype=int)
    pattern[:, : layout.k] = 1
    at = 0
    for t in trajs:
        steps, n = t.loss.shape
        o = layout.offset[t.seed]
        pattern[at : at + t.loss.size, o : o + n] = 1  # floors
        for c in range(n):
            cells = at + np.arange(steps) * n + c
            for j in (1, 2):
                pattern[cells, o + j * n + c] = 1
        at += t.loss.size
    return pattern


def fit(
    trajs: Sequence[Trajectory],
    *,
    names: Sequence[str] | None = None,
    fixed: dict[str, float] | None = None,
) -> FitResult:
    """Least-squares fit of the surrogate to ``trajs`` (see the module docstring).

    Args:
        trajs: Rollouts; those of one seed must have the same clients.
        names: Shared constants to fit (default: those the rollouts identify:
            c, τ, κ, plus a_channel with channel errors and a_noise with DP).
        fixed: Values of the shared constants not fitted (default: the
            surrogate's defaults).

    Returns:
        The fit.

    Raises:
        ValueError: For no rollouts or an unknown constant name.
    """
    if not trajs:
        raise ValueError("fit: no rollouts to fit")
    names = list(names) if names is not None else _identified(trajs)
    unknown = [n for n in names if n not in SHARED]
    if unknown:
        raise ValueError(f"fit: names must be among {', '.join(SHARED)}; got {unknown}")
    base = {k: v[2] for k, v in SHARED.items()} | dict(fixed or {})
    x, fun, layout = _solve(trajs, names, base)
    _, fun_default, _ = _solve(trajs, [], base)
    shared = base | {n: float(v) for n, v in zip(names, x[: len(names)], strict=True)}
    rows = [
        {"seed": s, "client": c, "floor": f, "heterogeneity": h, "drift": d}
        for s in layout.seeds
        for c, (f, h, d) in enumerate(zip(*layout.clients(x, s), strict=True))
    ]
    by_policy: dict[str, list[npt.NDArray[np.float64]]] = {}
    for t in trajs:
        err = predict(shared, *layout.clients(x, t.seed), t) - t.loss
        by_policy.setdefault(t.policy, []).append(err.ravel())
    return FitResult(
        shared=shared,
        fitted=names,
        clients=pd.DataFrame(rows).astype(
            {"floor": float, "heterogeneity": float, "drift": float}
        ),
        rmse=float(np.sqrt(np.mean(fun**2))),
        rmse_default=float(np.sqrt(np.mean(fun_default**2))),
        residual_by_policy={
            p: float(np.sqrt(np.mean(np.concatenate(e) ** 2)))
            for p, e in sorted(by_policy.items())
        },
    )


def save_trajectories(trajs: Sequence[Trajectory], path: Path) -> None:
    """Write ``trajs`` as one row per (rollout, round, client) (see module docstring)."""
    rows = []
    for t in trajs:
        steps, n = t.loss.shape
        for r in range(steps):
            ids = t.delivered[r - 1] if r else np.array([], dtype=np.int64)
            rho = (
                dict(zip(ids.tolist(), t.element_error[r - 1].tolist(), strict=True))
                if r
                else {}
            )
            for c in range(n):
                rows.append(
                    {
                        "seed": t.seed,
                        "policy": t.policy,
                        "round": r,
                        "client": c,
                        "test_loss": float(t.loss[r, c]),
                        "delivered": c in rho,
                        "element_error": rho.get(c, float("nan")),
                        "data_share": float(t.data_share[c]),
                        "num_classes": t.num_classes,
                        "noise_std": t.noise_std,
                    }
                )
    pd.DataFrame(rows).to_csv(path, index=False)


def load_trajectories(path: Path) -> list[Trajectory]:
    """Read the rollouts :func:`save_trajectories` wrote."""
    frame = pd.read_csv(path)
    out = []
    for (seed, policy), g in frame.groupby(["seed", "policy"], sort=False):
        g = g.sort_values(["round", "client"])
        steps, n = int(g["round"].max()) + 1, int(g["client"].max()) + 1
        later = g[(g["round"] > 0) & g["delivered"].astype(bool)]
        delivered, errors = [], []
        for r in range(1, steps):
            rows = later[later["round"] == r]
            delivered.append(rows["client"].to_numpy(np.int64))
            errors.append(rows["element_error"].to_numpy(np.float64))
        first = g[g["round"] == 0]
        out.append(
            Trajectory(
                seed=int(seed),
                policy=str(policy),
                data_share=first["data_share"].to_numpy(np.float64),
                num_classes=int(first["num_classes"].iloc[0]),
                noise_std=float(first["noise_std"].iloc[0]),
                delivered=tuple(delivered),
                element_error=tuple(errors),
                loss=g["test_loss"].to_numpy(np.float64).reshape(steps, n),
            )
        )
    return out
