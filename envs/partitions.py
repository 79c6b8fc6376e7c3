"""Episodes over several federated data partitions (``rl.partition_seeds``).

:class:`DataPartitions` is part of the RL env stack of :mod:`envs.rl`
(re-exported there).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rayfl.config import RunConfig
from rayfl.seeding import rng_for

__all__ = ["DataPartitions", "check_room"]


class DataPartitions(gym.Wrapper):
    """Episodes on several federated data partitions, one after another.

    ``WirelessFLEnv`` draws its data partition once, from ``config.seed``, and
    keeps it over all episodes (``Engine.restart`` keeps the data), so a policy
    trained on one env sees one partition only. This wrapper holds one
    ``WirelessFLEnv`` per partition seed (built with ``config.seed`` = that
    seed, on first use) and moves to the next seed every ``every`` episodes.

    Why one env per seed, kept alive, rather than one env rebuilt: building an
    emulate-mode env starts its client actors and ships the data (≈ 15 s on 2
    cores against ≈ 2 s for a 20-round episode), while a restart on live actors
    costs ≈ 0.05 s. Why cycling inside one env rather than one partition per
    RLlib env copy: emulate mode runs one env per EnvRunner and the new API
    stack gives every vectorised copy the same ``EnvContext`` (no
    ``vector_index``), so one env must see several partitions by itself.

    Implementation details:
        1. Episode ``i`` (counting from 0) runs on
           ``seeds[(offset + i // every) % len(seeds)]``.
        2. Run seeds: ``reset(seed=s)`` goes to the current partition's env;
           a partition's first episode without a seed gets one drawn from the
           ``"partition_cycle"`` generator of the first seed seen (default 0),
           later ones come from that env's own generator, as without the
           wrapper.
        3. The partition seed only sets the data (model init, batches, channel
           and noise follow the run seed given to ``restart``).
        4. Emulate mode: every built partition keeps its client actors, so the
           Ray session needs CPUs for all of them; building one that does not
           fit raises instead of waiting forever for the actors.

    Args:
        make: Builds the base env of one config (``WirelessFLEnv`` or
            ``D2DNeighborEnv``).
        config: The run config; ``seed`` is replaced per partition.
        seeds: Partition seeds (≥ 1).
        every: Episodes per partition before moving on (≥ 1).
        offset: Index of the first seed (e.g. the RLlib worker index).
    """

    def __init__(
        self,
        make: Any,
        config: RunConfig,
        seeds: list[int] | tuple[int, ...],
        *,
        every: int = 1,
        offset: int = 0,
    ) -> None:
        if not seeds:
            raise ValueError("DataPartitions needs at least one partition seed")
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.seeds = [int(s) for s in seeds]
        self.every = int(every)
        self.offset = int(offset)
        self._make = make
        self._config = config
        self.envs: dict[int, Any] = {}  # WirelessFLEnv per partition seed
        self.episodes = 0
        self._rng: np.random.Generator | None = None
        super().__init__(self._env_for(self.partition_seed))

    @property
    def partition_seed(self) -> int:
        """The partition seed of the current (or next, before a reset) episode."""
        index = self.offset + max(self.episodes - 1, 0) // self.every
        return self.seeds[index % len(self.seeds)]

    def _env_for(self, seed: int) -> Any:
        if seed not in self.envs:
            self.envs[seed] = self._make(self._config.model_copy(update={"seed": seed}))
        return self.envs[seed]

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Move to this episode's partition and reset its env."""
        self.episodes += 1
        seed = self.partition_seed
        if self._rng is None:
            first = kwargs.get("seed")
            self._rng = rng_for(0 if first is None else int(first), "partition_cycle")
        new = seed not in self.envs or _engine(self.envs[seed]) is None
        if new and any(e.unwrapped.mode == "emulate" for e in self.envs.values()):
            self._check_room()
        self.env = self._env_for(seed)
        if new and kwargs.get("seed") is None:
            kwargs["seed"] = int(self._rng.integers(2**31 - 1))
        obs, info = self.env.reset(**kwargs)
        info["partition_seed"] = seed
        return obs, info

    def _check_room(self) -> None:
        built = [s for s in map(_engine, self.envs.values()) if s is not None]
        check_room([s.groups for s in built], self._config)

    def close(self) -> None:
        """Close every partition's env."""
        for env in self.envs.values():
            env.close()


def check_room(
    built: list[list[list[int]]], config: RunConfig, who: str = "DataPartitions"
) -> None:
    """Raise if the Ray session has no CPUs left for one more partition's actors.

    Args:
        built: The client groups (one list per actor) of each emulated
            partition already built.
        config: The run config (``ray.run_cpus``: the CPUs a partition's
            actors reserve).
        who: The env named in the message.

    Raises:
        RuntimeError: Naming the CPUs held, needed and free.
    """
    if not built:
        return
    import ray

    from rayfl.cluster.resources import run_cpus

    cpus = run_cpus(config.ray.run_cpus)  # the pool's rule for its CPUs
    used = sum(len(groups) * min(1.0, cpus / len(groups)) for groups in built)
    per_system = used / len(built)
    free = float(ray.available_resources().get("CPU", 0.0))
    if free + 1e-9 < per_system:
        raise RuntimeError(
            f"{who}: {len(built)} emulated partitions hold "
            f"{used:g} CPUs of the Ray session and the next needs {per_system:g} "
            f"more ({free:g} free); start Ray with more logical CPUs "
            f"(ray.num_cpus ≥ {used + per_system:g}; only one partition "
            "trains at a time) or use fewer rl.partition_seeds"
        )


def _engine(env: gym.Env) -> Any:
    """The system an env steps (None before its first reset)."""
    backend = env.unwrapped._backend  # type: ignore[attr-defined]  # gymnasium: unwrapped is an Env
    return getattr(backend, "system", backend)
