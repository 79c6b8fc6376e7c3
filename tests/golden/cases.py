"""Golden cases: tiny runs whose outputs must not change while the engine moves.

Each *run case* is a config mapping for :func:`rayfl.run`; its golden record is
every column of ``metrics.parquet`` and ``rounds.parquet`` (and
``edges.parquet`` when written), plus ``summary.json``, without the wall-clock
fields (:data:`TIMING_KEYS`) and the node placement. Each *env case* is three
steps of a registered Gymnasium env driven by a seeded ``action_space.sample()``;
its record is the observations, rewards and end flags.

The cases cover the three topologies and the paths through today's code that a
refactor could change silently: the built-in selection rules with and without a
channel model, registered policies through the scheduling env, the early stop
at T0 uploads, controls, the run context, personalized downloads, the privacy
ledger, the hierarchy's uniform and registered-policy scheduling with adaptive
control, and pFedWN with lossy links, per-round neighbor selection and the
federated baseline.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = [
    "ENV_CASES",
    "FAST_CASES",
    "RUN_CASES",
    "TIMING_KEYS",
    "env_case",
    "run_case",
]

#: Wall-clock measurements and where actors ran: excluded from every comparison.
TIMING_KEYS = frozenset({"round_time_s", "setup_s", "total_s", "placement"})

_DATA = {
    "dataset": "digits",
    "num_clients": 8,
    "partition": "dirichlet",
    "alpha": 1.0,
    "min_partition_size": 20,
}
_STAR: dict[str, Any] = {
    "seed": 0,
    "rounds": 3,
    "eval_every": 2,
    "data": _DATA,
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": {"kind": "fedavg", "local_steps": 3, "batch_size": 16, "lr": 0.1},
    "output": {"progress": False, "plots": False},
}
_HIER_TOPOLOGY: dict[str, Any] = {
    "kind": "hierarchical",
    "num_edges": 2,
    "tau": 3,
    "local_period": 3,
}
_D2D: dict[str, Any] = {
    "seed": 3,
    "rounds": 2,
    "data": {**_DATA, "num_clients": 6, "alpha": 0.5, "min_partition_size": 30},
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": {"kind": "fedavg", "lr": 0.1, "batch_size": 16},
    "topology": {"kind": "d2d", "target": 0, "epsilon": 0.2},
    "output": {"progress": False, "plots": False},
}


def _merge(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """Return a deep copy of ``base`` with top-level sections replaced or merged."""
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **copy.deepcopy(value)}
        else:
            out[key] = copy.deepcopy(value)
    return out


RUN_CASES: dict[str, dict[str, Any]] = {
    # the built-in rule, no channel: every client every round
    "star_all": _merge(_STAR, scheduler={"policy": "all"}),
    # the built-in random stream (seeded by round), no channel
    "star_random_builtin": _merge(
        _STAR, scheduler={"policy": "random", "clients_per_round": 4}
    ),
    # a registered policy through the scheduling env (wireless section present)
    "star_round_robin_wireless": _merge(
        _STAR,
        scheduler={"policy": "round_robin"},
        wireless={"num_subchannels": 3},
    ),
    "star_proportional_fair_bit_flip": _merge(
        _STAR,
        scheduler={"policy": "proportional_fair"},
        wireless={"num_subchannels": 3, "effects": "bit_flip"},
    ),
    # min-max with Ditto's controls; T0 = 2 uploads ends the run before `rounds`
    "star_minmax_ditto_t0": _merge(
        _STAR,
        rounds=8,
        algorithm={
            "kind": "ditto",
            "local_steps": 3,
            "personal_steps": 3,
            "batch_size": 16,
            "lr": 0.1,
            "personal_lr": 0.1,
            "lam": 0.5,
        },
        scheduler={"policy": "minmax", "controls": True},
        wireless={"num_subchannels": 4},
        privacy={"max_uploads": 2},
    ),
    # Lyapunov drift-plus-penalty on DP-SparFL (the run context, controls)
    "star_lyapunov_sparse_dp": _merge(
        _STAR,
        algorithm={
            "kind": "sparse_dp",
            "local_steps": 3,
            "batch_size": 4,
            "lr": 0.05,
            "clip_norm": 1.0,
            "noise_multiplier": 0.5,
            "epsilon_min": 2.0,
            "epsilon_max": 10.0,
        },
        privacy={"delta": 0.001},
        scheduler={
            "policy": "lyapunov",
            "controls": True,
            "params": {"V": 50.0, "min_sparsity": 0.1},
        },
        wireless={
            "num_subchannels": 3,
            "bandwidth_hz": 15000,
            "noise_psd_dbm_hz": -148.76,
            "downlink_latency": True,
        },
    ),
    # personalized downloads (one model per client) with downlink airtime
    "star_fedamp_downlink": _merge(
        _STAR,
        algorithm={"kind": "fedamp", "local_steps": 3, "batch_size": 16, "lr": 0.1},
        scheduler={"policy": "round_robin"},
        wireless={"num_subchannels": 4, "downlink_latency": True},
    ),
    # DP-FedAvg: the accountant's ledger and the epsilon columns
    "star_dp_fedavg": _merge(
        _STAR,
        scheduler={"policy": "random", "clients_per_round": 4},
        privacy={
            "mechanism": "gaussian",
            "calibration": "accountant",
            "accountant": "rdp",
            "epsilon": 4.0,
            "delta": 1e-5,
            "clip_norm": 1.0,
        },
    ),
    # H2FDP with the seeded uniform choice of S_c^k and hierarchical DP
    "hier_uniform": _merge(_STAR, topology=_HIER_TOPOLOGY),
    # a registered policy per edge on K_e = 2 subchannels, adaptive control on
    "hier_round_robin_ke2_control": _merge(
        _STAR,
        topology={
            **_HIER_TOPOLOGY,
            "control": {"enabled": True, "tau_max": 6},
            "scheduling": {"subchannels_per_edge": 2},
        },
        scheduler={"policy": "round_robin"},
    ),
    # pFedWN, neighbors selected once at t = 0, Bernoulli link losses
    "d2d_pfedwn_once_bernoulli": _merge(
        _D2D, topology={**_D2D["topology"], "link_model": "bernoulli"}
    ),
    # neighbors re-selected every round through the D2D env
    "d2d_env_random_neighbors": _merge(
        _D2D,
        topology={
            **_D2D["topology"],
            "selection_via": "env",
        },
        scheduler={"policy": "random_neighbors"},
    ),
    # FedAvg over the target and its selected neighbors
    "d2d_federated_fedavg": _merge(
        _D2D, topology={**_D2D["topology"], "method": "federated"}
    ),
}

#: The default suite's subset: one case per topology, a few seconds each.
FAST_CASES = ("star_round_robin_wireless", "hier_uniform", "d2d_federated_fedavg")

_ENV_STAR = _merge(
    _STAR, rounds=5, wireless={"num_subchannels": 3}, name="golden-env-star"
)
_ENV_D2D = _merge(_D2D, rounds=5, name="golden-env-d2d")

ENV_CASES: dict[str, dict[str, Any]] = {
    "env_wireless_emulate": {
        "id": "WirelessFL-v0",
        "kwargs": {"config": _ENV_STAR, "mode": "emulate"},
    },
    "env_wireless_surrogate": {
        "id": "WirelessFL-v0",
        "kwargs": {"config": _ENV_STAR, "mode": "surrogate"},
    },
    "env_hierarchical_emulate": {
        "id": "HierarchicalFL-v0",
        "kwargs": {
            "config": _merge(
                _STAR,
                rounds=5,
                topology={**_HIER_TOPOLOGY, "scheduling": {"subchannels_per_edge": 2}},
                scheduler={"policy": "round_robin"},
            )
        },
    },
    "env_d2d_emulate": {
        "id": "D2DNeighbor-v0",
        "kwargs": {"config": _ENV_D2D, "mode": "emulate"},
    },
    "env_d2d_surrogate": {
        "id": "D2DNeighbor-v0",
        "kwargs": {"config": _ENV_D2D, "mode": "surrogate"},
    },
}

#: Steps of each env rollout, and the seed of reset and of the action sampler.
ENV_STEPS = 3
ENV_SEED = 7


def run_case(name: str, output_dir: str) -> dict[str, Any]:
    """Run one run case and return its record (JSON-able, timing removed).

    Args:
        name: A key of :data:`RUN_CASES`.
        output_dir: Where the run directory goes (``output.dir``).

    Returns:
        ``{"metrics": {column: values}, "rounds": {...}, "summary": {...}}``
        and ``"edges"`` when the run writes ``edges.parquet``.
    """
    import pandas as pd

    import rayfl

    config = {"name": name, **RUN_CASES[name]}
    result = rayfl.run(config, {"output.dir": output_dir})
    record: dict[str, Any] = {
        "metrics": _columns(result.metrics),
        "rounds": _columns(result.rounds),
        "summary": _plain(result.summary),
    }
    edges = result.run_dir / "edges.parquet"
    if edges.exists():
        record["edges"] = _columns(pd.read_parquet(edges))
    return _plain(record)


def env_case(name: str) -> dict[str, Any]:
    """Roll one env case out for :data:`ENV_STEPS` steps and return its record.

    Args:
        name: A key of :data:`ENV_CASES`.

    Returns:
        ``{"observations": [...], "rewards": [...], "terminated": [...],
        "truncated": [...]}``, the first observation from ``reset``.
    """
    import gymnasium as gym

    import envs  # noqa: F401  (registers the ids)

    case = ENV_CASES[name]
    env = gym.make(case["id"], **case["kwargs"])
    try:
        obs, _ = env.reset(seed=ENV_SEED)
        env.action_space.seed(ENV_SEED)
        record: dict[str, Any] = {
            "observations": [_plain(obs)],
            "actions": [],
            "rewards": [],
            "terminated": [],
            "truncated": [],
        }
        for _ in range(ENV_STEPS):
            action = _one_subchannel_per_device(
                env.unwrapped, env.action_space.sample()
            )
            obs, reward, terminated, truncated, _ = env.step(action)
            record["actions"].append(_plain(action))
            record["observations"].append(_plain(obs))
            record["rewards"].append(float(reward))
            record["terminated"].append(bool(terminated))
            record["truncated"].append(bool(truncated))
    finally:
        env.close()
    return _plain(record)


def _one_subchannel_per_device(env: Any, action: Any) -> Any:
    """Idle every repeat of a device within an edge (the hierarchy refuses repeats).

    Other envs' actions are returned unchanged (the star env and the D2D env
    accept any sample).
    """
    if not hasattr(env, "split_action"):
        return action
    parts = [part.copy() for part in env.split_action(action)]
    for part, n in zip(parts, env.sizes, strict=True):
        seen: set[int] = set()
        for i, device in enumerate(part.tolist()):
            if device < n and device in seen:
                part[i] = n  # n = idle subchannel
            seen.add(device)
    return env.join_actions(parts)


def _columns(frame: Any) -> dict[str, list[Any]]:
    """Return a DataFrame as ``{column: values}`` without the timing columns."""
    return {
        str(c): _plain(frame[c].tolist()) for c in frame.columns if c not in TIMING_KEYS
    }


def _plain(value: Any) -> Any:
    """Return ``value`` as JSON types (numpy scalars and arrays unwrapped)."""
    import numpy as np

    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value
