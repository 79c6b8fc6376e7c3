"""The scheduling envs as a flat RL problem: per-client features in, scores out.

``make_rl_env`` stacks, around the base env of the config's topology (its
plug-in's ``rl_base`` env: :class:`envs.star.scheduling.WirelessFLEnv`, or for
a ``topology.kind: d2d`` config with one target
:func:`envs.d2d.rl.target_env`, whose rows are the candidate neighbors, K = F
sub-channels; or :class:`envs.hierarchy.scheduling.HierarchicalSchedulingEnv`,
whose ``rl_scores`` :class:`envs.hierarchy.rl.EdgeScores` does steps 2–3 edge
by edge over all devices):

1. the env itself: an episode is one FL run (truncated after ``config.rounds``);
2. :class:`HungarianTopK`: the action is a ``Box(N)`` of client scores; the K
   eligible clients with the highest scores get the subchannels by the
   Hungarian rule (max Σ gain [dB]) — the decoding of ``policies.learned``;
   with the plug-in's ``rl_meta`` selection ``positive`` (D2D) only candidates
   with a positive score, so the policy also picks how many neighbours (at
   most F; checkpoints record ``selection: positive``);
3. :class:`ClientFeatures`: the observation is the (N, F) float32 matrix of
   :func:`policies.features.client_features` (stateless normalisation);
4. optionally ``TransformReward`` scaling the reward by ``reward_scale``;
5. with ``partition_seeds``, :class:`DataPartitions` under all of them: the
   episodes move through several federated data partitions.

The result has a ``Box`` observation and a ``Box`` action, the spaces every
Gymnasium RL library takes (RLlib, Stable-Baselines3 PPO/SAC, CleanRL).

Why this encoding (issue 11, "Encodings"):
    * The per-subchannel ``MultiDiscrete([N + 1] * K)`` lets the agent name a
      client twice or an ineligible client: the env repairs such actions, so
      many actions map to one schedule and the agent must learn the rules
      before it learns to schedule. Masks (``action_masks()``) are per
      dimension and cannot forbid duplicates across subchannels.
    * Scores + top-K hold every constraint by construction (distinct clients,
      only eligible ones, no idle subchannel while clients wait), the action
      size is N instead of K·(N + 1), and with a network shared by all clients
      the policy is permutation-equivariant and independent of N.
    * Subchannels by the Hungarian rule rather than learned: given the set of
      clients, matching them to subchannels is a solved problem (max Σ gain),
      and all heuristics use the same rule, so the comparison isolates *who*
      is scheduled.

:class:`envs.d2d.rl.BinaryNeighbors` is the other D2D encoding, one bit per candidate
(``MultiBinary(N)``).

Implementation details:
    1. Only the ranking of the scores matters: finite values outside [−1, 1]
       are accepted (RLlib samples Gaussian scores unclipped), NaN raises.
    2. ``power``: the max level (like the heuristics); ``controls``: the
       algorithm's configured values.
    3. Rewards: ``reward`` names the env's reward on every topology (the one
       set of :mod:`rayfl.rl.rewards`; D2D has no ``latency``/``energy``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from envs.base import kind_spelling
from envs.partitions import DataPartitions
from envs.star.scheduling import DEFAULT_CONFIG, WirelessFLEnv
from policies.assignment import assign_subchannels
from policies.features import client_features, feature_names
from policies.learned import controls_from_unit, select_top_k
from rayfl.config import RunConfig, load_config
from rayfl.observation import unit_shape
from rayfl.registry import load, topology_names, topology_of

__all__ = [
    "ClientFeatures",
    "DataPartitions",
    "HungarianTopK",
    "ScoreDecoder",
    "make_rl_env",
    "score_env",
    "top_k_assignment",
    "top_k_assignments",
]


def top_k_assignment(
    scores: npt.NDArray[np.float64],
    obs: Mapping[str, Any],
    k: int,
    *,
    positive: bool = False,
) -> npt.NDArray[np.int64]:
    """Return the assignment of ``learned``: top-K eligible by score, Hungarian subchannels.

    Args:
        scores: (N,) finite scores, one per row of ``obs``.
        obs: One unit's observation (``channel_gain`` (N, K) dB, ``eligible``).
        k: How many rows at most get a subchannel.
        positive: Only rows with a score > 0 (the D2D selection).

    Returns:
        (K,) int64: the row on each subchannel, N for idle.
    """
    chosen = select_top_k(scores, obs["eligible"] > 0.5, k, positive=positive)
    return assign_subchannels(obs["channel_gain"], chosen, idle=len(scores))


def _lane(value: Any, e: int) -> Any:
    """Lane e's part of a batched observation (a dict's at every depth)."""
    if isinstance(value, Mapping):
        return {key: _lane(v, e) for key, v in value.items()}
    return np.asarray(value)[e]


def top_k_assignments(
    scores: npt.NDArray[np.float64],
    obs: Mapping[str, Any],
    k: int,
) -> npt.NDArray[np.int64]:
    """:func:`top_k_assignment` of E units at once: (E, K) int64, row by row the same.

    Each unit's top-K eligible rows by score (ties to the lower row) are
    matched to the subchannels by trying every matching (K ≤ 4: at most 24);
    the best total is :func:`policies.assignment.assign_subchannels`' optimum.
    A unit with fewer than K eligible rows, a non-finite gain, more than four
    subchannels, or a best total within rounding of another goes to
    :func:`top_k_assignment` itself (scipy's Hungarian method and its ties).

    Args:
        scores: (E, N) finite scores.
        obs: The units' batched observations (``channel_gain`` (E, N, K),
            ``eligible`` (E, N)).
        k: How many rows at most get a subchannel.
    """
    gain = np.asarray(obs["channel_gain"], dtype=np.float64)
    eligible = np.asarray(obs["eligible"]) > 0.5
    units, n, num_sub = gain.shape
    out = np.full((units, num_sub), n, dtype=np.int64)
    slow = np.ones(units, dtype=bool)
    if k == num_sub and 0 < k <= 4 and n >= k:
        rows = np.broadcast_to(np.arange(n), (units, n))
        top = np.lexsort((rows, -scores, ~eligible), axis=-1)[:, :k]  # (E, K)
        picked = np.take_along_axis(gain, top[:, :, None], axis=1)  # (E, K, K)
        perms = np.array(list(itertools.permutations(range(k))))  # row r → column
        totals = picked[:, np.arange(k), perms].sum(axis=-1)  # (E, perms)
        best = np.argmax(totals, axis=1)
        first = totals[np.arange(units), best]
        totals[np.arange(units), best] = -np.inf
        second = totals.max(axis=1)
        slow = (
            (eligible.sum(axis=1) < k)
            | ~np.isfinite(picked).all(axis=(1, 2))
            | (first - second <= 1e-9 * (1.0 + np.abs(first)))
        )
        np.put_along_axis(out, perms[best], top, axis=1)
    for e in np.flatnonzero(slow).tolist():
        out[e] = top_k_assignment(scores[e], _lane(obs, e), k)
    return out


class ScoreDecoder(gym.ActionWrapper):
    """An action wrapper whose decoding reads the last raw observation."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.last_obs: dict[str, Any] | None = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset and keep the raw observation (decoding reads it)."""
        obs, info = self.env.reset(**kwargs)
        self.last_obs = obs
        return obs, info

    def _values(self, action: npt.ArrayLike, what: str) -> npt.NDArray[np.float64]:
        """The action as a flat float array, checked (shape, no NaN)."""
        if self.last_obs is None:
            raise RuntimeError("call reset() before step()")
        values = np.asarray(action, dtype=np.float64).reshape(-1)
        if values.shape != self.action_space.shape or np.isnan(values).any():
            raise ValueError(
                f"action must be {self.action_space.shape[0]} finite values "  # type: ignore[index]  # gymnasium: Space.shape may be None
                f"{what}, got {action!r}"
            )
        return values

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step with the decoded action."""
        obs, reward, terminated, truncated, info = self.env.step(self.action(action))
        self.last_obs = obs
        return obs, float(reward), terminated, truncated, info


class HungarianTopK(ScoreDecoder):
    """Action = one score per client; schedule the top K by the Hungarian rule.

    When the env exposes per-client controls (``controls=True``) the action is
    ``Box(N·(1 + C))``, client-major: client n's score, then its C controls in
    [−1, 1], mapped onto each control's range around its configured value
    (:func:`policies.learned.controls_from_unit`), as ``learned`` does at run
    time. With ``positive`` only clients with a score > 0 are scheduled (the
    number becomes the policy's choice; ``learned``'s ``selection: positive``).
    """

    def __init__(self, env: gym.Env, *, positive: bool = False) -> None:
        super().__init__(env)
        n, k = unit_shape(env.observation_space)
        self.num_clients, self.num_subchannels = n, int(k or 0)
        self.positive = positive
        space = env.action_space
        self.control_box = (
            cast(spaces.Box, space["controls"])
            if isinstance(space, spaces.Dict) and "controls" in space.spaces
            else None
        )
        per_client = 1 + (0 if self.control_box is None else self.control_box.shape[1])
        self.action_space = spaces.Box(-1.0, 1.0, (n * per_client,), np.float32)

    def action(self, action: npt.ArrayLike) -> Any:
        """Turn the scores (and controls) into the env's action."""
        values = self._values(
            action, f"(the finite scores of {self.num_clients} clients)"
        )
        table = values.reshape(self.num_clients, -1)
        assert self.last_obs is not None  # _values checked it
        assignment = top_k_assignment(
            table[:, 0], self.last_obs, self.num_subchannels, positive=self.positive
        )
        if not isinstance(self.env.action_space, spaces.Dict):
            return assignment
        out: dict[str, Any] = {"assignment": assignment}
        box = self.control_box
        if box is not None:
            configured = cast(WirelessFLEnv, self.env.unwrapped).default_controls
            assert configured is not None  # the star env (controls: star only)
            center = configured[0]  # the same for every client
            out["controls"] = controls_from_unit(
                table[:, 1:], box.low, box.high, center
            )
        return out

    def action_many(
        self, obs: Mapping[str, Any], actions: npt.ArrayLike
    ) -> npt.NDArray[np.int64] | None:
        """:meth:`action` of E lanes at once (``obs`` batched), lane by lane the same.

        Plain assignments (no controls, not ``positive``) of E rows of finite
        scores are decoded together (:func:`top_k_assignments`); for anything
        else None: decode each lane with :meth:`action` (which raises on bad
        scores).
        """
        values = np.asarray(actions, dtype=np.float64)
        plain = not self.positive and not isinstance(self.env.action_space, spaces.Dict)
        shape = (len(values), *self.action_space.shape)  # type: ignore[misc]  # a Box's
        if not plain or values.shape != shape or np.isnan(values).any():
            return None
        scores = values.reshape(len(values), self.num_clients, -1)[:, :, 0]
        return top_k_assignments(scores, obs, self.num_subchannels)


