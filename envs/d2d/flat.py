"""``D2DNeighbor-Flat-v0``: one D2D target's env, flat and bounded (:mod:`envs.flat`)."""

from __future__ import annotations

from envs.d2d.neighbor import DEFAULT_D2D_CONFIG
from envs.flat import FlatFLEnv

__all__ = ["D2DNeighborFlatEnv"]


class D2DNeighborFlatEnv(FlatFLEnv):
    """``D2DNeighbor-Flat-v0``: one D2D target's neighbor choice, flat and bounded.

    ## Description
    ``D2DNeighbor-v0`` (:class:`envs.d2d.neighbor.D2DNeighborEnv`: one pFedWN round per
    step, spec seed_003 §2.4) for one target, with one flat observation and one
    flat action over the N nodes (module docstring). Default system: 11 digits
    nodes, a random target per episode, F sub-channels of the default D2D
    topology, 10 rounds (``envs.d2d.neighbor.DEFAULT_D2D_CONFIG``), surrogate mode. For
    every node a target at once, see :class:`envs.d2d.multiagent.D2DTargetsParallelEnv`.

    ## Action Space
    ``Box(-1, 1, (N,), float32)``: one score per node. The eligible candidates
    with a positive score, at most F of the highest, become the neighbors M_n,
    each on the sub-channel the Hungarian rule gives it; so the policy also
    picks how many neighbors (``learned``'s ``selection: positive``).

    ## Observation Space
    ``Box(-1, 1, (N·12,), float32)``: row n (a candidate neighbor; the
    target's own row is ineligible) at entries ``12n … 12n + 11``, the
    per-client features of the target's observation mapped into [−1, 1]
    (:func:`envs.wrappers.bounded_features`), with K = F. With the moving
    devices (:mod:`rayfl.d2d.devices`) each row grows past column 11:
    ``available`` (in [0, 1]) with ``topology.availability``, then
    ``compute_z`` (in [−1, 1]) with a CPU-speed law or a round deadline, so
    ``d2d-small-mobile`` has 14 per node (the inner env's ``feature_names``
    lists them):

    | key | shape | meaning | unit | low | high |
    |-----|-------|---------|------|-----|------|
    | loss_relative | (N,) at 12n | ℓ_n / max_m ℓ_m | – | 0 | 1 |
    | loss_z | (N,) at 12n+1 | z-score of ℓ_n / 5 | – | -1 | 1 |
    | log1p_loss | (N,) at 12n+2 | x/(1+x) of log(1 + ℓ_n) | – | 0 | 1 |
    | staleness_share | (N,) at 12n+3 | rounds since node n's model last arrived / (t + 1) | – | 0 | 1 |
    | upload_share | (N,) at 12n+4 | rounds node n's model reached the target / (t + 1) | – | 0 | 1 |
    | upload_z | (N,) at 12n+5 | z-score of those arrivals / 5 | – | -1 | 1 |
    | data_share | (N,) at 12n+6 | x/(1+x) of N·abs(D_n) / Σ_m abs(D_m) | – | 0 | 1 |
    | best_gain_z | (N,) at 12n+7 | z-score of max_f link gain [dB] / 5 | – | -1 | 1 |
    | mean_gain_z | (N,) at 12n+8 | z-score of mean_f link gain [dB] / 5 | – | -1 | 1 |
    | eligible | (N,) at 12n+9 | 1 if node n may be a neighbor | – | 0 | 1 |
    | log1p_epsilon | (N,) at 12n+10 | 0 (no DP in D2D runs) | – | 0 | 1 |
    | subchannels_per_client | (N,) at 12n+11 | x/(1+x) of F / N | – | 0 | 1 |

    ## Rewards
    ``min_max_loss`` by default: −the target's test loss after the round (one
    target: the max is its own), minus ``neighbor_cost`` × abs(M_n); any reward
    of ``envs.d2d.neighbor.D2D_REWARDS`` by ``reward=``, times ``reward_scale``.

    ## Starting State
    As ``D2DNeighbor-v0``: layout and target from the episode seed, ω⁰ from the
    seed, the data partition from ``config.seed``.

    ## Episode End
    *Truncation*: after ``config.rounds`` steps (10 by default).

    ## Arguments
    | parameter | type | default | description |
    |-----------|------|---------|-------------|
    | config | path, mapping or RunConfig | ``envs.d2d.neighbor.DEFAULT_D2D_CONFIG`` | a run config with ``topology.kind: d2d`` and one target (an id or random) |
    | mode | str | "surrogate" | "surrogate" (fast, no training) or "emulate" (real rounds on Ray) |
    | reward | str | "min_max_loss" | one of ``envs.d2d.neighbor.D2D_REWARDS`` |
    | reward_scale | float | 1.0 | multiplies every reward |
    | overrides | list or mapping | () | config overrides ``key.path=value`` |
    | render_mode | str or None | None | "ansi" or "rgb_array": channel gains and the round's neighbors |
    | neighbor_cost | float | 0.0 | reward cost per selected neighbor |

    ## Version History
    * v0: initial version.
    """

    topology_kind = "d2d"
    default_config = DEFAULT_D2D_CONFIG
