"""Reproduce H2FDP's trends on real Fashion-MNIST (spec seed_004 §7, Figs. 4–6).

For each seed, one set of actors (50 devices, 10 edge actors, 1 cloud actor)
runs every variant in turn (``HierarchicalRound.reset``): accuracy vs global
round for trusted fraction p_c ∈ {0, 0.5, 1} and each ε; HFL without DP; and
energy / delay with and without adaptive control (Algorithm 1 vs 2) next to
HFL-DP and PEDPFL (its own one-aggregator system).

Outputs (in ``--out``):

- ``results.csv``: one row per (variant, seed): final accuracy, total energy
  and delay, energy / delay / round to ``--target-acc`` (75 %, the paper's)
  and to ``--low-target-acc`` (70 %), mean τ_k and s_c^k,
  the noise std per coordinate of the first round, the ledger's worst-observer
  ε, rounds, the run's wall time ``wall_s`` and, for H2FDP rows,
  ``acc_gain_vs_p0`` (final accuracy minus that of p_c = 0 at the same ε and
  seed).
- ``reductions.csv``: energy / delay saved by adaptive control against each
  baseline, per seed (whole run and until each target accuracy).
- ``curves.csv``: one row per (variant, seed, global round): cumulative
  energy / delay, τ_k, s_c^k, η_k, noise stds, accuracy at evaluated rounds.
- ``table.md`` (mean ± std over seeds), ``accuracy_vs_rounds.png`` and
  ``energy_delay.png``.
- with ``--equal-privacy`` (after the sweep, same ``--out``) only
  ``equal_privacy.csv``: PEDPFL and HFL-DP with their noise set for the ledger
  ε of the same seed's H2FDP with control, next to that run and to HFL-DP and
  PEDPFL at nominal ε (see ``equal_privacy``).

Re-running with the same ``--out`` skips every (seed, variant) already in
``curves.csv`` at the same ``--rounds``, so a sweep can be extended by seeds or
ε values; use a fresh ``--out`` after changing the config or ``--override``.
``h2fdp_noctrl`` (Algorithm 2) and ``hfl_dp`` are the sweep's runs at
(``--control-fraction``, ``--control-eps``) and (p_c = 0, ``--control-eps``)
when the sweep has them (same seed ⇒ the same run), so they are not run twice.

Run (as in docs/reproductions/h2fdp.md):
    python examples/reproduce_h2fdp.py --rounds 50 --seeds 0 1 2 \
        --eps 0.5 1 2 8 32 128 --control-eps 32 --out docs/h2fdp
PEDPFL and HFL-DP at equal ledger ε (writes equal_privacy.csv):
    python examples/reproduce_h2fdp.py --rounds 50 --seeds 0 1 2 \
        --equal-privacy --out docs/h2fdp --override ray.num_cpus=1
Smaller:
    python examples/reproduce_h2fdp.py --rounds 30 --eps 1 --fractions 0 1
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rayfl.cluster.session import RaySession
from rayfl.compare.progress import progress_bar, script_main
from rayfl.config import load_config
from rayfl.engine import Engine, build_system
from rayfl.hierarchy.topology import build_topology
from rayfl.metrics import round_summary
from rayfl.privacy.gaussian import accountant_noise_multiplier

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # loaded by path (the tests), not run as a script
    sys.path.insert(0, str(HERE))

# The summaries and the report; the public names are re-exported here.
from _support.h2fdp_report import (  # noqa: E402, F401
    CONTROL_METHODS,
    PAPER_FIG5,
    reductions,
    summarise,
    write_report,
)

EQUAL_BASELINES = ("h2fdp_ctrl", "hfl_dp", "pedpfl")  # rows of equal_privacy.csv
PEDPFL_EQUAL = "pedpfl (equal ledger ε)"
HFL_DP_EQUAL = "hfl_dp (equal ledger ε)"


@dataclass(frozen=True)
class Variant:
    """One run of the plan.

    Attributes:
        label: Row name in the CSVs (``variant`` column).
        method: ``h2fdp``, ``hfl``, ``h2fdp_ctrl``, ``h2fdp_noctrl``,
            ``hfl_dp`` or ``pedpfl``.
        eps: Nominal ε per stream (inf without DP).
        fraction: Trusted fraction p_c (NaN for HFL without DP).
        same_as: Label of an earlier variant that is the identical run
            (its rows are copied), or None.
    """

    label: str
    method: str
    eps: float
    fraction: float
    same_as: str | None = None


def _args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="examples/h2fdp_fmnist.yaml")
    p.add_argument("--rounds", type=int, default=100, help="global rounds K_g")
    p.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=None,
        help="run seeds (default: the config's seed); finished runs are skipped",
    )
    p.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    p.add_argument("--fractions", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--target-acc", type=float, default=0.75, help="Fig. 5 target")
    p.add_argument(
        "--low-target-acc",
        type=float,
        default=0.70,
        help="a second, lower target (``*_to_low_target`` columns)",
    )
    p.add_argument("--control-eps", type=float, default=1.0)
    p.add_argument("--control-fraction", type=float, default=0.5)
    p.add_argument("--no-control", action="store_true", help="skip Fig. 5 runs")
    p.add_argument("--no-pedpfl", action="store_true")
    p.add_argument("--skip-sweep", action="store_true", help="only the Fig. 5 runs")
    p.add_argument(
        "--equal-privacy",
        action="store_true",
        help="only run PEDPFL and HFL-DP with their noise set for the ledger ε of "
        "the same seed's H2FDP with control (read from the curves.csv in --out); "
        "writes equal_privacy.csv there",
    )
    p.add_argument("--out", default="runs/reproduce_h2fdp")
    p.add_argument("--override", nargs="*", default=[], help="key=value overrides")
    return p.parse_args(argv)


def plan(args: argparse.Namespace) -> list[Variant]:
    """The variants of one seed, in run order (PEDPFL last: its own system)."""
    out: list[Variant] = []
    if not args.skip_sweep:
        for eps in args.eps:
            for frac in args.fractions:
                out.append(Variant(f"h2fdp p={frac:g} eps={eps:g}", "h2fdp", eps, frac))
        out.append(Variant("hfl (no DP)", "hfl", np.inf, np.nan))
    if not args.no_control:
        labels = {v.label for v in out}
        eps, frac = args.control_eps, args.control_fraction
        same = f"h2fdp p={frac:g} eps={eps:g}"
        out.append(
            Variant("h2fdp_noctrl", "h2fdp_noctrl", eps, frac, _if(same, labels))
        )
        out.append(Variant("h2fdp_ctrl", "h2fdp_ctrl", eps, frac))
        same = f"h2fdp p=0 eps={eps:g}"
        out.append(Variant("hfl_dp", "hfl_dp", eps, 0.0, _if(same, labels)))
        if not args.no_pedpfl:
            out.append(Variant("pedpfl", "pedpfl", eps, 0.0))
    return out


def _if(label: str, labels: set[str]) -> str | None:
    return label if label in labels else None


def done_labels(curves: pd.DataFrame, seed: int, rounds: int) -> set[str]:
    """Variants of ``seed`` already complete at ``rounds`` global rounds."""
    if curves.empty:
        return set()
    d = curves[(curves["seed"] == seed) & (curves["rounds"] == rounds)]
    counts = d.groupby("variant")["round"].nunique()
    return set(counts[counts == rounds].index)


def _run(system: Engine, v: Variant, seed: int, rounds: int, every: int) -> list[dict]:
    rows = []
    energy = delay = 0.0
    started = time.perf_counter()
    for k in range(rounds):
        _, extras = system.run_global_round(k)
        energy += extras["energy_j"]
        delay += extras["latency_s"]
        row = {
            "seed": seed,
            "variant": v.label,
            "method": v.method,
            "eps": v.eps,
            "fraction": v.fraction,
            "rounds": rounds,
            "round": k,
            "energy_j_cum": energy,
            "delay_s_cum": delay,
            "tau": extras["tau"],
            "s_trusted": extras["s_trusted_mean"],
            "s_untrusted": extras["s_untrusted_mean"],
            "eta": extras["eta"],
            "sigma_device_local": extras["sigma_device_local"],
            "sigma_device_global": extras["sigma_device_global"],
            "sigma_edge_local": extras["sigma_edge_local"],
            "sigma_edge_global": extras["sigma_edge_global"],
            "global_acc": np.nan,
        }
        if (k + 1) % every == 0 or k == rounds - 1:
            row["global_acc"] = round_summary(system.evaluate(), system.num_test)[
                "global_acc"
            ]
        rows.append(row)
    eps = system.uplink.epsilons()[0]
    wall = time.perf_counter() - started
    print(
        f"seed {seed} {v.label:26s} acc {rows[-1]['global_acc']:.4f}  "
        f"E {energy:8.2f} J  D {delay:8.2f} s  eps_max {np.max(eps):.3g}  "
        f"{wall:.0f} s",
        flush=True,
    )
    for r in rows:
        r["wall_s"] = wall
        r["epsilon_max"] = float(np.max(eps))
    return rows


def _reset(system: Engine, cfg, v: Variant) -> None:
    """Put ``system`` in the state of variant ``v`` (not PEDPFL)."""
    n_edges = len(system.edges)
    if v.method == "hfl":
        system.reset(trusted=np.zeros(n_edges, bool), dp_enabled=False, control=False)
        return
    topo = cfg.topology.model_copy(update={"trusted_fraction": v.fraction})
    trusted = build_topology(topo, system.num_clients, cfg.seed).trusted
    system.reset(
        trusted=trusted,
        dp_enabled=True,
        epsilon=v.eps,
        control=v.method == "h2fdp_ctrl",
    )


def main(argv: list[str] | None = None) -> None:
    """Run the missing (seed, variant) pairs and write the CSVs, table and plots."""
    args = _args(argv)
    logging.getLogger("absl").setLevel(logging.ERROR)  # dp-accounting's RDP chatter
    if args.equal_privacy:
        equal_privacy(args)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    overrides = [f"rounds={args.rounds}", "topology.edge_eval=false", *args.override]
    cfg = load_config(args.config, overrides)  # validate before Ray starts
    seeds = args.seeds if args.seeds is not None else [cfg.seed]
    path = out / "curves.csv"
    curves = pd.read_csv(path) if path.exists() else pd.DataFrame()
    variants = plan(args)
    todo = {
        s: [v for v in variants if v.label not in done_labels(curves, s, args.rounds)]
        for s in seeds
    }
    if any(todo.values()):
        session = _session(cfg)
        bar = progress_bar(total=sum(map(len, todo.values())), desc="reproduce_h2fdp")
        try:
            for seed in seeds:
                if todo[seed]:
                    curves = _seed(args, overrides, seed, todo[seed], curves, out)
                    bar.update(len(todo[seed]))
        finally:
            bar.close()
            session.close()
    else:
        print("every run is already in", path, flush=True)
    keep = curves[
        curves["seed"].isin(seeds)
        & (curves["rounds"] == args.rounds)
        & curves["variant"].isin([v.label for v in variants])
    ]
    results = summarise(keep, args.target_acc, args.low_target_acc)
    results.to_csv(out / "results.csv", index=False, na_rep="nan")
    red = reductions(results)
    if not red.empty:
        red.to_csv(out / "reductions.csv", index=False, na_rep="nan")
    write_report(keep, results, args, out)


def _session(cfg) -> RaySession:
    """One Ray session for every run (RaySession retries a start-up timeout)."""
    return RaySession(cfg.ray)


def _save(curves: pd.DataFrame, rows: list[dict], out: Path) -> pd.DataFrame:
    curves = pd.concat([curves, pd.DataFrame(rows)], ignore_index=True)
    curves.to_csv(out / "curves.csv", index=False)
    return curves


def _seed(
    args: argparse.Namespace,
    overrides: list[str],
    seed: int,
    todo: list[Variant],
    curves: pd.DataFrame,
    out: Path,
) -> pd.DataFrame:
    """Run ``todo`` for one seed, saving ``curves.csv`` after every run."""
    cfg = load_config(args.config, [*overrides, f"seed={seed}"])
    hier = [v for v in todo if v.method != "pedpfl"]
    if hier:
        t0 = time.perf_counter()
        system = build_system(cfg)
        print(
            f"seed {seed}: setup {time.perf_counter() - t0:.0f} s; "
            f"model dim {system.dim}",
            flush=True,
        )
        try:
            for v in hier:
                if v.same_as is not None:
                    done = done_labels(curves, seed, args.rounds)
                    if v.same_as in done:
                        src = curves[
                            (curves["seed"] == seed)
                            & (curves["rounds"] == args.rounds)
                            & (curves["variant"] == v.same_as)
                        ]
                        rows = src.assign(variant=v.label, method=v.method)
                        curves = _save(curves, rows.to_dict("records"), out)
                        continue
                _reset(system, cfg, v)
                rows = _run(system, v, seed, args.rounds, args.eval_every)
                curves = _save(curves, rows, out)
        finally:
            system.close()
    if any(v.method == "pedpfl" for v in todo):
        v = next(v for v in todo if v.method == "pedpfl")
        curves = _save(curves, _pedpfl(args, overrides, seed, v), out)
    return curves


def _pedpfl(
    args: argparse.Namespace,
    overrides: list[str],
    seed: int,
    v: Variant,
    extra: tuple[str, ...] = (),
) -> list[dict]:
    """Run PEDPFL (its own one-aggregator system) at ε = ``v.eps``."""
    cfg = load_config(
        args.config,
        [
            *overrides,
            f"seed={seed}",
            "topology.baseline=pedpfl",
            f"topology.dp.epsilon={v.eps!r}",
            *extra,
        ],
    )
    system = build_system(cfg)
    try:
        return _run(system, v, seed, args.rounds, args.eval_every)
    finally:
        system.close()


def equal_privacy(args: argparse.Namespace) -> pd.DataFrame:
    """Run PEDPFL and HFL-DP at the ledger ε of H2FDP with control, per seed.

    The target is the worst-observer ledger ε of the seed's ``h2fdp_ctrl`` run
    in ``--out``/curves.csv. PEDPFL: ``dp.calibration: accountant`` sets its
    noise so that its ledger reaches the target over its ``--rounds``
    releases. HFL-DP keeps eq. 15 at a scaled nominal ε (``_scaled_epsilon``).
    Writes ``equal_privacy.csv``: the new runs next to the ``h2fdp_ctrl``,
    ``hfl_dp`` and ``pedpfl`` rows of the same seed (re-summarised from
    curves.csv, with ``sigma_device_global_r0``), ``target_epsilon`` (the
    seed's H2FDP(ctrl) ledger ε) and ``calibration``. Runs already in the file
    are skipped.

    Returns:
        The ``equal_privacy.csv`` table.
    """
    out = Path(args.out)
    overrides = [f"rounds={args.rounds}", "topology.edge_eval=false", *args.override]
    cfg = load_config(args.config, overrides)
    seeds = args.seeds if args.seeds is not None else [cfg.seed]
    curves = pd.read_csv(out / "curves.csv")
    curves = curves[
        (curves["rounds"] == args.rounds) & curves["variant"].isin(EQUAL_BASELINES)
    ]
    path = out / "equal_privacy.csv"
    table = pd.read_csv(path) if path.exists() else pd.DataFrame()
    session = None
    try:
        for seed in progress_bar(seeds, desc="h2fdp equal privacy"):
            have = (
                set()
                if table.empty
                else set(table.loc[table["seed"] == seed, "variant"])
            )
            if {PEDPFL_EQUAL, HFL_DP_EQUAL} <= have:
                continue
            base = curves[curves["seed"] == seed]
            known = summarise(base, args.target_acc).set_index("variant")
            target = float(known.loc["h2fdp_ctrl", "epsilon_max"])
            session = session or _session(cfg)
            runs = [] if have else [base]
            if PEDPFL_EQUAL not in have:
                v = Variant(PEDPFL_EQUAL, "pedpfl", target, 0.0)
                extra = ("topology.dp.calibration=accountant",)
                runs.append(pd.DataFrame(_pedpfl(args, overrides, seed, v, extra)))
            if HFL_DP_EQUAL not in have:
                eps = _scaled_epsilon(
                    known.loc["hfl_dp"], target, cfg.topology.dp.delta
                )
                v = Variant(HFL_DP_EQUAL, "hfl_dp", eps, 0.0)
                runs.append(pd.DataFrame(_hierarchical(args, overrides, seed, v)))
            both = pd.concat(runs, ignore_index=True)
            rows = summarise(both, args.target_acc, args.low_target_acc)
            first = both.groupby("variant", sort=False)["sigma_device_global"].first()
            rows["sigma_device_global_r0"] = rows["variant"].map(first)
            rows["target_epsilon"] = target
            rows["calibration"] = np.where(
                rows["variant"] == PEDPFL_EQUAL, "accountant", "closed_form"
            )
            table = pd.concat([table, rows], ignore_index=True)
            table.sort_values("seed", kind="stable").to_csv(
                path, index=False, na_rep="nan"
            )
    finally:
        if session is not None:
            session.close()
    return table


def _scaled_epsilon(run: pd.Series, target: float, delta: float) -> float:
    """Nominal ε at which eq. 15 gives ``run``'s variant the ledger ε ``target``.

    Every release is recorded at q = 1, so a client's composed releases are one
    Gaussian mechanism whose z satisfies 1/z² = Σ 1/z_i² (their RDP curves add),
    and its ledger ε depends on that z alone. eq. 15 makes every z_i ∝ 1/ε, so
    the nominal ε scales by z(ledger ε of ``run``) / z(``target``).

    Args:
        run: A ``results.csv`` row of a run without control (``eps``,
            ``epsilon_max``).
        target: Ledger ε wanted.
        delta: δ of the ledger.
    """

    def z(epsilon: float) -> float:
        return accountant_noise_multiplier(
            epsilon=epsilon, delta=delta, sample_rate=1.0, steps=1
        )

    return float(run["eps"]) * z(float(run["epsilon_max"])) / z(target)


def _hierarchical(
    args: argparse.Namespace, overrides: list[str], seed: int, v: Variant
) -> list[dict]:
    """Run one hierarchical variant on a fresh system."""
    cfg = load_config(args.config, [*overrides, f"seed={seed}"])
    system = build_system(cfg)
    try:
        _reset(system, cfg, v)
        return _run(system, v, seed, args.rounds, args.eval_every)
    finally:
        system.close()


if __name__ == "__main__":
    sys.exit(script_main(main))
