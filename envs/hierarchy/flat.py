"""``HierarchicalFL-Flat-v0``: the hierarchy's env, flat and bounded (:mod:`envs.flat`)."""

from __future__ import annotations

from envs.flat import FlatFLEnv
from envs.hierarchy.scheduling import DEFAULT_HIERARCHICAL_CONFIG

__all__ = ["HierarchicalFLFlatEnv"]


class HierarchicalFLFlatEnv(FlatFLEnv):
    """``HierarchicalFL-Flat-v0``: every edge's scheduling, flat and bounded.

    ## Description
    ``HierarchicalFL-v0`` (:class:`envs.hierarchy.scheduling.HierarchicalSchedulingEnv`:
    one H2FDP global round per step, devices → edges → cloud) with one flat
    observation and one flat action over all I devices (module docstring;
    :class:`envs.rl.EdgeScores`). Default system: 12 digits devices under 3
    edges, K_e = 2 subchannels per edge, 10 rounds
    (``envs.hierarchy.scheduling.DEFAULT_HIERARCHICAL_CONFIG``), surrogate mode.

    ## Action Space
    ``Box(-1, 1, (I,), float32)``: one score per device in edge order (edge c's
    block holds the members of S_c by ascending id). Edge c schedules the K_e
    eligible devices of its block with the highest scores on its subchannels by
    the Hungarian rule — what ``learned`` does on each edge at run time.

    ## Observation Space
    ``Box(-1, 1, (I·12,), float32)``: the star's per-client features computed
    edge by edge (each block from its edge's observation), rows in edge order,
    mapped into [−1, 1] (:func:`envs.wrappers.bounded_features`); row n at
    entries ``12n … 12n + 11``, with K = K_e and N = n_c in the ratios:

    | key | shape | meaning | unit | low | high |
    |-----|-------|---------|------|-----|------|
    | loss_relative | (I,) at 12n | ℓ_n / max of its edge | – | 0 | 1 |
    | loss_z | (I,) at 12n+1 | z-score of ℓ_n within its edge / 5 | – | -1 | 1 |
    | log1p_loss | (I,) at 12n+2 | x/(1+x) of log(1 + ℓ_n) | – | 0 | 1 |
    | staleness_share | (I,) at 12n+3 | staleness_n / (t + 1) | – | 0 | 1 |
    | upload_share | (I,) at 12n+4 | Υ_n / (t + 1) | – | 0 | 1 |
    | upload_z | (I,) at 12n+5 | z-score of Υ_n within its edge / 5 | – | -1 | 1 |
    | data_share | (I,) at 12n+6 | x/(1+x) of n_c·abs(D_n) / Σ_edge abs(D_m) | – | 0 | 1 |
    | best_gain_z | (I,) at 12n+7 | z-score of max_k h_{n,k} [dB] within its edge / 5 | – | -1 | 1 |
    | mean_gain_z | (I,) at 12n+8 | z-score of mean_k h_{n,k} [dB] within its edge / 5 | – | -1 | 1 |
    | eligible | (I,) at 12n+9 | 1 if device n may upload | – | 0 | 1 |
    | log1p_epsilon | (I,) at 12n+10 | x/(1+x) of log(1 + ε_n) | – | 0 | 1 |
    | subchannels_per_client | (I,) at 12n+11 | x/(1+x) of K_e / n_c | – | 0 | 1 |

    ## Rewards
    ``min_max_loss`` by default: −max over devices of the global model's test
    loss on their test splits after the round; any reward of
    :mod:`rayfl.rl.rewards` by ``reward=``, times ``reward_scale``.

    ## Starting State
    As ``HierarchicalFL-v0``: subnets and data from ``config.seed``, ω⁰ and the
    channels from the episode seed.

    ## Episode End
    *Truncation*: after ``config.rounds`` global rounds (10 by default).

    ## Arguments
    | parameter | type | default | description |
    |-----------|------|---------|-------------|
    | config | path, mapping or RunConfig | ``envs.hierarchy.scheduling.DEFAULT_HIERARCHICAL_CONFIG`` | a run config with ``topology.kind: hierarchical`` |
    | mode | str | "surrogate" | "surrogate" (fast, no training) or "emulate" (real rounds on Ray) |
    | reward | str | "min_max_loss" | one of ``rayfl.rl.rewards.REWARDS`` |
    | reward_scale | float | 1.0 | multiplies every reward |
    | overrides | list or mapping | () | config overrides ``key.path=value`` |
    | render_mode | str or None | None | "ansi" or "rgb_array": channel gains and the round's schedule |

    ## Version History
    * v0: initial version.
    """

    topology_kind = "hierarchical"
    default_config = DEFAULT_HIERARCHICAL_CONFIG
