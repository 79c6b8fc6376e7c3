"""``rayfl bench policies``: every scheduling policy on registered scenarios.

Runs each registered scenario (:mod:`.policies_scenarios`) on fixed held-out
seeds, in surrogate mode, emulate mode or both, under every registered policy
that applies to its topology, plus the baselines a learned policy must be read
beside (DESIGN.md):

| row | what it is |
|-----|------------|
| ``learned`` | the shipped learned policy (or ``--learned PATH``) |
| ``learned_<name>`` | more trained policies side by side: ``--learned learned_a=PATH,learned_b=PATH`` (``learned=PATH`` replaces the shipped one) |
| ``learned_untrained`` | a freshly initialised score network with the learned decoder (``learned`` with ``untrained=True``) |
| ``constant_tuned`` | round robin with its constants tuned (:mod:`.policies_tuning`): each held at the grid value with the best mean return on the training seeds (``--train-seeds``, disjoint from the held-out ones); the grid grows past an edge that holds the best value (``--constant-search extend``, the default; ``fixed``: the four grid values only). Star: the algorithm's per-client controls (FedAvg: ``lr``). Hierarchy (its env schedules subchannels only, no per-device controls): the configured step size as a config value, ``topology.lr.gamma`` (``lr.mode: manual``, η_k = γ/√(k+1)) or ``algorithm.lr`` (``lr.mode: constant``); every other policy runs at the configured value. Not on D2D |
| every other registered policy | the papers' own policies (``minmax`` with its controls taken from the algorithm, ``lyapunov``, ``channel_threshold``, …) and the heuristics |

A held-out seed ``s`` is both the config seed (data partition) and the
episode's reset seed, so every policy plays the same episodes. Writes under
``--out`` (default ``bench-policies/``), with a progress bar (episodes done,
the tuning's included, and the ETA; :class:`rayfl.compare.progress.RowLog`)
while it runs; a failure or Ctrl-C keeps the finished episodes in
``episodes.csv`` and says so in one line:

| file | content |
|------|---------|
| ``episodes.csv`` | one row per (scenario, mode, policy, seed): ``return`` and the KPIs (``max_client_loss``, ``jain``, ``accuracy``, ``energy_j``, ``latency_s``, ``epsilon``); each row is written as its episode finishes |
| ``summary.csv`` / ``summary.md`` | per (scenario, mode, policy): mean and 95% t-CI of each KPI; paired difference to the best heuristic with its CI, p-value, wins/losses/ties (:mod:`.policies_stats`) |
| ``surrogate_check.csv`` / ``.md`` | with ``--mode both``: per scenario and policy, both modes' returns, the error, the paired differences to the emulation's best heuristic in both modes, ``spearman`` and the ``fit_for_training`` verdict |
| ``runs.csv`` | wall time of each (scenario, mode), the tuned constants (``constant_tuned``), the mean return of every value tried on the training seeds (``constant_grid``) and the search (``constant_search``) |
| ``merged_from.txt`` | with ``--merge DIRS``: the runs whose episodes were merged |
| ``surrogate_used.yaml`` | with ``--surrogate PATH``: a copy of the fitted surrogate the star's surrogate mode used (``rayfl bench fit-surrogate``, :mod:`.surrogate_fit_cli`) |
| ``<scenario>.png`` | mean return ± 95% CI per policy, one panel per mode |

Example:
    rayfl bench policies --topology star --size small --mode both --seeds 1000:1010
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rayfl.benchmarks.policies_cli import BenchError
from rayfl.benchmarks.policies_report import write_outputs
from rayfl.benchmarks.policies_scenarios import SCENARIOS, Scenario, scenarios_for
from rayfl.benchmarks.policies_tuning import (
    CONSTANT,
    SEARCHES,
    ConstantControls,
    Spec,
    constant_grid,
    env_config,
    topology_name,
    tunable_constants,
    tune_constants,
)
from rayfl.compare.progress import RowLog
from rayfl.config import RunConfig, load_config, parse_overrides
from rayfl.registry import ENVS, POLICIES, check_policy, load, make_policy

__all__ = ["BenchError", "bench_policies", "main", "policy_specs"]

UNTRAINED = "learned_untrained"


def learned_checkpoints(text: str | None) -> dict[str, str]:
    """Parse ``--learned`` ``PATH`` (of ``learned``) or ``label=PATH,...`` to {label: path}.

    Labels: ``learned`` or ``learned_<name>`` (never taken for heuristics).

    Raises:
        BenchError: For a bad or repeated label or an empty path.
    """
    if not text:
        return {}
    if "=" not in text:
        return {"learned": text}
    out: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",") if part.strip()):
        label, _, path = (v.strip() for v in item.partition("="))
        ok = label == "learned" or (label.startswith("learned_") and label != UNTRAINED)
        if not ok or not path or label in out:
            raise BenchError(
                f"--learned: give PATH or learned_<name>=PATH,... (labels 'learned' or "
                f"'learned_<name>' but not {UNTRAINED!r}, each once); got {item!r}"
            )
        out[label] = path
    return out


def policy_specs(
    cfg: RunConfig,
    *,
    learned: str | Mapping[str, str] | None = None,
    only: Sequence[str] = (),
) -> list[Spec]:
    """Every policy the benchmark runs on ``cfg``'s topology: (label, name, params).

    Registered policies that apply (``rayfl.registry.check_policy``; the
    client-set rule ``all`` is not a subchannel scheduler), the extra learned
    policies of ``learned`` ({label: checkpoint}, or one checkpoint for
    ``learned``), then ``learned_untrained`` and, where there is something
    to tune (:func:`tunable_constants`: the star and the hierarchy),
    ``constant_tuned`` (its values set by :func:`tune_constants`). ``only``
    keeps those labels.
    """
    named = (
        learned_checkpoints(learned)
        if isinstance(learned, str)
        else dict(learned or {})
    )
    topology = topology_name(cfg)
    parts = {
        "star": {"assignment", "controls"},  # the env exposes the controls
        "hierarchical": {"assignment"},  # the env schedules subchannels
    }.get(topology)
    specs: list[Spec] = []
    for name in POLICIES:
        if name == "all":
            continue
        try:
            check_policy(name, topology=topology, parts=parts)
        except ValueError:
            continue
        params: dict[str, Any] = {}
        if name == "learned" and "learned" in named:
            params["checkpoint"] = named["learned"]
        specs.append((name, name, params))
        if name == "learned":
            specs += [
                (label, "learned", {"checkpoint": path})
                for label, path in named.items()
                if label != "learned"
            ]
    untrained: dict[str, Any] = {"untrained": True}
    if topology == "d2d":
        untrained["selection"] = "positive"  # how D2D policies are trained
    specs.append((UNTRAINED, "learned", untrained))
    if tunable_constants(cfg):
        specs.append((CONSTANT, "round_robin", {}))
    return [s for s in specs if not only or s[0] in only]


# ------------------------------------------------------------------ one episode
def make_env(cfg: RunConfig, mode: str) -> Any:
    """The scenario's env (the star with its controls exposed) in ``mode``."""
    topology = topology_name(cfg)
    reward = cfg.rl.reward if cfg.rl is not None else "min_max_loss"
    extra = {"controls": True} if topology == "star" else {}
    return load(ENVS[topology])(cfg, mode=mode, reward=reward, **extra)


