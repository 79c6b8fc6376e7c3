"""``WirelessFL-Flat-v0``: the star's env, flat and bounded (:mod:`envs.flat`)."""

from __future__ import annotations

from envs.flat import FlatFLEnv
from envs.star.scheduling import DEFAULT_CONFIG

__all__ = ["WirelessFLFlatEnv"]


class WirelessFLFlatEnv(FlatFLEnv):
    """``WirelessFL-Flat-v0``: the star's OFDMA scheduling, flat and bounded.

    ## Description
    ``WirelessFL-v0`` (:class:`envs.star.scheduling.WirelessFLEnv`: one FL round
    per step, N clients, K orthogonal subchannels, seed_000 §2.5 constraints
    C2–C3) with the observation and action RL libraries take as is (module
    docstring). Default system: 10 clients on the shipped digits data, K = 4,
    20 rounds (``envs.star.scheduling.DEFAULT_CONFIG``), surrogate mode.

    ## Action Space
    ``Box(-1, 1, (N,), float32)``: one score per client. The K eligible
    clients with the highest scores upload, each on the subchannel the
    Hungarian rule gives it (max Σ gain in dB), at maximum power
    (:class:`envs.rl.HungarianTopK`); only the ranking matters. Every action
    is a valid schedule, so nothing is ignored for being repeated.

    ## Observation Space
    ``Box(-1, 1, (N·12,), float32)``: row n of the per-client features
    (``policies.features``) at entries ``12n … 12n + 11``, each mapped into
    [−1, 1] by :func:`envs.wrappers.bounded_features`:

    | key | shape | meaning | unit | low | high |
    |-----|-------|---------|------|-----|------|
    | loss_relative | (N,) at 12n | ℓ_n / max_m ℓ_m | – | 0 | 1 |
    | loss_z | (N,) at 12n+1 | z-score of ℓ_n across clients / 5 | – | -1 | 1 |
    | log1p_loss | (N,) at 12n+2 | x/(1+x) of log(1 + ℓ_n) | – | 0 | 1 |
    | staleness_share | (N,) at 12n+3 | staleness_n / (t + 1) | – | 0 | 1 |
    | upload_share | (N,) at 12n+4 | Υ_n / (t + 1) | – | 0 | 1 |
    | upload_z | (N,) at 12n+5 | z-score of Υ_n / 5 | – | -1 | 1 |
    | data_share | (N,) at 12n+6 | x/(1+x) of N·abs(D_n) / Σ_m abs(D_m) (0.5 = average) | – | 0 | 1 |
    | best_gain_z | (N,) at 12n+7 | z-score of max_k h_{n,k} [dB] / 5 | – | -1 | 1 |
    | mean_gain_z | (N,) at 12n+8 | z-score of mean_k h_{n,k} [dB] / 5 | – | -1 | 1 |
    | eligible | (N,) at 12n+9 | 1 if client n may upload | – | 0 | 1 |
    | log1p_epsilon | (N,) at 12n+10 | x/(1+x) of log(1 + ε_n) | – | 0 | 1 |
    | subchannels_per_client | (N,) at 12n+11 | x/(1+x) of K / N | – | 0 | 1 |

    ## Rewards
    ``min_max_loss`` by default: −max_n test loss of the clients' models after
    the round (the min-max fairness objective, seed_000 §3.3); any reward of
    :mod:`rayfl.rl.rewards` by ``reward=``, times ``reward_scale``.

    ## Starting State
    As ``WirelessFL-v0``: ω⁰ and the channel from the episode seed, counters
    zero, the data partition from ``config.seed``.

    ## Episode End
    *Termination*: no client is eligible any more. *Truncation*: after
    ``config.rounds`` steps (20 by default).

    ## Arguments
    | parameter | type | default | description |
    |-----------|------|---------|-------------|
    | config | path, mapping or RunConfig | ``envs.star.scheduling.DEFAULT_CONFIG`` | a run config with ``topology.kind: star`` |
    | mode | str | "surrogate" | "surrogate" (fast, no training) or "emulate" (real rounds on Ray) |
    | reward | str | "min_max_loss" | one of ``rayfl.rl.rewards.REWARDS`` |
    | reward_scale | float | 1.0 | multiplies every reward |
    | overrides | list or mapping | () | config overrides ``key.path=value`` |
    | render_mode | str or None | None | "ansi" or "rgb_array": channel gains and the round's schedule |
    | controls | bool | False | the action also sets the algorithm's per-client controls (``Box(N·(1 + C))``, :class:`envs.rl.HungarianTopK`) |

    ## Version History
    * v0: initial version.
    """

    topology_kind = "star"
    default_config = DEFAULT_CONFIG
