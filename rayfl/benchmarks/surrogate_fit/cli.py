"""``rayfl bench fit-surrogate``: fit the star surrogate to emulate rollouts.

Plays ``--policies`` on ``--fit-seeds`` (emulate mode by default; they must
avoid the benchmark's held-out ``--seeds``) of a scenario whose topology fits
the surrogate (capability ``fits_surrogate``: the star), records them and fits
the star surrogate to them (:mod:`.fit`, which describes the fit and the
files written under ``--out``); ``--fit-from trajectories.csv`` refits saved
rollouts. ``rayfl bench policies --surrogate OUT/surrogate_fit.yaml`` then
runs the benchmark's star surrogate with the fitted constants.

Example:
    rayfl bench fit-surrogate --scenario star-small --fit-seeds 2000:2003 --out fit/
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import yaml

from rayfl.benchmarks import BenchError, bench_parser, parse_seeds
from rayfl.benchmarks.policies.scenarios import Scenario, scenarios
from rayfl.benchmarks.policies.tuning import CONSTANT
from rayfl.benchmarks.surrogate_fit.fit import (
    FitResult,
    Trajectory,
    fit,
    load_trajectories,
    save_trajectories,
)

__all__ = ["collect", "fit_command", "fittable", "main", "parser", "write_fit"]

#: The capability of a topology whose runs the surrogate's fit learns from.
FITS_SURROGATE = "fits_surrogate"


# ------------------------------------------------------------------ rollouts
def collect(
    cfg: Any,
    specs: Sequence[tuple[str, str, dict[str, Any]]],
    seeds: Sequence[int],
    mode: str = "emulate",
    progress: Callable[[str], None] | None = None,
) -> list[Trajectory]:
    """Play every policy of ``specs`` on every seed; record its trajectory.

    As :func:`rayfl.benchmarks.policies.play` (one env per seed, shared by
    the policies; the seed is the data partition and the episode's), with
    the deliveries, per-element errors and every client's test loss.
    """
    from rayfl.benchmarks.policies.benchmark import make_env

    out = []
    for seed in seeds:
        env = make_env(cfg.model_copy(update={"seed": int(seed)}), mode)
        try:
            for spec in specs:
                out.append(_rollout(env, cfg, spec, int(seed), mode))
                if progress:
                    progress(f"{spec[0]} seed {seed}: {cfg.rounds} rounds")
        finally:
            env.close()
    return out


def _rollout(
    env: Any, cfg: Any, spec: tuple[str, str, dict[str, Any]], seed: int, mode: str
) -> Trajectory:
    """One episode of ``spec`` on ``env`` from ``seed``, recorded."""
    from rayfl.benchmarks.policies.benchmark import build_policy
    from rayfl.registry import load
    from rayfl.wireless.modulation import element_error_probability

    bits = cfg.compression.quantize_bits or 32
    obs, _ = env.reset(seed=seed)
    backend = env.unwrapped.backend
    policy = build_policy(env, cfg, spec, mode)
    policy.reset(seed=seed)
    losses = [np.asarray(backend.initial()[0], dtype=np.float64)]
    delivered: list[npt.NDArray[np.int64]] = []
    errors: list[npt.NDArray[np.float64]] = []

    def record(stepped: Any) -> None:
        outcome = stepped.unwrapped.last_outcome
        ber = {r["client"]: r.get("bit_error_rate", 0.0) for r in outcome.rows}
        ids = np.asarray(sorted(outcome.delivered), dtype=np.int64)
        rate = np.array([ber.get(int(c), 0.0) for c in ids], dtype=np.float64)
        delivered.append(ids)
        errors.append(
            np.asarray(
                element_error_probability(rate, bits_per_element=bits), np.float64
            )
        )
        losses.append(np.asarray(outcome.test_loss, dtype=np.float64))

    load("envs.episode:run_episode")(
        env, policy, first_obs=obs, max_steps=cfg.rounds, on_step=record
    )
    size = np.asarray(backend.data_size, dtype=np.float64)
    return Trajectory(
        seed=seed,
        policy=spec[0],
        data_share=size / size.sum(),
        num_classes=_num_classes(backend),
        noise_std=float(backend.uplink.noise_std),
        delivered=tuple(delivered),
        element_error=tuple(errors),
        loss=np.array(losses),
    )


def _num_classes(backend: Any) -> int:
    if hasattr(backend, "num_classes"):
        return int(backend.num_classes)
    return int(backend.system.data.num_classes)


# ------------------------------------------------------------------ the command
def fit_command(
    cfg: Any,
    specs: Sequence[tuple[str, str, dict[str, Any]]],
    seeds: Sequence[int],
    out: Path,
    *,
    mode: str = "emulate",
    scenario: str = "",
    say: Callable[[str], None] = print,
) -> FitResult:
    """Collect rollouts on ``seeds``, fit, write the files under ``out``."""
    t0 = time.perf_counter()
    trajs = collect(cfg, specs, seeds, mode, progress=say)
    rollout_s = time.perf_counter() - t0
    out.mkdir(parents=True, exist_ok=True)
    save_trajectories(trajs, out / "trajectories.csv")
    meta = {"scenario": scenario or cfg.name, "mode": mode, "rollout_s": rollout_s}
    return write_fit(trajs, out, meta, say=say)


def write_fit(
    trajs: Sequence[Trajectory],
    out: Path,
    meta: dict[str, Any],
    *,
    say: Callable[[str], None] = print,
) -> FitResult:
    """Fit ``trajs``; write ``surrogate_fit.json``, ``.csv`` and ``.yaml`` under ``out``."""
    t1 = time.perf_counter()
    result = fit(trajs)
    fields = result.rl_fields()
    seeds = sorted({t.seed for t in trajs})
    policies = list(dict.fromkeys(t.policy for t in trajs))
    report = {
        **meta,
        "seeds": seeds,
        "policies": policies,
        "fitted": result.fitted,
        "shared": result.shared,
        "rl": fields,
        "rmse": result.rmse,
        "rmse_default": result.rmse_default,
        "rmse_by_policy": result.residual_by_policy,
        "clients": result.clients.to_dict(orient="records"),
        "fit_s": round(time.perf_counter() - t1, 1),
    }
    _write(out / "surrogate_fit.json", json.dumps(report, indent=2) + "\n")
    _write(out / "surrogate_fit.csv", _table(result, fields).to_csv(index=False))
    header = (
        f"# rl.surrogate_* fitted by `rayfl bench fit-surrogate` on "
        f"{meta['scenario']} ({meta['mode']}), seeds {seeds}, policies "
        f"{', '.join(policies)}; RMSE {result.rmse:.3f} nats "
        f"(default surrogate {result.rmse_default:.3f})\n"
    )
    _write(out / "surrogate_fit.yaml", header + yaml.safe_dump({"rl": fields}))
    say(
        f"fit: RMSE {result.rmse:.3f} nats (default {result.rmse_default:.3f}); "
        f"{json.dumps(fields)}"
    )
    return result


def _table(result: FitResult, fields: dict[str, Any]) -> pd.DataFrame:
    """One row per ``rl`` field (ranges split in low/high), then the RMSEs."""
    from rayfl.rl.config import RLConfig

    default = RLConfig()
    rows = []
    for name, value in fields.items():
        was = getattr(default, name)
        if isinstance(value, list):
            for end, v, w in zip(("low", "high"), value, was, strict=True):
                rows.append({"name": f"{name}_{end}", "default": w, "fitted": v})
        else:
            rows.append({"name": name, "default": was, "fitted": value})
    rows.append(
        {"name": "rmse_nats", "default": result.rmse_default, "fitted": result.rmse}
    )
    for policy, rmse in result.residual_by_policy.items():
        rows.append(
            {"name": f"rmse_nats_{policy}", "default": math.nan, "fitted": rmse}
        )
    return pd.DataFrame(rows)


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def fittable() -> dict[str, Scenario]:
    """The scenarios the fit takes: those of topologies with :data:`FITS_SURROGATE`."""
    from rayfl.registry import topology_of

    return {
        name: s
        for name, s in scenarios().items()
        if FITS_SURROGATE in topology_of(s.topology).capabilities
    }


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``rayfl bench fit-surrogate``."""
    p = bench_parser("fit-surrogate", __doc__)
    names = ", ".join(fittable())
    p.add_argument("--scenario", required=True, help=f"one of {names}")
    p.add_argument(
        "--fit-seeds",
        default="2000:2003",
        help="seeds of the rollouts (default 2000:2003)",
    )
    p.add_argument(
        "--seeds",
        default="1000:1010",
        help="the benchmark's held-out seeds, which the fit seeds must avoid "
        "(default 1000:1010)",
    )
    p.add_argument(
        "--policies",
        default="round_robin,random,best_channel,learned_untrained",
        help="comma-separated labels of the policies that play the rollouts",
    )
    p.add_argument("--learned", default=None, help="checkpoint of the learned policy")
    p.add_argument(
        "--mode",
        default="emulate",
        choices=["emulate", "surrogate"],
        help="where the rollouts run (surrogate: a self-check of the fit)",
    )
    p.add_argument(
        "--fit-from",
        default=None,
        help="refit the rollouts of a trajectories.csv instead of playing them",
    )
    p.add_argument("--num-cpus", type=int, default=2, help="Ray CPUs (emulate)")
    p.add_argument("--out", default="surrogate-fit", help="output directory")
    return p


def main(argv: list[str] | None = None) -> FitResult:
    """Run ``rayfl bench fit-surrogate`` with the command-line flags ``argv``.

    Raises:
        BenchError: For a scenario that is not a registered star, fit seeds
            that are empty or overlap the held-out ``--seeds``.
    """
    args = parser().parse_args(argv)
    known = fittable()
    scenario = known.get(args.scenario)
    if scenario is None:
        raise BenchError(
            f"--scenario must be a star scenario, one whose topology fits the "
            f"surrogate ({', '.join(known)}); got {args.scenario!r}"
        )
    seeds, held = parse_seeds(args.fit_seeds), set(parse_seeds(args.seeds))
    overlap = sorted(set(seeds) & held)
    if overlap or not seeds:
        raise BenchError(
            f"--fit-seeds must be non-empty and disjoint from the held-out --seeds; "
            f"both have {overlap}"
        )
    out = Path(args.out)
    if args.fit_from:
        return _refit(Path(args.fit_from), scenario.name, held, out)
    only = [p.strip() for p in args.policies.split(",") if p.strip()]
    return _play_and_fit(args, scenario, only, seeds, out)


def _refit(path: Path, scenario: str, held: set[int], out: Path) -> FitResult:
    """``--fit-from``: fit saved rollouts (keeping how they were played)."""
    trajs = load_trajectories(path)
    overlap = sorted({t.seed for t in trajs} & held)
    if overlap:
        raise BenchError(f"--fit-from: its rollouts use held-out seeds {overlap}")
    meta: dict[str, Any] = {"scenario": scenario, "mode": f"from {path}"}
    earlier = path.parent / "surrogate_fit.json"
    if earlier.is_file():
        old = json.loads(earlier.read_text())
        meta |= {k: old[k] for k in ("mode", "rollout_s") if k in old}
    out.mkdir(parents=True, exist_ok=True)
    return write_fit(trajs, out, meta)


def _play_and_fit(
    args: Any, scenario: Scenario, only: Sequence[str], seeds: Sequence[int], out: Path
) -> FitResult:
    """Play ``only`` on ``seeds`` in ``args.mode`` (a Ray session for emulate); fit."""
    from rayfl.benchmarks.policies.benchmark import _check_builds, policy_specs
    from rayfl.config import load_config

    ray = {"ray": {"num_cpus": args.num_cpus, "object_store_memory_mb": 150}}
    cfg = load_config(scenario.config, ray)
    specs = [
        s
        for s in policy_specs(cfg, learned=args.learned, only=only)
        if s[0] != CONSTANT
    ]
    _check_builds(cfg, specs)
    session = None
    if args.mode == "emulate":
        from rayfl.cluster.session import RaySession

        session = RaySession(cfg.ray)
    try:
        return fit_command(
            cfg, specs, seeds, out, mode=args.mode, scenario=scenario.name
        )
    finally:
        if session is not None:
            session.close()


if __name__ == "__main__":
    main()