def build_policy(env: Any, cfg: RunConfig, spec: Spec, mode: str) -> Any:
    """Build one benchmark policy for a reset ``env``, as a run would."""
    label, name, params = spec
    topology = topology_name(cfg)
    if topology == "hierarchical":
        if label.startswith(CONSTANT):  # its params are config values (env_config)
            params = {}
        return load("envs.hierarchical:EdgePolicies")(env.unwrapped, name, **params)
    if topology == "d2d":
        return make_policy(name, env, **params)
    from rayfl.compare.variants import config_context
    from rayfl.star.context import star_context

    unwrapped = env.unwrapped
    context = (
        star_context(unwrapped.backend.system)
        if mode == "emulate"
        else config_context(cfg)
    )
    if not label.startswith(CONSTANT):
        return make_policy(name, env, context=context, **params)
    table = np.array(unwrapped.default_controls, dtype=np.float32)
    for j, control in enumerate(unwrapped.control_names):
        if control in params:
            table[:, j] = float(params[control])
    base = make_policy(name, env, context=context)
    return ConstantControls(base, table)


def episode_kpis(env: Any, policy: Any, seed: int) -> dict[str, float]:
    """Run one episode from ``seed`` (env reset first); return its return and KPIs.

    ``max_client_loss``, ``jain`` (Jain's index of the clients' test losses)
    and ``accuracy`` are read at the last round; ``energy_j`` and
    ``latency_s`` are summed over the rounds; ``epsilon`` is the largest
    per-client privacy spent observed (NaN where not observed).
    """
    from rayfl.metrics import jain_index

    run_episode = load("envs.episode:run_episode")
    unwrapped = env.unwrapped
    totals = {"energy_j": 0.0, "latency_s": 0.0}

    def add(stepped: Any) -> None:
        scores = stepped.unwrapped._scores  # the round's Scores (envs.base)
        totals["energy_j"] += float(scores.energy_j)
        totals["latency_s"] += float(scores.latency_s)

    obs, _ = env.reset(seed=seed)
    policy.reset(seed=seed)
    result = run_episode(
        env, policy, first_obs=obs, max_steps=unwrapped.config.rounds, on_step=add
    )
    scores = unwrapped._scores
    last = unwrapped._get_obs()
    spent = last.get("privacy_spent") if isinstance(last, dict) else None
    return {
        "return": float(result.total_reward),
        "max_client_loss": float(np.nanmax(scores.test_loss)),
        "jain": float(jain_index(scores.test_loss)),
        "accuracy": float(scores.mean_acc()),
        **totals,
        "epsilon": float(np.max(spent)) if spent is not None else float("nan"),
    }


