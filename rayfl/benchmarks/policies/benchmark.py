"""The benchmark of ``rayfl bench policies``: its policies, envs, episodes and run.

What it runs and writes is described in :mod:`rayfl.benchmarks.policies`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rayfl import registry
from rayfl.benchmarks import BenchError
from rayfl.benchmarks.policies.labels import (
    UNTRAINED,
    learned_checkpoints,
    self_tune_names,
)
from rayfl.benchmarks.policies.report import write_outputs
from rayfl.benchmarks.policies.scenarios import Scenario
from rayfl.benchmarks.policies.tuning import (
    CONSTANT,
    SEARCHES,
    TUNED,
    TUNED_BASE,
    ConstantControls,
    Spec,
    constant_grid,
    env_config,
    is_tuned,
    policy_knobs,
    row_knobs,
    split_params,
    tunable_constants,
    tune_rows,
    tunes_config,
)
from rayfl.compare.progress import RowLog
from rayfl.config import RunConfig, load_config
from rayfl.registry import LEARNED_POLICY, POLICIES, check_policy, topology_of

__all__ = [
    "UNTRAINED",
    "bench_policies",
    "build_policy",
    "episode_kpis",
    "learned_checkpoints",
    "make_env",
    "play",
    "policy_specs",
    "self_tune_names",
]


def policy_specs(
    cfg: RunConfig,
    *,
    learned: str | Mapping[str, str] | None = None,
    only: Sequence[str] = (),
    self_tune: Sequence[str] = (),
) -> list[Spec]:
    """Every policy the benchmark runs on ``cfg``'s topology: (label, name, params).

    Registered policies that apply (``rayfl.registry.check_policy``; the
    client-set rule ``all`` is not a subchannel scheduler), the extra learned
    policies of ``learned`` ({label: checkpoint}, or one checkpoint for
    ``learned``), then ``learned_untrained`` and, where there is something
    to tune (:func:`tunable_constants`: the star and the hierarchy),
    ``constant_tuned`` (its values set by :func:`tune_constants`); then
    ``<policy>_tuned`` for each heuristic of ``self_tune`` (``("all",)``:
    every one) that applies and has something to tune here
    (:func:`~.tuning.policy_knobs`; its values set by :func:`~.tuning.tune_policy`;
    round robin's is ``constant_tuned``, not repeated).
    ``only`` keeps those labels.
    """
    named = (
        learned_checkpoints(learned)
        if isinstance(learned, str)
        else dict(learned or {})
    )
    plugin = topology_of(cfg)
    specs: list[Spec] = []
    for name in POLICIES:
        try:  # the parts the benchmark's env offers (the star's: its controls too)
            check_policy(name, topology=plugin.name, parts=plugin.bench_parts)
        except ValueError:
            continue
        params: dict[str, Any] = {}
        if name == LEARNED_POLICY and LEARNED_POLICY in named:
            params["checkpoint"] = named[LEARNED_POLICY]
        specs.append((name, name, params))
        if name == LEARNED_POLICY:
            specs += [
                (label, LEARNED_POLICY, {"checkpoint": path})
                for label, path in named.items()
                if label != LEARNED_POLICY
            ]
    untrained = {"untrained": True, **plugin.untrained_params}
    specs.append((UNTRAINED, LEARNED_POLICY, untrained))
    if tunable_constants(cfg):
        specs.append((CONSTANT, TUNED_BASE, {}))
    wanted = set(self_tune)
    specs += [
        (f"{name}{TUNED}", name, {})
        for label, name, _ in list(specs)
        if label == name != LEARNED_POLICY
        and ("all" in wanted or name in wanted)
        and not (name == TUNED_BASE and tunable_constants(cfg))  # constant_tuned
        and policy_knobs(cfg, name)
    ]
    return [s for s in specs if not only or s[0] in only]


# ------------------------------------------------------------------ one episode
def make_env(cfg: RunConfig, mode: str) -> Any:
    """The scenario's env in ``mode``: its topology's ``single`` env.

    With the plug-in's ``bench_env_options`` (the star: its controls exposed).
    """
    plugin = topology_of(cfg)
    reward = cfg.rl.reward if cfg.rl is not None else "min_max_loss"
    env_class = registry.load(plugin.envs["single"])
    return env_class(cfg, mode=mode, reward=reward, **plugin.bench_env_options)


def build_policy(env: Any, cfg: RunConfig, spec: Spec, mode: str) -> Any:
    """Build one benchmark policy for a reset ``env``, as a run would.

    The topology plug-in builds it (:meth:`~rayfl.topology.TopologyPlugin.bench_policy`),
    or :func:`rayfl.registry.build_policy` where it does not. A tuned row
    (``constant_tuned``, ``<policy>_tuned``) gets its own parameters as
    constructor arguments (:func:`~.tuning.split_params`) and plays with the
    topology's constants as config values where the topology
    :func:`~.tuning.tunes_config` (:func:`~.tuning.env_config`), else as the
    env's controls, held constant (:class:`~.tuning.ConstantControls`; not
    for a policy that sets the controls itself).

    Raises:
        ValueError: For a tuned parameter outside its range or unknown.
    """
    label, name, params = spec
    if not is_tuned(spec):
        return _policy(env, cfg, name, params, mode)
    own, constants = split_params(cfg, name, params)
    policy = _policy(env, cfg, name, own, mode)
    tuned = [c for c in policy_knobs(cfg, name) if c in tunable_constants(cfg)]
    if not tuned or tunes_config(cfg):
        return policy
    unwrapped = env.unwrapped
    table = np.array(unwrapped.default_controls, dtype=np.float32)
    for j, control in enumerate(unwrapped.control_names):
        if control in constants:
            table[:, j] = float(constants[control])
    columns = [j for j, c in enumerate(unwrapped.control_names) if c in tuned]
    return ConstantControls(policy, table, columns)


def _policy(
    env: Any, cfg: RunConfig, name: str, params: Mapping[str, Any], mode: str
) -> Any:
    """Policy ``name``: the plug-in's build, else the registry's."""
    policy = topology_of(cfg).bench_policy(env, cfg, name, params, mode)
    if policy is None:
        policy = registry.build_policy(name, env, params=params)
    return policy


def episode_kpis(env: Any, policy: Any, seed: int) -> dict[str, float]:
    """Run one episode from ``seed`` (env reset first); return its return and KPIs.

    ``max_client_loss``, ``jain`` (Jain's index of the clients' test losses)
    and ``accuracy`` are read at the last round; ``energy_j`` and
    ``latency_s`` are summed over the rounds; ``epsilon`` is the largest
    per-client privacy spent observed (NaN where not observed).
    """
    from rayfl.metrics import jain_index

    run_episode = registry.load("envs.episode:run_episode")
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
    self_tune: str | Sequence[str] | None = None,
) -> pd.DataFrame:
    """Run the benchmark; write its files under ``out``; return the summary.

    ``overrides`` (dotted config keys) apply to every scenario, e.g. a fitted
    surrogate's ``rl.surrogate_*`` (``--surrogate``) or ``--set`` values; they
    are recorded in ``runs.csv``. ``constant_search`` is how the tuned rows
    search (:func:`tune_constants`: ``extend`` or ``fixed``). ``self_tune``
    (``--self-tune``: ``all`` or heuristics' names) adds ``<policy>_tuned``
    rows (:func:`policy_specs`).

    Raises:
        ValueError: If the held-out and training seeds overlap, or no seeds.
        BenchError: For an unknown ``self_tune`` name.
    """
    _check_args(seeds, train_seeds, constant_search)
    tune = self_tune_names(self_tune)
    say = print if verbose else (lambda _: None)
    ray_override = {"ray": {"num_cpus": num_cpus, "object_store_memory_mb": 150}}
    ray_override |= overrides or {}
    configs = {s.name: load_config(s.config, ray_override) for s in scenarios}
    _check_self_tune(configs, tune)
    specs = {
        name: policy_specs(cfg, learned=learned, only=only, self_tune=tune)
        for name, cfg in configs.items()
    }
    for name, mine in specs.items():  # every policy builds before anything runs
        _check_builds(configs[name], mine)
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


def _check_self_tune(configs: Mapping[str, RunConfig], names: Sequence[str]) -> None:
    """Refuse a ``--self-tune`` heuristic that gets a tuned row in no scenario."""
    rows = {
        label
        for cfg in configs.values()
        for label, *_ in policy_specs(cfg, self_tune=names)
    }
    idle = [n for n in names if n != "all" and f"{n}{TUNED}" not in rows]
    if idle and not (idle == [TUNED_BASE] and CONSTANT in rows):
        raise BenchError(
            f"--self-tune {idle[0]}: it does not run or has nothing to tune on "
            f"{', '.join(configs)} (no tunable parameters, no topology constants)"
        )


def _planned(
    cfg: RunConfig,
    specs: Sequence[Spec],
    seeds: Sequence[int],
    train_seeds: Sequence[int],
) -> int:
    """Episodes one (scenario, mode) plays: the tuning's grids and the held-out ones.

    A search past a grid's edge adds episodes as it goes.
    """
    tuning = 0
    for spec in specs:
        if is_tuned(spec):
            grids = [constant_grid(*c) for c in row_knobs(cfg, spec).values()]
            tuning += len(train_seeds) * sum(len(g) for g in grids)
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
        The run's row (wall time; ``constant_tuned``'s constants and their
        grid's mean returns on the training seeds; ``self_tuned`` and
        ``self_tuned_grid``, the same of each ``<policy>_tuned``: {label:
        {knob: value}} and {label: {knob: {value: mean return}}}).
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

    chosen, grids = tune_rows(
        cfg,
        specs,
        train_seeds,
        mode,
        play=play,
        progress=tuning,
        search=constant_search,
    )
    mine = [
        (label, name, {**params, **chosen.get(label, {})})
        for label, name, params in specs
    ]
    play(cfg, mine, seeds, mode, progress=held_out)
    tuned, grid = chosen.pop(CONSTANT, {}), grids.pop(CONSTANT, {})
    return {
        "scenario": scenario.name,
        "mode": mode,
        "seeds": len(seeds),
        "policies": len(mine),
        "wall_s": round(time.perf_counter() - t0, 1),
        "constant_tuned": json.dumps(tuned),
        "constant_grid": json.dumps(grid),
        "constant_search": constant_search if tuned or chosen else "",
        "self_tuned": json.dumps(chosen),
        "self_tuned_grid": json.dumps(grids),
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