class ClientFeatures(gym.ObservationWrapper):
    """Observation = the (N, F) per-client feature matrix (policies.features).

    F is the core twelve, plus a moving world's columns when the env observes
    their keys (:func:`policies.features.feature_names`; ``feature_names``).
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        n = unit_shape(env.observation_space)[0]
        keys = getattr(env.observation_space, "spaces", {})
        #: The columns, in order (:func:`policies.features.feature_names`).
        self.feature_names = feature_names(keys)
        self.observation_space = spaces.Box(
            -np.inf, np.inf, (n, len(self.feature_names)), np.float32
        )

    def observation(self, observation: Any) -> npt.NDArray[np.float32]:
        """Return ``client_features(observation, feature_names)``."""
        return client_features(observation, self.feature_names)


def make_rl_env(
    config: str | Path | Mapping[str, Any] | RunConfig | None = None,
    *,
    mode: str = "surrogate",
    reward: str = "min_max_loss",
    reward_scale: float = 1.0,
    overrides: Sequence[str] | Mapping[str, Any] = (),
    partition_seeds: list[int] | tuple[int, ...] | None = None,
    partition_every: int = 1,
    partition_offset: int = 0,
    controls: bool = False,
    neighbor_cost: float = 0.0,
) -> gym.Env:
    """Build the wrapped scheduling env (module docstring).

    Args:
        config: Run config of the FL system (star or single-target D2D;
            None: the star env's ``DEFAULT_CONFIG``).
        mode: ``"surrogate"`` or ``"emulate"``.
        reward: One of ``rayfl.rl.rewards.REWARDS`` (implementation detail 3).
        reward_scale: Multiplies every reward (1 = unchanged).
        overrides: Config overrides ``key.path=value``.
        partition_seeds: Train on these data partitions in turn
            (:class:`DataPartitions`); None: the partition of ``config.seed``.
        partition_every: Episodes per partition.
        partition_offset: Index of the first partition seed.
        controls: Star only: the action also sets the algorithm's per-client
            controls (:class:`HungarianTopK`).
        neighbor_cost: D2D only: the reward's price per selected neighbor
            (:class:`envs.d2d.neighbor.D2DNeighborEnv`).

    Returns:
        The env: ``Box(N, F)`` observations, ``Box(N)`` actions.

    Raises:
        ValueError: For a D2D config with ``topology.target: all`` or a reward
            the env has no form of (``rayfl.rl.rewards.check_reward``).
    """
    cfg = load_config(DEFAULT_CONFIG if config is None else config, overrides)
    plugin = topology_of(cfg)
    options = {"controls": controls, "neighbor_cost": neighbor_cost}
    for option, value in options.items():
        if value and option not in plugin.rl_features:
            raise ValueError(
                f"{option} is for {_envs_taking(option)}; "
                f"got topology.kind={cfg.topology.kind}"
            )
    build_base = load(plugin.env_entry("rl_base"))
    given = {k: v for k, v in options.items() if k in plugin.rl_features}

    def make(run_config: RunConfig) -> gym.Env:
        env: gym.Env = build_base(run_config, mode=mode, reward=reward, **given)
        return env

    env: gym.Env = (
        make(cfg)
        if partition_seeds is None
        else DataPartitions(
            make, cfg, partition_seeds, every=partition_every, offset=partition_offset
        )
    )
    scores = load(plugin.env_entry("rl_scores"))
    env = scores(env, selection=plugin.rl_meta(cfg)["selection"])
    if reward_scale != 1.0:
        env = gym.wrappers.TransformReward(env, lambda r: reward_scale * r)  # type: ignore[operator]  # gymnasium: rewards are SupportsFloat
    return env


def score_env(env: gym.Env, *, selection: str = "top_k") -> gym.Env:
    """Scores in, per-client features out: :class:`ClientFeatures` over :class:`HungarianTopK`.

    The default ``rl_scores`` of a topology (steps 2–3 of the module
    docstring); ``selection="positive"`` keeps only positive scores.
    """
    return ClientFeatures(HungarianTopK(env, positive=selection == "positive"))


def _envs_taking(option: str) -> str:
    """``"the env of topology.kind=d2d"``: the topologies whose RL env takes ``option``."""
    kinds = [
        kind_spelling(topology_of(n))
        for n in topology_names()
        if option in topology_of(n).rl_features
    ]
    return f"the env of topology.kind={' or '.join(kinds)}" if kinds else "no env"
