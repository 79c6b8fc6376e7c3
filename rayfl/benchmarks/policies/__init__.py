"""``rayfl bench policies``: every scheduling policy on registered scenarios.

Runs each registered scenario (:mod:`.scenarios`: each topology plug-in's) on fixed held-out
seeds, in surrogate mode, emulate mode or both, under every registered policy
that applies to its topology, plus the baselines a learned policy must be read
beside (DESIGN.md):

| row | what it is |
|-----|------------|
| ``learned`` | the shipped learned policy (or ``--learned PATH``) |
| ``learned_<name>`` | more trained policies side by side: ``--learned learned_a=PATH,learned_b=PATH`` (``learned=PATH`` replaces the shipped one) |
| ``learned_untrained`` | a freshly initialised score network with the learned decoder (``learned`` with ``untrained=True``) |
| ``constant_tuned`` | round robin with its constants tuned, where the topology plug-in has some (:mod:`.tuning`): each held at the grid value with the best mean return on the training seeds (``--train-seeds``, disjoint from the held-out ones); the grid grows past an edge that holds the best value (``--constant-search extend``, the default; ``fixed``: the four grid values only). Star: the algorithm's per-client controls (FedAvg: ``lr``). Hierarchy (its env schedules subchannels only, no per-device controls): the configured step size as a config value, ``topology.lr.gamma`` (``lr.mode: manual``, η_k = γ/√(k+1)) or ``algorithm.lr`` (``lr.mode: constant``); every other policy runs at the configured value. Not on D2D |
| ``<policy>_tuned`` | with ``--self-tune`` (``all`` or named heuristics): that heuristic tuned for itself on the training seeds, by the same search as ``constant_tuned``: the topology's constants (unless it sets them itself: ``minmax``), then its own ``tunable`` parameters (``data_weighted``'s ``power``, ``lyapunov``'s ``V``, ``minmax``'s ``mu``, ``proportional_fair``'s ``window``; D2D: ``channel_threshold``'s ``epsilon``, ``random_neighbors``' ``probability``); table in :mod:`.tuning`. Round robin's is ``constant_tuned`` |
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
| ``summary.csv`` / ``summary.md`` | per (scenario, mode, policy): mean and 95% t-CI of each KPI; paired difference to the best heuristic (the tuned rows included) with its CI, p-value, wins/losses/ties, and for the trained policies the p-value × their number (``p_vs_best_bonferroni``) (:mod:`.stats`) |
| ``surrogate_check.csv`` / ``.md`` | with ``--mode both``: per scenario and policy, both modes' returns, the error, the paired differences to the emulation's best heuristic in both modes, ``spearman`` and the ``fit_for_training`` verdict |
| ``runs.csv`` | wall time of each (scenario, mode), the tuned constants (``constant_tuned``), the mean return of every value tried on the training seeds (``constant_grid``) and the search (``constant_search``); the same of each ``<policy>_tuned`` row as JSON by label (``self_tuned``: {label: {knob: value}}, ``self_tuned_grid``: {label: {knob: {value: mean return}}}) |
| ``merged_from.txt`` | with ``--merge DIRS``: the runs whose episodes were merged |
| ``surrogate_used.yaml`` | with ``--surrogate PATH``: a copy of the fitted surrogate the star's surrogate mode used (``rayfl bench fit-surrogate``, :mod:`rayfl.benchmarks.surrogate_fit`) |
| ``<scenario>.png`` | mean return ± 95% CI per policy, one panel per mode |

Example:
    rayfl bench policies --topology star --size small --mode both --seeds 1000:1010
    rayfl bench policies --scenario star-small --self-tune data_weighted,lyapunov
"""

from __future__ import annotations

from rayfl.benchmarks import BenchError
from rayfl.benchmarks.policies.benchmark import (
    bench_policies,
    build_policy,
    episode_kpis,
    learned_checkpoints,
    make_env,
    play,
    policy_specs,
)
from rayfl.benchmarks.policies.cli import main, parser

__all__ = [
    "BenchError",
    "bench_policies",
    "build_policy",
    "episode_kpis",
    "learned_checkpoints",
    "main",
    "make_env",
    "parser",
    "play",
    "policy_specs",
]
