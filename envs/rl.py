"""The scheduling envs as a flat RL problem: per-client features in, scores out.

``make_rl_env`` stacks, around :class:`envs.scheduling.WirelessFLEnv` (or
:class:`envs.d2d.D2DNeighborEnv` for a ``topology.kind: d2d`` config with one
target: the rows are the candidate neighbors, K = F sub-channels; or
:class:`envs.hierarchical.HierarchicalSchedulingEnv`, where :class:`EdgeScores`
does steps 2–3 edge by edge over all devices):

1. the env itself: an episode is one FL run (truncated after ``config.rounds``);
2. :class:`HungarianTopK`: the action is a ``Box(N)`` of client scores; the K
   eligible clients with the highest scores get the subchannels by the
   Hungarian rule (max Σ gain [dB]) — the decoding of ``policies.learned``;
   on D2D only candidates with a positive score, so the policy also picks how
   many neighbours (at most F; checkpoints record ``selection: positive``);
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

:class:`BinaryNeighbors` is the other D2D encoding, one bit per candidate
(``MultiBinary(N)``).

Implementation details:
    1. Only the ranking of the scores matters: finite values outside [−1, 1]
       are accepted (RLlib samples Gaussian scores unclipped), NaN raises.
    2. ``power``: the max level (like the heuristics); ``controls``: the
       algorithm's configured values.
    3. Rewards: ``reward`` names the env's reward on every topology (the one
       set of :mod:`rayfl.rewards`; D2D has no ``latency``/``energy``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from envs.d2d import D2DNeighborEnv
from envs.hierarchical import HierarchicalSchedulingEnv
from envs.partitions import DataPartitions
from envs.scheduling import DEFAULT_CONFIG, WirelessFLEnv
from policies.assignment import assign_subchannels
from policies.features import NUM_FEATURES, client_features
from policies.learned import controls_from_unit, select_top_k
from rayfl.config import RunConfig, load_config
from rayfl.observation import unit_shape

__all__ = [
    "BinaryNeighbors",
    "ClientFeatures",
    "DataPartitions",
    "EdgeScores",
    "HungarianTopK",
    "make_rl_env",
    "top_k_assignment",
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


class _Decoder(gym.ActionWrapper):
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


class HungarianTopK(_Decoder):
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


class ClientFeatures(gym.ObservationWrapper):
    """Observation = the (N, F) per-client feature matrix (policies.features)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        n = unit_shape(env.observation_space)[0]
        self.observation_space = spaces.Box(
            -np.inf, np.inf, (n, NUM_FEATURES), np.float32
        )

    def observation(self, observation: Any) -> npt.NDArray[np.float32]:
        """Return ``client_features(observation)``."""
        return client_features(observation)


