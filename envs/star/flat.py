"""``WirelessFL-Flat-v0``: the star's env, flat and bounded (:mod:`envs.flat`).

``gym.make("WirelessFL-Flat-v0")`` builds :class:`WirelessFLFlatEnv`;
``gym.make_vec("WirelessFL-Flat-v0", num_envs=E, mode="emulate")`` builds
:class:`WirelessFLFlatVectorEnv`, E lanes of it stepping in lockstep on one set
of client hosts (the lanes of :class:`envs.rl_vector.RLVectorEnv`, each
observation mapped as the flat env's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from envs.base import check_topology
from envs.flat import DEFAULT_MODE, DEFAULT_REWARD, ConfigLike, FlatFLEnv
from envs.rl_vector import make_rl_vector_env
from envs.star.scheduling import DEFAULT_CONFIG
from envs.wrappers import bounded_features
from rayfl.config import load_config

__all__ = ["WirelessFLFlatEnv", "WirelessFLFlatVectorEnv"]


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
    ``Box(-1, 1, (N·F,), float32)``: row n of the per-client features
    (``policies.features``) at entries ``Fn … Fn + F − 1``, each mapped into
    [−1, 1] by :func:`envs.wrappers.bounded_features`. F = 12 in the papers'
    static world (this table); a moving world adds ``available`` and
    ``channel_age_share`` (in [0, 1]) with ``wireless.availability``, and
    ``compute_z`` (in [−1, 1]) with a CPU-speed distribution or a round
    deadline, in that order after column 11 (``policies.features``' second
    table; the inner env's ``feature_names`` lists them):

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


class WirelessFLFlatVectorEnv(VectorEnv):
    """``gym.make_vec("WirelessFL-Flat-v0", num_envs=E)``: E lanes of the flat env.

    ## Description
    Lane e, given the same seed and actions, is ``gym.make("WirelessFL-Flat-v0")``
    with the same arguments (tests/envs/test_flat_lanes.py): the lanes of
    :class:`envs.rl_vector.RLVectorEnv` (in emulate mode E FL runs on one
    set of client hosts, one stacked call per host and round), each
    observation mapped by :func:`envs.wrappers.bounded_features`. Surrogate mode
    by default, as the flat id; ``mode="emulate"`` for the real rounds.

    ## Action Space
    ``Box(-1, 1, (E, N))``: lane e's scores (``(E, N·(1 + C))`` with ``controls``).

    ## Observation Space
    ``Box(-1, 1, (E, N·F))`` float32: lane e's flat observation (F as the flat env's).

    ## Rewards
    Lane e's reward, shape (E,).

    ## Starting State
    ``reset(seed=s)`` gives lane e the seed s + e (a list: each lane's).

    ## Episode End
    Per lane as the flat env; ``NEXT_STEP`` autoreset (the step after a
    lane's end begins its next episode, ignores its action, rewards 0).

    ## Arguments
    ``num_envs`` (E >= 1) and the flat env's (``config``, ``mode``, ``reward``,
    ``reward_scale``, ``overrides``, ``controls``), plus ``partition_seeds``,
    ``partition_every``, ``partition_offset`` per lockstep episode
    (:mod:`envs.rl_vector`). No ``render_mode``: render one lane with
    ``gym.make``.

    ## Version History
    * v0: initial version (issue 47).
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}
    topology_kind = "star"

    def __init__(
        self,
        num_envs: int = 1,
        config: ConfigLike | None = None,
        mode: str = DEFAULT_MODE,
        reward: str = DEFAULT_REWARD,
        reward_scale: float = 1.0,
        overrides: Sequence[str] | Mapping[str, Any] = (),
        render_mode: str | None = None,
        **options: Any,
    ) -> None:
        if render_mode is not None:
            raise ValueError(
                "the WirelessFL-Flat-v0 lanes do not render: render one lane with "
                f"gym.make (render_mode={render_mode!r})"
            )
        cfg = load_config(DEFAULT_CONFIG if config is None else config, overrides)
        check_topology(self, cfg)
        self.lanes = make_rl_vector_env(
            cfg,
            num_envs=num_envs,
            mode=mode,
            reward=reward,
            reward_scale=reward_scale,
            **options,
        )
        self.num_envs = self.lanes.num_envs
        shape = self.lanes.single_observation_space.shape
        size = int(np.prod(shape)) if shape else 0
        self.single_observation_space = spaces.Box(-1.0, 1.0, (size,), np.float32)
        self.single_action_space = self.lanes.single_action_space
        self.observation_space = batch_space(
            self.single_observation_space, self.num_envs
        )
        self.action_space = self.lanes.action_space

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        """Begin an episode in every lane (lane e's seed: ``seed + e``)."""
        obs, infos = self.lanes.reset(seed=seed, options=options)
        return self._flat(obs), infos

    def step(
        self, actions: Any
    ) -> tuple[
        npt.NDArray[np.float32],
        npt.NDArray[np.float64],
        npt.NDArray[np.bool_],
        npt.NDArray[np.bool_],
        dict[str, Any],
    ]:
        """Step every lane with its scores; a lane whose episode ended resets."""
        obs, rewards, terminated, truncated, infos = self.lanes.step(actions)
        return self._flat(obs), rewards, terminated, truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        """Close the lanes (their client actors in emulate mode)."""
        lanes = getattr(self, "lanes", None)
        if lanes is not None:
            lanes.close()

    def _flat(self, obs: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Each lane's (N, F) features → its flat bounded vector, stacked."""
        names = self.lanes.feature_names
        return np.stack([bounded_features(lane, names) for lane in obs])
