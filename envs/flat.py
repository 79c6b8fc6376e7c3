"""RL-ready ids: one flat, bounded observation vector and one flat action per topology.

``WirelessFL-Flat-v0``, ``HierarchicalFL-Flat-v0`` and ``D2DNeighbor-Flat-v0``
are what a third-party RL library (Stable-Baselines3, CleanRL, RLlib) takes
as is: ``gym.make(id)`` needs no argument, the observation is a ``Box`` in
[−1, 1] (no ``VecNormalize``), the action a ``Box`` in [−1, 1], and every id
has the same defaults (surrogate mode, reward ``min_max_loss``). Each is the
stack of :func:`envs.rl.make_rl_env` (per-client features, scores decoded to
the ``learned`` policy's schedule: top K eligible, subchannels by the
Hungarian rule) under :class:`envs.wrappers.BoundedFeatures`.

Why surrogate by default: an RL library needs many thousand steps, and the
surrogate steps in milliseconds where the emulation (real training on Ray)
takes 0.04–1 s a step and a minute or more to start (issue 34); pass
``mode="emulate"`` to score or fine-tune on the real rounds (a vectorised
emulate env may make that the better default later). Why ``min_max_loss``: it is the fairness objective
of the papers' scheduling (seed_000 §3.3) and the one reward every topology
has in both modes.

Implementation details:
    1. The env owns the wrapper stack (composition, not a wrapper): its
       ``unwrapped`` is itself, so ``check_env(env.unwrapped)`` checks the
       flat spaces RL libraries see; the base env is :attr:`FlatFLEnv.base`.
    2. Seeds go to the base env (``reset(seed=s)`` replays the same episode);
       without one the base env's rule applies (``envs.base``).
    3. ``render`` shows the base env's frame (:mod:`envs.render`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from envs.base import FLEnv
from envs.d2d import DEFAULT_D2D_CONFIG
from envs.hierarchical import DEFAULT_HIERARCHICAL_CONFIG
from envs.render import RENDER_MODES
from envs.rl import make_rl_env
from envs.scheduling import DEFAULT_CONFIG
from envs.wrappers import BoundedFeatures
from rayfl.config import RunConfig, load_config

__all__ = [
    "D2DNeighborFlatEnv",
    "DEFAULT_MODE",
    "DEFAULT_REWARD",
    "FlatFLEnv",
    "HierarchicalFLFlatEnv",
    "WirelessFLFlatEnv",
]

#: The mode of every ``*-Flat-v0`` id (module docstring).
DEFAULT_MODE = "surrogate"
#: The reward of every ``*-Flat-v0`` id (module docstring).
DEFAULT_REWARD = "min_max_loss"

ConfigLike = str | Path | Mapping[str, Any] | RunConfig


class FlatFLEnv(gym.Env):
    """The RL-ready env of one topology (module docstring); subclasses name it."""

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 1}
    #: ``topology.kind`` of the configs this env takes.
    topology_kind: ClassVar[str]
    #: The config of ``gym.make(id)`` without one.
    default_config: ClassVar[Mapping[str, Any]]

    def __init__(
        self,
        config: ConfigLike | None = None,
        mode: str = DEFAULT_MODE,
        reward: str = DEFAULT_REWARD,
        reward_scale: float = 1.0,
        overrides: Sequence[str] | Mapping[str, Any] = (),
        render_mode: str | None = None,
        **options: Any,
    ) -> None:
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(
                f"render_mode must be one of {', '.join(RENDER_MODES)} or None, "
                f"got {render_mode!r}"
            )
        cfg = load_config(self.default_config if config is None else config, overrides)
        if cfg.topology.kind != self.topology_kind:
            raise ValueError(
                f"{type(self).__name__} needs topology.kind={self.topology_kind}, "
                f"got topology.kind={cfg.topology.kind}"
            )
        self.render_mode = render_mode
        self.inner = BoundedFeatures(
            make_rl_env(
                cfg, mode=mode, reward=reward, reward_scale=reward_scale, **options
            )
        )
        self.observation_space = self.inner.observation_space
        self.action_space = self.inner.action_space

    @property
    def base(self) -> FLEnv:
        """The topology's base env under the wrappers (``WirelessFL-v0`` & co.)."""
        return self.inner.unwrapped  # type: ignore[return-value]  # make_rl_env builds an FLEnv

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        """Start an episode; ``seed`` goes to the base env (detail 2)."""
        super().reset(seed=seed)
        return self.inner.reset(seed=seed, options=options)

    def step(
        self, action: Any
    ) -> tuple[npt.NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        """Run one round scheduled by the scores ``action``."""
        obs, reward, terminated, truncated, info = self.inner.step(action)
        return obs, float(reward), bool(terminated), bool(truncated), info

    def render(self) -> str | npt.NDArray[np.uint8] | None:  # type: ignore[override]  # gymnasium: RenderFrame
        """The base env's frame in ``render_mode`` (None without one)."""
        if self.render_mode is None:
            return None
        return self.base.render_frame(self.render_mode)

    def close(self) -> None:
        """Close the base env (its actors in emulate mode)."""
        self.inner.close()


class WirelessFLFlatEnv(FlatFLEnv):
    """``WirelessFL-Flat-v0``: the star's OFDMA scheduling, flat and bounded.

    ## Description
    ``WirelessFL-v0`` (:class:`envs.scheduling.WirelessFLEnv`: one FL round
    per step, N clients, K orthogonal subchannels, seed_000 §2.5 constraints
    C2–C3) with the observation and action RL libraries take as is (module
    docstring). Default system: 10 clients on the shipped digits data, K = 4,
    20 rounds (``envs.scheduling.DEFAULT_CONFIG``), surrogate mode.

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
    :mod:`rayfl.rewards` by ``reward=``, times ``reward_scale``.

    ## Starting State
    As ``WirelessFL-v0``: ω⁰ and the channel from the episode seed, counters
    zero, the data partition from ``config.seed``.

    ## Episode End
    *Termination*: no client is eligible any more. *Truncation*: after
    ``config.rounds`` steps (20 by default).

    ## Arguments
    | parameter | type | default | description |
    |-----------|------|---------|-------------|
    | config | path, mapping or RunConfig | ``envs.scheduling.DEFAULT_CONFIG`` | a run config with ``topology.kind: flat`` |
    | mode | str | "surrogate" | "surrogate" (fast, no training) or "emulate" (real rounds on Ray) |
    | reward | str | "min_max_loss" | one of ``rayfl.rewards.REWARDS`` |
    | reward_scale | float | 1.0 | multiplies every reward |
    | overrides | list or mapping | () | config overrides ``key.path=value`` |
    | render_mode | str or None | None | "ansi" or "rgb_array": channel gains and the round's schedule |
    | controls | bool | False | the action also sets the algorithm's per-client controls (``Box(N·(1 + C))``, :class:`envs.rl.HungarianTopK`) |

    ## Version History
    * v0: initial version.
    """

    topology_kind = "flat"
    default_config = DEFAULT_CONFIG


class HierarchicalFLFlatEnv(FlatFLEnv):
    """``HierarchicalFL-Flat-v0``: every edge's scheduling, flat and bounded.

    ## Description
    ``HierarchicalFL-v0`` (:class:`envs.hierarchical.HierarchicalSchedulingEnv`:
    one H2FDP global round per step, devices → edges → cloud) with one flat
    observation and one flat action over all I devices (module docstring;
    :class:`envs.rl.EdgeScores`). Default system: 12 digits devices under 3
    edges, K_e = 2 subchannels per edge, 10 rounds
    (``envs.hierarchical.DEFAULT_HIERARCHICAL_CONFIG``), surrogate mode.

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
    :mod:`rayfl.rewards` by ``reward=``, times ``reward_scale``.

    ## Starting State
    As ``HierarchicalFL-v0``: subnets and data from ``config.seed``, ω⁰ and the
    channels from the episode seed.

    ## Episode End
    *Truncation*: after ``config.rounds`` global rounds (10 by default).

    ## Arguments
    | parameter | type | default | description |
    |-----------|------|---------|-------------|
    | config | path, mapping or RunConfig | ``envs.hierarchical.DEFAULT_HIERARCHICAL_CONFIG`` | a run config with ``topology.kind: hierarchical`` |
    | mode | str | "surrogate" | "surrogate" (fast, no training) or "emulate" (real rounds on Ray) |
    | reward | str | "min_max_loss" | one of ``rayfl.rewards.REWARDS`` |
    | reward_scale | float | 1.0 | multiplies every reward |
    | overrides | list or mapping | () | config overrides ``key.path=value`` |
    | render_mode | str or None | None | "ansi" or "rgb_array": channel gains and the round's schedule |

    ## Version History
    * v0: initial version.
    """

    topology_kind = "hierarchical"
    default_config = DEFAULT_HIERARCHICAL_CONFIG


class D2DNeighborFlatEnv(FlatFLEnv):
    """``D2DNeighbor-Flat-v0``: one D2D target's neighbor choice, flat and bounded.

    ## Description
    ``D2DNeighbor-v0`` (:class:`envs.d2d.D2DNeighborEnv`: one pFedWN round per
    step, spec seed_003 §2.4) for one target, with one flat observation and one
    flat action over the N nodes (module docstring). Default system: 11 digits
    nodes, a random target per episode, F sub-channels of the default D2D
    topology, 10 rounds (``envs.d2d.DEFAULT_D2D_CONFIG``), surrogate mode. For
    every node a target at once, see :class:`envs.multiagent.D2DTargetsParallelEnv`.

    ## Action Space
    ``Box(-1, 1, (N,), float32)``: one score per node. The eligible candidates
    with a positive score, at most F of the highest, become the neighbors M_n,
    each on the sub-channel the Hungarian rule gives it; so the policy also
    picks how many neighbors (``learned``'s ``selection: positive``).

    ## Observation Space
    ``Box(-1, 1, (N·12,), float32)``: row n (a candidate neighbor; the
    target's own row is ineligible) at entries ``12n … 12n + 11``, the
    per-client features of the target's observation mapped into [−1, 1]
    (:func:`envs.wrappers.bounded_features`), with K = F:

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
    of ``envs.d2d.D2D_REWARDS`` by ``reward=``, times ``reward_scale``.

    ## Starting State
    As ``D2DNeighbor-v0``: layout and target from the episode seed, ω⁰ from the
    seed, the data partition from ``config.seed``.

    ## Episode End
    *Truncation*: after ``config.rounds`` steps (10 by default).

    ## Arguments
    | parameter | type | default | description |
    |-----------|------|---------|-------------|
    | config | path, mapping or RunConfig | ``envs.d2d.DEFAULT_D2D_CONFIG`` | a run config with ``topology.kind: d2d`` and one target (an id or random) |
    | mode | str | "surrogate" | "surrogate" (fast, no training) or "emulate" (real rounds on Ray) |
    | reward | str | "min_max_loss" | one of ``envs.d2d.D2D_REWARDS`` |
    | reward_scale | float | 1.0 | multiplies every reward |
    | overrides | list or mapping | () | config overrides ``key.path=value`` |
    | render_mode | str or None | None | "ansi" or "rgb_array": channel gains and the round's neighbors |
    | neighbor_cost | float | 0.0 | reward cost per selected neighbor |

    ## Version History
    * v0: initial version.
    """

    topology_kind = "d2d"
    default_config = DEFAULT_D2D_CONFIG