class EdgeScores(_Decoder):
    """Hierarchy: observation (I, F) features, action (I,) scores over all devices.

    The star's :class:`ClientFeatures` + :class:`HungarianTopK`, edge by edge:
    rows are the devices in edge order (edge c's block holds the members of
    S_c by ascending id), each block's features are computed from edge c's
    observation alone, and edge c schedules the K_e eligible devices of its
    block with the highest scores, on subchannels by the Hungarian rule. A
    network trained here therefore acts at run time as ``learned`` does on
    each edge (:class:`policies.learned.LearnedPolicy`).
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        base: HierarchicalSchedulingEnv = env.unwrapped  # type: ignore[assignment]
        self.base = base
        total = sum(base.sizes)
        self.observation_space = spaces.Box(
            -np.inf, np.inf, (total, NUM_FEATURES), np.float32
        )
        self.action_space = spaces.Box(-1.0, 1.0, (total,), np.float32)

    def observation(self, obs: Mapping[str, Any]) -> npt.NDArray[np.float32]:
        """Stack each edge's client features (edge order)."""
        return np.concatenate(
            [
                client_features(self.base.edge_observation(obs, c))
                for c in range(len(self.base.sizes))
            ]
        ).astype(np.float32)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset; return the stacked features."""
        obs, info = super().reset(**kwargs)
        return self.observation(obs), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Decode the scores edge by edge and step; return the stacked features."""
        obs, reward, terminated, truncated, info = super().step(action)
        return self.observation(obs), reward, terminated, truncated, info

    def action(self, action: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Turn (I,) scores into the env's concatenated per-edge assignment."""
        scores = self._values(action, "(the finite scores of the devices)")
        assert self.last_obs is not None  # _values checked it
        base = self.base
        blocks = np.split(scores, np.cumsum(base.sizes)[:-1])
        return base.join_actions(
            [
                top_k_assignment(
                    block,
                    base.edge_observation(self.last_obs, c),
                    base.num_subchannels[c],
                )
                for c, block in enumerate(blocks)
            ]
        )


class BinaryNeighbors(_Decoder):
    """D2D action = one bit per candidate (``MultiBinary(N)``, or (T, N)).

    Decoding (the rule of ``channel_threshold`` after its threshold): the set
    bits of eligible candidates are M_n; with more than F, the F of smallest
    P^err are kept; the selected get distinct sub-channels by the Hungarian
    matching on ``channel_gain``. A bit on the target itself is ignored. Every
    ``MultiBinary`` sample is thus a valid selection, which random exploration
    and RL libraries need.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.base: D2DNeighborEnv = env.unwrapped  # type: ignore[assignment]
        n = self.base.num_nodes
        self.action_space = spaces.MultiBinary(
            (n, n) if self.base.all_targets else (n,)
        )

    def action(self, action: Any) -> npt.NDArray[np.int64]:
        """Turn bits into the env's ``MultiDiscrete`` assignment."""
        if self.last_obs is None:
            raise RuntimeError("call reset() before step()")
        bits = np.asarray(action)
        if bits.shape != self.action_space.shape or np.any((bits != 0) & (bits != 1)):
            raise ValueError(
                f"action must be 0/1 of shape {self.action_space.shape}, got {action!r}"
            )
        base = self.base
        out = []
        for i, row in enumerate(bits.reshape(len(base.targets), base.num_nodes)):
            obs = base.target_observation(self.last_obs, i)
            error = np.asarray(obs["error_probability"], dtype=np.float64)
            chosen = np.flatnonzero((row == 1) & (obs["eligible"] > 0.5))
            chosen = chosen[np.argsort(error[chosen], kind="stable")]
            out.append(
                assign_subchannels(
                    obs["channel_gain"],
                    chosen[: base.num_subchannels],
                    idle=base.num_nodes,
                )
            )
        return np.stack(out) if base.all_targets else out[0]


class _TargetInfo(gym.Wrapper):
    """Single-target D2D info without the target keys (vector envs want str keys)."""

    def step(
        self, action: Any
    ) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step; ``info[key][target]`` becomes ``info[key]``."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        (target,) = self.env.unwrapped.targets  # type: ignore[attr-defined]  # gymnasium: unwrapped is an Env
        info = {k: v[target] if isinstance(v, dict) else v for k, v in info.items()}
        return obs, reward, terminated, truncated, info


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
        reward: One of ``rayfl.rewards.REWARDS`` (implementation detail 3).
        reward_scale: Multiplies every reward (1 = unchanged).
        overrides: Config overrides ``key.path=value``.
        partition_seeds: Train on these data partitions in turn
            (:class:`DataPartitions`); None: the partition of ``config.seed``.
        partition_every: Episodes per partition.
        partition_offset: Index of the first partition seed.
        controls: Star only: the action also sets the algorithm's per-client
            controls (:class:`HungarianTopK`).
        neighbor_cost: D2D only: the reward's price per selected neighbor
            (:class:`envs.d2d.D2DNeighborEnv`).

    Returns:
        The env: ``Box(N, F)`` observations, ``Box(N)`` actions.

    Raises:
        ValueError: For a D2D config with ``topology.target: all`` or a reward
            the env has no form of (``rayfl.rewards.check_reward``).
    """
    cfg = load_config(DEFAULT_CONFIG if config is None else config, overrides)
    if controls and cfg.topology.kind != "flat":
        raise ValueError(
            f"controls=True is for the star env; got topology.kind={cfg.topology.kind}"
        )
    if neighbor_cost and cfg.topology.kind != "d2d":
        raise ValueError(
            f"neighbor_cost is for the D2D env; got topology.kind={cfg.topology.kind}"
        )

    def make(run_config: RunConfig) -> gym.Env:
        if run_config.topology.kind == "hierarchical":
            return HierarchicalSchedulingEnv(run_config, mode=mode, reward=reward)
        if run_config.topology.kind != "d2d":
            return WirelessFLEnv(
                run_config, mode=mode, reward=reward, controls=controls
            )
        if run_config.topology.target == "all":
            raise ValueError(
                "make_rl_env needs one D2D target (topology.target: an id or "
                "random), got topology.target=all"
            )
        return _TargetInfo(D2DNeighborEnv(run_config, mode, reward, neighbor_cost))

    env: gym.Env = (
        make(cfg)
        if partition_seeds is None
        else DataPartitions(
            make, cfg, partition_seeds, every=partition_every, offset=partition_offset
        )
    )
    if cfg.topology.kind == "hierarchical":
        env = EdgeScores(env)
    else:
        # D2D: only positive scores, so the policy picks how many neighbours
        env = ClientFeatures(HungarianTopK(env, positive=cfg.topology.kind == "d2d"))
    if reward_scale != 1.0:
        env = gym.wrappers.TransformReward(env, lambda r: reward_scale * r)  # type: ignore[operator]  # gymnasium: rewards are SupportsFloat
    return env
