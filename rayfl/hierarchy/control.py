"""Between two global rounds: η_k, the smoothness estimate β̂ and the next interval.

Algorithm 1 of H2FDP (lines 33–35), driver side: :func:`learning_rate` gives
η_k (constant, γ/√(k+1), or the theory step size once β̂ is known);
:func:`estimate_smoothness` asks the device actors for β̂ on up to 4
participants each; :func:`next_interval` builds problem P from the cost model
and the DP constants and solves it (``rayfl.hierarchy.controller``) for
τ_{k+1}, s_T and s_U.

Symbol table: τ → ``tau``, m → ``period``, K_ℓ → ``num_local``, β̂ →
``beta_hat``, s_T / s_U → ``participants`` of trusted / untrusted edges.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rayfl.hierarchy.config import TopologyConfig
from rayfl.hierarchy.controller import ControlProblem, solve, step_size
from rayfl.hierarchy.cost import CostModel
from rayfl.hierarchy.topology import Topology

__all__ = ["estimate_smoothness", "learning_rate", "next_interval"]


def learning_rate(
    topo: TopologyConfig,
    *,
    k: int,
    base_lr: float,
    beta_hat: float,
    tau: int,
    num_global: int,
) -> float:
    """Return η_k for ``topology.lr.mode`` (``base_lr``: ``algorithm.lr``)."""
    lr = topo.lr
    if lr.mode == "constant":
        return float(base_lr)
    if lr.mode == "manual" or not np.isfinite(beta_hat) or beta_hat <= 0:
        return lr.gamma / math.sqrt(k + 1)
    return step_size(k=k, tau_prev=tau, num_global=num_global, beta_hat=beta_hat)


def estimate_smoothness(
    pool: Any, previous: Any, global_ref: Any, chosen: list[list[int]]
) -> float | None:
    """Return the largest smoothness estimate of up to 4 participants per actor.

    Returns:
        β̂, or None when no actor returned a positive value (a dead actor
        returns None).
    """
    calls, called = [], []
    for a, group in enumerate(pool.groups):
        part = [i for i in group if any(i in m for m in chosen)][:4]
        if part:
            calls.append(pool.actors[a].smoothness.remote(previous, global_ref, part))
            called.append(a)
    values = [v for v in pool.gather(calls, called) if v is not None and v > 0]
    return float(max(values)) if values else None


def next_interval(
    topo: TopologyConfig,
    *,
    topology: Topology,
    cost: CostModel,
    num_global: int,
    model_dim: int,
    sample_rate: float,
    steps_done: int,
    num_local: int,
    control_refs: tuple[float, float, float] | None,
) -> tuple[int, int, np.ndarray, tuple[float, float, float]]:
    """Solve problem P for the next interval (Algorithm 1, line 35).

    Args:
        topo: The ``topology`` section (``control``, ``dp``, τ_0).
        topology: Subnets and trust flags.
        cost: The device/backhaul cost model.
        num_global: K_g, global rounds of the run.
        model_dim: abs(w) (``control.model_dim`` overrides).
        sample_rate: q of eq. 15.
        steps_done: SGD steps run so far.
        num_local: K_ℓ (local releases per interval, ``local_at_global`` included).
        control_refs: The cost normalisers from round 0, or None to set them.

    Returns:
        (τ_{k+1}, m_{k+1}, s_c^{k+1} per edge, the cost normalisers).
    """
    ctl, dp = topo.control, topo.dp
    trusted, sizes = topology.trusted, topology.sizes
    n = len(sizes)
    e_dev = np.array([cost.expected_energy_j[list(m)].mean() for m in topology.subnets])
    t_dev = np.array([cost.expected_time_s[list(m)].mean() for m in topology.subnets])
    hop_e, hop_d = cost.global_hop()
    eps = dp.epsilon / 2 if dp.strict_accounting else dp.epsilon
    g = dp.grad_bound or 1.0
    nu_scale = (
        4
        * (ctl.model_dim or model_dim)
        * sample_rate**2
        * g**2
        * math.log(1 / dp.delta)
        / (n**2 * eps**2)
    )
    total_steps = num_global * topo.tau
    base = ControlProblem(
        trusted=trusted,
        sizes=sizes,
        energy_j=e_dev,
        time_s=t_dev,
        backhaul_energy_j=hop_e,
        backhaul_delay_s=hop_d,
        remaining_steps=max(1, total_steps - steps_done),
        tau_max=ctl.tau_max,
        num_local=num_local - int(topo.local_at_global),
        nu_scale=nu_scale,
        edge_constant=dp.edge_constant,
        device_constant=dp.device_constant,
        alpha_energy=ctl.alpha_energy,
        alpha_delay=ctl.alpha_delay,
        alpha_dp=ctl.alpha_dp,
    )
    if control_refs is None:  # normalisers at (τ_0, full s), k = 0
        ref = base.__class__(**{**base.__dict__, "remaining_steps": total_steps})
        e0, d0, nu0 = ref.terms(topo.tau, int(sizes.max()), int(sizes.max()))
        control_refs = (
            (e0, d0, nu0) if ctl.normalize_costs else (1.0, 1.0, nu0 / (e0 + d0))
        )
    e_ref, d_ref, nu_ref = control_refs
    problem = base.__class__(
        **{**base.__dict__, "energy_ref": e_ref, "delay_ref": d_ref, "nu_ref": nu_ref}
    )
    tau, s_t, s_u = solve(problem)
    period = max(1, int(tau) // (problem.num_local + 1))
    participants = np.where(trusted, s_t, s_u).astype(np.int64)
    return int(tau), period, participants, control_refs