def play(
    cfg: RunConfig,
    specs: Sequence[Spec],
    seeds: Sequence[int],
    mode: str,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every policy of ``specs`` on every seed; one row each (policy, seed, KPIs).

    One env per seed (its data partition) and config (:func:`env_config`: a
    hierarchy's ``constant_tuned`` plays on its own), shared by the policies.
    ``progress`` gets each row as its episode finishes.
    """
    groups: dict[str, tuple[RunConfig, list[Spec]]] = {}
    for spec in specs:
        own = env_config(cfg, spec)
        groups.setdefault(own.model_dump_json(), (own, []))[1].append(spec)
    rows = []
    for seed in seeds:
        for own, group in groups.values():
            env = make_env(own.model_copy(update={"seed": int(seed)}), mode)
            try:
                for spec in group:
                    env.reset(seed=int(seed))  # emulate: the policy binds the system
                    policy = build_policy(env, cfg, spec, mode)
                    kpis = episode_kpis(env, policy, int(seed))
                    rows.append({"policy": spec[0], "seed": int(seed), **kpis})
                    if progress:
                        progress(rows[-1])
            finally:
                env.close()
    return rows


# ------------------------------------------------------------------ the benchmark
def bench_policies(
    scenarios: Sequence[Scenario],
    *,
    modes: Sequence[str],
    seeds: Sequence[int],
    train_seeds: Sequence[int],
    out: Path,
    learned: str | Mapping[str, str] | None = None,
    only: Sequence[str] = (),
    num_cpus: int = 2,
    verbose: bool = True,
    overrides: dict[str, Any] | None = None,
    constant_search: str = "extend",
) -> pd.DataFrame:
    """Run the benchmark; write its files under ``out``; return the summary.

    ``overrides`` (dotted config keys) apply to every scenario, e.g. a fitted
    surrogate's ``rl.surrogate_*`` (``--surrogate``) or ``--set`` values; they
    are recorded in ``runs.csv``. ``constant_search`` is how
    ``constant_tuned`` searches (:func:`tune_constants`: ``extend`` or
    ``fixed``).

    Raises:
        ValueError: If the held-out and training seeds overlap, or no seeds.
    """
    _check_args(seeds, train_seeds, constant_search)
    say = print if verbose else (lambda _: None)
    ray_override = {"ray": {"num_cpus": num_cpus, "object_store_memory_mb": 150}}
    ray_override |= overrides or {}
    configs = {s.name: load_config(s.config, ray_override) for s in scenarios}
    for scenario in scenarios:  # every policy builds before anything runs
        _check_builds(
            configs[scenario.name],
            policy_specs(configs[scenario.name], learned=learned, only=only),
        )
    specs = {
        name: policy_specs(cfg, learned=learned, only=only)
        for name, cfg in configs.items()
    }
    total = len(modes) * sum(
        _planned(configs[name], mine, seeds, train_seeds)
        for name, mine in specs.items()
    )
    out.mkdir(parents=True, exist_ok=True)
    log = RowLog([out / "episodes.csv"], total=total, desc="episodes", progress=verbose)
    session = _session(configs, modes)
    runs: list[dict[str, Any]] = []
    summary = pd.DataFrame()
    try:
        with log.guard():
            for scenario in scenarios:
                for mode in modes:
                    say(f"== {scenario.name} ({mode}, {len(seeds)} seeds)")
                    cfg, mine = configs[scenario.name], specs[scenario.name]
                    run = _run_scenario(
                        cfg,
                        scenario,
                        mine,
                        mode,
                        seeds,
                        train_seeds,
                        log,
                        constant_search,
                    )
                    runs.append(run | {"overrides": json.dumps(overrides or {})})
                    say(f"   {runs[-1]['wall_s']:.0f} s")
                    # after every (scenario, mode): a later failure keeps these
                    summary = write_outputs(
                        pd.DataFrame(log.rows), pd.DataFrame(runs), out
                    )
    finally:
        if session is not None:
            session.close()
    return summary


def _check_args(
    seeds: Sequence[int], train_seeds: Sequence[int], constant_search: str
) -> None:
    """Refuse no held-out seeds, overlapping seed sets or an unknown search."""
    if not seeds:
        raise BenchError("--seeds: give at least one held-out seed")
    if constant_search not in SEARCHES:
        raise BenchError(
            f"--constant-search must be one of {', '.join(SEARCHES)}; "
            f"got {constant_search!r}"
        )
    overlap = sorted(set(seeds) & set(train_seeds))
    if overlap:
        raise BenchError(
            f"--train-seeds must be disjoint from the held-out --seeds; both have "
            f"{overlap}"
        )


def _planned(
    cfg: RunConfig,
    specs: Sequence[Spec],
    seeds: Sequence[int],
    train_seeds: Sequence[int],
) -> int:
    """Episodes one (scenario, mode) plays: the tuning's and the held-out ones."""
    tuning = 0
    if any(label == CONSTANT for label, *_ in specs):
        grids = [constant_grid(*c) for c in tunable_constants(cfg).values()]
        tuning = len(train_seeds) * sum(len(g) for g in grids)
    return tuning + len(seeds) * len(specs)


def _run_scenario(
    cfg: RunConfig,
    scenario: Scenario,
    specs: Sequence[Spec],
    mode: str,
    seeds: Sequence[int],
    train_seeds: Sequence[int],
    log: RowLog,
    constant_search: str = "extend",
) -> dict[str, Any]:
    """One (scenario, mode): tune the constants, play every policy on every seed.

    Each held-out episode's row goes to ``log`` (``episodes.csv``) as it
    finishes; a training episode advances its bar.

    Returns:
        The run's row (wall time, tuned constants and the grid's mean returns
        on the training seeds).
    """
    t0 = time.perf_counter()
    where = {"scenario": scenario.name, "topology": scenario.topology}
    where |= {"size": scenario.size, "mode": mode}

    def tuning(row: dict[str, Any]) -> None:
        log.describe(f"{mode} tuning: {row['policy']} seed {row['seed']}")
        log.tick()  # a search past the grid grows the total

    def held_out(row: dict[str, Any]) -> None:
        log.describe(f"{mode}: {row['policy']} seed {row['seed']}")
        log.add({**where, **row})

    tuned: dict[str, float] = {}
    grid: dict[str, dict[str, float]] = {}
    if any(label == CONSTANT for label, *_ in specs):
        tuned = tune_constants(
            cfg,
            train_seeds,
            mode,
            play=play,
            scores=grid,
            progress=tuning,
            search=constant_search,
        )
    mine = [
        (label, name, {**params, **tuned} if label == CONSTANT else params)
        for label, name, params in specs
    ]
    play(cfg, mine, seeds, mode, progress=held_out)
    return {
        "scenario": scenario.name,
        "mode": mode,
        "seeds": len(seeds),
        "policies": len(mine),
        "wall_s": round(time.perf_counter() - t0, 1),
        "constant_tuned": json.dumps(tuned),
        "constant_grid": json.dumps(grid),
        "constant_search": constant_search if tuned else "",
    }


def _check_builds(cfg: RunConfig, specs: Sequence[Spec]) -> None:
    """Build every policy on the surrogate env of ``cfg`` (seconds, no Ray)."""
    env = make_env(cfg, "surrogate")
    try:
        env.reset(seed=0)
        for spec in specs:
            try:
                build_policy(env, cfg, spec, "surrogate")
            except (ValueError, TypeError, FileNotFoundError) as e:
                raise BenchError(
                    f"bench policies: policy {spec[0]} cannot run on {cfg.name}: {e}"
                ) from e
    finally:
        env.close()


def _session(configs: dict[str, RunConfig], modes: Sequence[str]) -> Any:
    if "emulate" not in modes:
        return None
    from rayfl.cluster.session import RaySession

    return RaySession(next(iter(configs.values())).ray)


# ------------------------------------------------------------------ command line
def main(argv: list[str] | None = None) -> None:
    """Run ``rayfl bench policies`` with the command-line flags ``argv``."""
    from rayfl.benchmarks.policies_cli import merge, parse_seeds, parser, surrogate

    args = parser().parse_args(argv)
    if args.scenario:
        unknown = [s for s in args.scenario if s not in SCENARIOS]
        if unknown:
            raise BenchError(
                f"--scenario must be one of {', '.join(SCENARIOS)}; got {unknown[0]!r}"
            )
        scenarios = [SCENARIOS[s] for s in args.scenario]
    else:
        scenarios = scenarios_for(args.topology, args.size)
    modes = ["surrogate", "emulate"] if args.mode == "both" else [args.mode]
    only = [p.strip() for p in (args.policies or "").split(",") if p.strip()]
    out = Path(args.out)
    t0 = time.perf_counter()
    if args.merge:
        merge(args.merge, out)
        return
    overrides = surrogate(args.surrogate, out) | parse_overrides(args.set or [])
    bench_policies(
        scenarios,
        modes=modes,
        seeds=parse_seeds(args.seeds),
        train_seeds=parse_seeds(args.train_seeds),
        out=out,
        learned=learned_checkpoints(args.learned),
        only=only,
        num_cpus=args.num_cpus,
        overrides=overrides,
        constant_search=args.constant_search,
    )
    print(
        f"\nwrote {out}/summary.csv, summary.md, episodes.csv, runs.csv, "
        f"*.png in {time.perf_counter() - t0:.0f} s"
    )


if __name__ == "__main__":
    main()
