"""The command line of the surrogate fit, and ``--merge``, of ``rayfl bench policies``.

``--fit-surrogate`` plays ``--policies`` on ``--fit-seeds`` (emulate mode by
default) and fits the star surrogate to the rollouts (:mod:`.surrogate_fit`);
``--fit-from`` refits saved rollouts; ``--surrogate PATH`` runs the
benchmark's star surrogate with a fitted fragment; ``--merge DIRS`` reports
the episodes of earlier runs together (:func:`.policies_report.merge_outputs`).

Example:
    rayfl bench policies --fit-surrogate --scenario star-small --fit-seeds 2000:2003
    --policies round_robin,random,best_channel,learned_untrained --out fit/
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

from rayfl.benchmarks.surrogate_fit import (
    FitResult,
    Trajectory,
    fit,
    load_trajectories,
    save_trajectories,
)

__all__ = [
    "add_arguments",
    "collect",
    "fit_command",
    "other_command",
    "surrogate_overrides",
    "write_fit",
]


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
    from rayfl.benchmarks.policies import make_env

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
    from envs.episode import run_episode
    from rayfl.benchmarks.policies import build_policy
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

    run_episode(env, policy, first_obs=obs, max_steps=cfg.rounds, on_step=record)
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
        f"# rl.surrogate_* fitted by `rayfl bench policies --fit-surrogate` on "
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


def surrogate_overrides(path: str | Path) -> dict[str, Any]:
    """The ``rl.surrogate_*`` overrides of a fitted fragment (``surrogate_fit.yaml``).

    Raises:
        ValueError: If the file is missing or has no ``rl`` mapping of
            ``surrogate_*`` fields.
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"--surrogate: no such file {p}")
    tree = yaml.safe_load(p.read_text()) or {}
    rl = tree.get("rl") if isinstance(tree, dict) else None
    if (
        not isinstance(rl, dict)
        or not rl
        or any(not str(k).startswith("surrogate_") for k in rl)
    ):
        raise ValueError(
            f"--surrogate: {p} must hold an `rl:` mapping of surrogate_* fields "
            "(as `--fit-surrogate` writes)"
        )
    return {f"rl.{k}": v for k, v in rl.items()}


def fit_main(
    args: Any, scenarios: Sequence[Any], only: Sequence[str], *, seeds: Sequence[int]
) -> FitResult:
    """``rayfl bench policies --fit-surrogate``: one star scenario, ``--fit-seeds``.

    Raises:
        BenchError: For not exactly one star scenario, fit seeds that overlap
            the held-out ``--seeds``, or a mode other than emulate/surrogate.
    """
    from rayfl.benchmarks.policies import (
        BenchError,
        _check_builds,
        _seeds,
        policy_specs,
    )
    from rayfl.config import load_config

    if len(scenarios) != 1 or scenarios[0].topology != "star":
        raise BenchError(
            "--fit-surrogate fits the star surrogate: give one star --scenario, got "
            f"{[s.name for s in scenarios]}"
        )
    overlap = sorted(set(seeds) & set(_seeds(args.seeds)))
    if overlap or not seeds:
        raise BenchError(
            f"--fit-seeds must be non-empty and disjoint from the held-out --seeds; "
            f"both have {overlap}"
        )
    if args.fit_from:
        trajs = load_trajectories(Path(args.fit_from))
        held_out = sorted({t.seed for t in trajs} & set(_seeds(args.seeds)))
        if held_out:
            raise BenchError(f"--fit-from: its rollouts use held-out seeds {held_out}")
        meta = {"scenario": scenarios[0].name, "mode": f"from {args.fit_from}"}
        earlier = Path(args.fit_from).parent / "surrogate_fit.json"
        if earlier.is_file():  # keep how the rollouts were played
            old = json.loads(earlier.read_text())
            meta |= {k: old[k] for k in ("mode", "rollout_s") if k in old}
        Path(args.out).mkdir(parents=True, exist_ok=True)
        return write_fit(trajs, Path(args.out), meta)
    mode = args.mode or "emulate"
    if mode not in ("emulate", "surrogate"):
        raise BenchError(
            f"--fit-surrogate: --mode must be emulate or surrogate, got {mode}"
        )
    ray = {"ray": {"num_cpus": args.num_cpus, "object_store_memory_mb": 150}}
    cfg = load_config(scenarios[0].config, ray)
    specs = [
        s
        for s in policy_specs(cfg, learned=args.learned, only=only)
        if s[0] != "constant_tuned"
    ]
    _check_builds(cfg, specs)
    session = None
    if mode == "emulate":
        from rayfl.session import RaySession

        session = RaySession(cfg.ray)
    try:
        return fit_command(
            cfg, specs, seeds, Path(args.out), mode=mode, scenario=scenarios[0].name
        )
    finally:
        if session is not None:
            session.close()


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--surrogate``, ``--fit-surrogate``, ``--fit-seeds``, ``--fit-from``, ``--merge``."""
    p.add_argument(
        "--surrogate",
        default=None,
        help="a fitted surrogate (surrogate_fit.yaml of --fit-surrogate) for the "
        "star's surrogate mode (default: the configured one)",
    )
    p.add_argument(
        "--fit-surrogate",
        action="store_true",
        help="instead of the benchmark: play --policies in emulate mode on "
        "--fit-seeds and fit the star surrogate to them (surrogate_fit.yaml)",
    )
    p.add_argument(
        "--fit-seeds",
        default="2000:2003",
        help="seeds of --fit-surrogate, disjoint from --seeds (default 2000:2003)",
    )
    p.add_argument(
        "--fit-from",
        default=None,
        help="with --fit-surrogate: refit the rollouts of a trajectories.csv "
        "instead of playing them",
    )
    p.add_argument(
        "--merge",
        default=None,
        help="instead of running: comma-separated --out directories of earlier "
        "runs (DIR or DIR:MODE for one mode's episodes) to report together",
    )


def other_command(args: Any, scenarios: Sequence[Any], only: Sequence[str]) -> bool:
    """Run ``--merge`` or ``--fit-surrogate`` if asked; return whether one ran.

    Raises:
        BenchError: For bad arguments of either (one line).
    """
    from rayfl.benchmarks.policies import BenchError, _seeds
    from rayfl.benchmarks.policies_report import merge_outputs

    out = Path(args.out)
    if args.merge:
        dirs = [d.strip() for d in args.merge.split(",") if d.strip()]
        try:
            merge_outputs(dirs, out)
        except ValueError as e:
            raise BenchError(str(e)) from None
        print(f"wrote {out}/ from {len(dirs)} runs")
        return True
    if args.fit_surrogate:
        fit_main(args, scenarios, only, seeds=_seeds(args.fit_seeds))
        return True
    return False


def surrogate_overrides_for(args: Any) -> dict[str, Any]:
    """``--surrogate``: its overrides, and a copy of it beside the results."""
    from rayfl.benchmarks.policies import BenchError

    if args.surrogate is None:
        return {}
    try:
        overrides = surrogate_overrides(args.surrogate)
    except ValueError as e:
        raise BenchError(str(e)) from None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "surrogate_used.yaml").write_text(Path(args.surrogate).read_text())
    return overrides
