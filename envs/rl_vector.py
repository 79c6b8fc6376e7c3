"""The RL env of :mod:`envs.rl` over E emulate lanes of any topology: :class:`RLVectorEnv`.

The ``lanes`` env of every plug-in with a ``vector`` env (``rayfl
train-policy`` loads it by that role).

``make_rl_env`` wraps one scheduling env (one FL run on its own actors) for RL
libraries: per-client features in, client scores out. :class:`RLVectorEnv` is
the same problem for E episodes in lockstep: its lanes are the lanes of the
topology's vector env (``WirelessFLVectorEnv``, ``HierarchicalFLVectorEnv``,
``D2DNeighborVectorEnv``: E FL runs stepping together on one set of hosts),
each behind the decoding and features of ``make_rl_env`` (the plug-in's
``rl_scores`` wrapper over the lane's env: :class:`envs.rl.HungarianTopK` and
:class:`envs.rl.ClientFeatures` on the star and D2D, the hierarchy's
``EdgeScores``; the reward times ``reward_scale``). D2D's ``TargetInfo`` (the
target's entry of each per-target info) is not applied: the infos are the
vector env's. RLlib
builds it for ``rayfl train-policy`` in emulate mode with
``rl.num_envs_per_env_runner`` > 1 (``gym_env_vectorize_mode:
vector_entry_point``).

Lane e, given the same seed and actions, returns the observations, rewards and
episode ends of ``make_rl_env`` with the same arguments
(tests/envs/test_rl_vector.py), with one difference, about data partitions:

Data partitions (``partition_seeds``):
    The client hosts hold one federated partition of the data, so all lanes of
    one env train on the same partition. The env keeps one lane group (one
    ``WirelessFLVectorEnv`` and its client actors) per partition seed, built on
    first use and kept, as :class:`envs.partitions.DataPartitions` keeps one
    engine per seed. It counts *lockstep episodes*: the first reset begins
    episode 0, and every step at which all lanes begin a new episode together
    begins the next one; lockstep episode i runs on partition
    ``seeds[(offset + i // every) % len(seeds)]`` — the rule of
    ``DataPartitions`` for episode i. Without early termination (every
    episode is truncated after ``config.rounds`` steps) all lanes end
    together, and lane e is exactly ``make_rl_env`` with the same
    ``partition_offset``: the partition, and the run seeds (a partition's
    first episode draws lane e's seed from the ``"partition_cycle"``
    generator of lane e's first seed; later ones come from the lane's own
    generator). A lane whose episode terminates early begins its next episode
    at once on the current partition; the partition moves on only at a step
    where every lane begins an episode, so lanes out of step stay on one
    partition until they end together. The E separate envs of the
    single-env path each start at their own partition
    (``partition_offset`` j·(R + 1) + i for copy j of runner i), the lanes of
    one runner start at the runner's.

Autoreset is ``NEXT_STEP`` (what RLlib's ``SingleAgentEnvRunner`` expects of a
vector env: after a lane's episode ended, its next observation is added as an
episode's reset): the step after a lane's episode ended begins the lane's next
episode, ignores its action and returns reward 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from envs.partitions import check_room
from envs.rl import ClientFeatures, ScoreDecoder, _envs_taking
from envs.star.scheduling import DEFAULT_CONFIG
from envs.wrappers import feature_names_of
from policies.features import client_features_many
from rayfl.config import RunConfig, load_config
from rayfl.registry import load, topology_of
from rayfl.seeding import rng_for

__all__ = ["RLVectorEnv", "make_rl_vector_env"]


class _Lanes:
    """One partition's lane group: its vector env and each lane's decoder."""

    def __init__(self, venv: Any, scores: Callable[[gym.Env], gym.Env]) -> None:
        self.venv = venv
        wrapped = [scores(env) for env in venv.envs]
        #: Lane e's decoding of scores (holds its last raw observation).
        self.topk = [_decoder(w) for w in wrapped]
        #: Lane e's features of a raw observation (None: every lane's
        #: ClientFeatures at once, :func:`policies.features.client_features_many`).
        self.features = (
            None if all(isinstance(w, ClientFeatures) for w in wrapped) else wrapped
        )
        #: The feature columns of every lane (ClientFeatures' own).
        self.names = feature_names_of(wrapped[0])
        space = venv.single_action_space
        #: A base action for a lane whose action is ignored (autoreset).
        self.idle = next(iterate(batch_space(space, 1), create_empty_array(space, 1)))
        self.buffer = create_empty_array(venv.single_action_space, venv.num_envs)
        #: Every lane's raw observation, batched (None before the first).
        self.raw: Mapping[str, Any] | None = None

    def observe(self, obs: Mapping[str, Any]) -> npt.NDArray[np.float32]:
        """Keep each lane's raw obs (its decoder reads it); return every lane's features."""
        raws = list(iterate(self.venv.observation_space, obs))
        for e, raw in enumerate(raws):
            self.topk[e].last_obs = raw
        self.raw = obs  # every lane's last_obs, batched
        if self.features is None:
            return client_features_many(obs, self.names)
        many = getattr(self.features[0], "observation_many", None)
        if many is not None:  # the wrapper's features of every lane at once
            return np.asarray(many(obs), np.float32)
        return np.stack(
            [w.observation(raw) for w, raw in zip(self.features, raws, strict=True)]  # type: ignore[attr-defined]  # an ObservationWrapper's
        )

    def decode(
        self, actions: npt.NDArray[np.float64], ignored: npt.NDArray[np.bool_]
    ) -> Any:
        """Each playing lane's scores → its base action, batched.

        A decoder with ``action_many`` decodes every lane at once (an ignored
        lane's scores as zeros); when it cannot (None), each lane's decoder.
        """
        many = getattr(self.topk[0], "action_many", None)
        decoded = None
        if many is not None and self.raw is not None:
            decoded = many(self.raw, np.where(ignored[:, None], 0.0, actions))
        if decoded is not None:
            per_lane = [
                self.idle if ignored[e] else decoded[e] for e in range(len(decoded))
            ]
        else:
            per_lane = [
                self.idle if ignored[e] else self.topk[e].action(actions[e])
                for e in range(self.venv.num_envs)
            ]
        space = self.venv.single_action_space
        self.buffer = concatenate(space, per_lane, self.buffer)
        return self.buffer


def _str_keys(infos: dict[Any, Any]) -> dict[str, Any]:
    """``infos`` with every key a str, at every depth (RLlib's vector envs need them).

    D2D's per-target infos are keyed by the target's id: ``info[key][3]``
    becomes ``info[key]["3"]`` (``make_rl_env``'s ``TargetInfo`` instead keeps
    the one target's entry; the lanes' targets may differ).
    """
    return {
        str(k): _str_keys(v) if isinstance(v, dict) else v for k, v in infos.items()
    }


def _decoder(env: gym.Env) -> ScoreDecoder:
    """The score decoder in a ``rl_scores`` wrapper stack (the outermost one)."""
    while not isinstance(env, ScoreDecoder):
        env = env.env  # type: ignore[attr-defined]  # a gymnasium Wrapper's
    return env


class RLVectorEnv(VectorEnv):
    """E ``make_rl_env`` episodes in lockstep on shared hosts (any topology with lanes).

    ## Description
    See the module docstring: lane e is ``make_rl_env(config, ...)`` with the
    same arguments, its FL run one lane of a ``WirelessFLVectorEnv``.

    ## Action Space
    ``Box(-1, 1, (E, N·(1 + C)))``: lane e's scores (and C controls per client
    with ``controls``), as ``make_rl_env``'s action; finite values outside
    [−1, 1] are accepted, NaN raises.

    ## Observation Space
    ``Box(-inf, inf, (E, N, F))`` float32: lane e's per-client features
    (:func:`policies.features.client_features`).

    ## Rewards
    Lane e's reward (its scheduling env's) times ``reward_scale``, shape (E,).

    ## Starting State
    ``reset(seed=s)`` gives lane e the run seed s + e (a list: each lane's);
    ``reset()`` as ``WirelessFLVectorEnv`` (first reset ``config.seed + e``)
    without partitions, as ``DataPartitions`` per lane with them.

    ## Episode End
    Per lane as its scheduling env (``WirelessFL-v0``: *Termination* when no
    client is eligible; *Truncation* after ``config.rounds`` steps);
    ``NEXT_STEP`` autoreset.

    ## Arguments
    | parameter | type | default | description |
    |-----------|------|---------|-------------|
    | num_envs | int | 1 | E, the number of lanes (>= 1) |
    | config | path, mapping or RunConfig | ``WirelessFL-v0``'s | run config of a topology with a ``vector`` env |
    | mode | str | "emulate" | "emulate" or "surrogate" |
    | reward, reward_scale, overrides, controls, neighbor_cost | | | as ``make_rl_env`` |
    | partition_seeds, partition_every, partition_offset | | None, 1, 0 | as ``make_rl_env``, per lockstep episode (module docstring) |

    ## Version History
    * v0: initial version (issue 34); every topology with a vector env (issue 47).
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(
        self,
        num_envs: int = 1,
        config: str | Path | Mapping[str, Any] | RunConfig | None = None,
        *,
        mode: str = "emulate",
        reward: str = "min_max_loss",
        reward_scale: float = 1.0,
        overrides: Sequence[str] | Mapping[str, Any] = (),
        partition_seeds: Sequence[int] | None = None,
        partition_every: int = 1,
        partition_offset: int = 0,
        controls: bool = False,
        neighbor_cost: float = 0.0,
    ) -> None:
        cfg = load_config(DEFAULT_CONFIG if config is None else config, overrides)
        plugin = topology_of(cfg)
        if "lanes" not in plugin.envs:
            raise ValueError(
                "the RL vector env steps emulate lanes, which "
                f"topology.kind={cfg.topology.kind} has not"
            )
        if mode == "emulate":
            plugin.check_lanes(cfg)
        if partition_seeds is not None and not list(partition_seeds):
            raise ValueError("partition_seeds must name at least one seed or be None")
        if partition_every < 1:
            raise ValueError(f"partition_every must be >= 1, got {partition_every}")
        options = {"controls": controls, "neighbor_cost": neighbor_cost}
        for option, value in options.items():
            if value and option not in plugin.rl_features:
                raise ValueError(
                    f"{option} is for {_envs_taking(option)}; "
                    f"got topology.kind={cfg.topology.kind}"
                )
        given = {k: v for k, v in options.items() if k in plugin.rl_features}
        base = load(plugin.env_entry("rl_base"))(cfg, mode=mode, reward=reward, **given)
        selection = plugin.rl_meta(cfg)["selection"]
        scores = load(plugin.env_entry("rl_scores"))
        spaces = scores(base, selection=selection)
        #: The plug-in's scores wrapper, applied to each lane's env.
        self._scores = partial(scores, selection=selection)
        #: The plug-in's vector env (its emulate lanes).
        self._vector = load(plugin.envs["vector"])
        self.config, self.mode = spaces.unwrapped.config, mode
        self._settings = {"mode": mode, "reward": reward, **given}
        self._check_num_envs(num_envs)
        self.num_envs = int(num_envs)
        self.reward_scale = float(reward_scale)
        self.seeds = (
            None if partition_seeds is None else [int(s) for s in partition_seeds]
        )
        self.every, self.offset = int(partition_every), int(partition_offset)
        self.single_observation_space = spaces.observation_space
        #: The feature columns of a lane's observation (``ClientFeatures``').
        self.feature_names = feature_names_of(spaces)
        self.single_action_space = spaces.action_space
        self.observation_space = batch_space(spaces.observation_space, self.num_envs)
        self.action_space = batch_space(spaces.action_space, self.num_envs)
        self.groups: dict[int | None, _Lanes] = {}  # by partition seed
        self.current: int | None = None  # the partition seed of the lanes
        self.episodes = 0  # lockstep episodes begun
        self._rngs: list[np.random.Generator | None] = [None] * self.num_envs
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self._started = False

    @staticmethod
    def _check_num_envs(num_envs: Any) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer):
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")

    def set_partition_offset(self, offset: int) -> None:
        """Set the index of the first partition seed (before the first reset).

        RLlib's vector entry point gets no runner index; ``rayfl
        train-policy`` sets it from the runner's ``EnvContext`` once the env
        is built (``on_environment_created``).
        """
        if self._started:
            raise RuntimeError("set_partition_offset must come before the first reset")
        self.offset = int(offset)

    @property
    def partition_seed(self) -> int | None:
        """The partition of lockstep episode ``episodes − 1`` (None: the config's)."""
        if self.seeds is None:
            return None
        index = self.offset + max(self.episodes - 1, 0) // self.every
        return self.seeds[index % len(self.seeds)]

    # ---------------------------------------------------------------- gym API
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        """Begin a lockstep episode in every lane (see Starting State)."""
        if seed is None or isinstance(seed, int | np.integer):
            seeds: Any = seed
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(
                    f"seed must be an int, None or {self.num_envs} seeds (one per "
                    f"lane), got {len(seeds)}"
                )
        self._started = True
        self.episodes += 1
        return self._begin(seeds)

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
        if not self._started or self.current not in self.groups:
            raise RuntimeError("call reset() before step()")
        if self._autoreset.all():  # every lane begins an episode: maybe a new partition
            self.episodes += 1
            if self.partition_seed != self.current:
                obs, infos = self._begin(None)
                none = np.zeros(self.num_envs, dtype=bool)
                return obs, np.zeros(self.num_envs), none, none.copy(), infos
        group = self.groups[self.current]
        scores = np.asarray(actions, dtype=np.float64).reshape(self.num_envs, -1)
        base = group.decode(scores, self._autoreset)
        raw, rewards, terminated, truncated, infos = group.venv.step(base)
        if self.seeds is not None:
            for e in np.flatnonzero(self._autoreset).tolist():
                infos = self._add_info(infos, {"partition_seed": self.current}, e)
        self._autoreset = terminated | truncated
        obs = group.observe(raw)
        if self.reward_scale != 1.0:
            rewards = self.reward_scale * rewards
        return obs, rewards, terminated, truncated, _str_keys(infos)

    def close_extras(self, **kwargs: Any) -> None:
        """Close every partition's lanes (their client actors)."""
        for group in getattr(self, "groups", {}).values():
            group.venv.close()
        self.groups = {}

    # ---------------------------------------------------------------- helpers
    def _begin(self, seed: Any) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        """Reset the lanes on this lockstep episode's partition."""
        key = self.partition_seed
        new = key not in self.groups or not getattr(
            self.groups[key].venv, "_started", False
        )
        if key not in self.groups:
            self._check_room()
            cfg = (
                self.config
                if key is None
                else self.config.model_copy(update={"seed": key})
            )
            venv = self._vector(self.num_envs, config=cfg, **self._settings)
            self.groups[key] = _Lanes(venv, self._scores)
        if self.seeds is not None:
            seed = self._lane_seeds(seed, new)
        group = self.groups[key]
        raw, infos = group.venv.reset(seed=seed)
        self.current = key
        self._autoreset[:] = False
        if self.seeds is not None:
            for e in range(self.num_envs):
                infos = self._add_info(infos, {"partition_seed": key}, e)
        return group.observe(raw), _str_keys(infos)

    def _lane_seeds(self, seed: Any, new: bool) -> list[int | None]:
        """Each lane's run seed, as ``DataPartitions`` draws it per env."""
        if seed is None:
            seeds: list[int | None] = [None] * self.num_envs
        elif isinstance(seed, int | np.integer):
            seeds = [int(seed) + e for e in range(self.num_envs)]
        else:
            seeds = list(seed)
        for e, s in enumerate(seeds):
            if self._rngs[e] is None:
                self._rngs[e] = rng_for(0 if s is None else int(s), "partition_cycle")
            if new and s is None:
                seeds[e] = int(self._rngs[e].integers(2**31 - 1))  # type: ignore[union-attr]  # set above
        return seeds

    def _check_room(self) -> None:
        """Emulate mode: refuse a new partition's actors the session cannot hold."""
        if self.mode != "emulate":
            return
        built = [g.venv._lanes for g in self.groups.values()]
        check_room(
            [lanes.pool.groups for lanes in built if lanes and lanes.pool],
            self.config,
            "RLVectorEnv",
        )


def make_rl_vector_env(
    config: str | Path | Mapping[str, Any] | RunConfig | None = None,
    *,
    num_envs: int = 1,
    **kwargs: Any,
) -> RLVectorEnv:
    """Return :class:`RLVectorEnv` (``make_rl_env``'s arguments).

    Args:
        config: Run config (None: ``WirelessFL-v0``'s default).
        num_envs: E, the number of lanes.
        **kwargs: ``mode``, ``reward``, ``reward_scale``, ``overrides``,
            ``partition_seeds``, ``partition_every``, ``partition_offset``,
            ``controls``, ``neighbor_cost`` (as :func:`envs.rl.make_rl_env`).
    """
    return RLVectorEnv(num_envs, config, **kwargs)
