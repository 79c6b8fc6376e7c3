"""Scheduling-policy base class and the helpers every policy shares.

A policy maps one observation of the scheduling env to one action: which client
transmits on which uplink subchannel and, for a ``Dict`` action space, at which
power level. Every policy in this package subclasses :class:`Policy` and only
implements :meth:`Policy.schedule`, the rule that returns the assignment.

Symbol table (the env's observation table): N → ``num_clients``, K →
``num_subchannels``, L → ``num_power_levels``, h_{n,k} [dB] →
``obs["channel_gain"][n, k]``, a_{n,k} = 1 → ``assignment[k] == n`` (N = idle).

Implementation details:
    1. Subchannel matching and the action rules are the pure functions of
       :mod:`policies.assignment`; the methods here only bind N and K.
    2. Policies own their generator (``np_random``), never the global one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, cast

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from policies.assignment import assign_subchannels, check_assignment

Observation = Mapping[str, Any]
Action = npt.NDArray[np.int64] | dict[str, npt.NDArray[np.int64]]

_ACTION_KEYS = ("assignment", "power", "controls")


class Policy:
    """Base class of scheduling policies: ``policy(obs) -> action``.

    Subclasses set their own parameters, then call ``super().__init__`` (which
    calls :meth:`reset`), and implement :meth:`schedule`.

    Attributes:
        required_keys: Observation keys the rule reads (validated at init).
        allows_idle: True if the rule may leave subchannels idle although at
            least K clients are eligible (no shipped policy does).
        num_clients: N, from ``observation_space["channel_gain"]``.
        num_subchannels: K.
        num_power_levels: L, or None if the action space has no ``"power"``.
        np_random: The policy's own generator, set by :meth:`reset`.
    """

    required_keys: ClassVar[tuple[str, ...]] = ("channel_gain", "eligible")
    allows_idle: ClassVar[bool] = False

    def __init__(
        self,
        observation_space: spaces.Space[Any],
        action_space: spaces.Space[Any],
        **params: Any,
    ) -> None:
        if params:
            raise TypeError(
                f"{type(self).__name__} got unknown parameters {sorted(params)}"
            )
        self.observation_space = observation_space
        self.action_space = action_space
        self.num_clients, self.num_subchannels = _read_observation_space(
            observation_space, self.required_keys
        )
        self.num_power_levels = _read_action_space(
            action_space, self.num_clients, self.num_subchannels
        )
        self.np_random = np.random.default_rng()
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        """Reset the policy's state and seed ``self.np_random``.

        Args:
            seed: Seed of the policy's generator; None draws fresh OS entropy.
        """
        self.np_random = np.random.default_rng(seed)

    def __call__(self, obs: Observation) -> Action:
        """Return the action for one observation (checked against the rules)."""
        for key in self.required_keys:
            self._check_shape(key, np.shape(obs[key]) if key in obs else None, obs)
        assignment = self.schedule(obs)
        check_assignment(
            assignment, self.eligible_mask(obs), require_full=not self.allows_idle
        )
        return self.to_action(assignment)

    def schedule(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Return the (K,) assignment for ``obs``; ``num_clients`` marks idle."""
        raise NotImplementedError(f"{type(self).__name__} must implement schedule(obs)")

    def field(self, obs: Observation, key: str) -> npt.NDArray[np.float64]:
        """Return ``obs[key]`` as float64, checking its shape (N,) or (N, K)."""
        if key not in obs:
            self._check_shape(key, None, obs)
        value = np.asarray(obs[key], dtype=np.float64)
        self._check_shape(key, value.shape, obs)
        return value

    def _check_shape(
        self, key: str, shape: tuple[int, ...] | None, obs: Observation
    ) -> None:
        if shape is None:
            raise ValueError(f"observation has no key {key!r}; got {sorted(obs)}")
        expected: tuple[int, ...] = (self.num_clients, self.num_subchannels)
        expected = expected if key == "channel_gain" else expected[:1]
        if shape != expected:
            raise ValueError(
                f"observation[{key!r}] has shape {shape}, expected {expected}"
            )

    def eligible_mask(self, obs: Observation) -> npt.NDArray[np.bool_]:
        """Return the (N,) bool mask of clients that may upload this round."""
        return self.field(obs, "eligible") > 0.5

    def assign_subchannels(
        self, gain_db: npt.ArrayLike, clients: npt.ArrayLike
    ) -> npt.NDArray[np.int64]:
        """Hungarian matching of ``clients`` to subchannels maximising Σ gain [dB]."""
        return assign_subchannels(gain_db, clients, idle=self.num_clients)

    def to_action(self, assignment: npt.ArrayLike) -> Action:
        """Build the action for this action space; power (if any) at level L - 1."""
        values = np.asarray(assignment, dtype=np.int64)
        if values.shape != (self.num_subchannels,):
            raise ValueError(
                f"assignment has shape {values.shape}, "
                f"expected ({self.num_subchannels},)"
            )
        if isinstance(self.action_space, spaces.MultiDiscrete):
            return values.astype(self.action_space.dtype)
        space = cast(spaces.Dict, self.action_space)
        action = {"assignment": values.astype(space["assignment"].dtype)}
        if self.num_power_levels is not None:
            power_dtype = space["power"].dtype
            action["power"] = np.full(
                self.num_subchannels, self.num_power_levels - 1, dtype=power_dtype
            )
        return action


def _read_observation_space(
    space: spaces.Space[Any], keys: tuple[str, ...]
) -> tuple[int, int]:
    if not isinstance(space, spaces.Dict):
        raise ValueError(f"observation_space must be a gymnasium Dict, got {space!r}")
    for key in ("channel_gain", *keys):
        if key not in space.spaces or not isinstance(space[key], spaces.Box):
            raise ValueError(
                f"observation_space needs a Box under {key!r}; "
                f"has keys {sorted(space.spaces)}"
            )
    shape = tuple(space["channel_gain"].shape or ())
    if len(shape) != 2 or min(shape) < 1:
        raise ValueError(
            f"observation_space['channel_gain'] must be (N, K), got {shape}"
        )
    num_clients, num_subchannels = shape
    for key in keys:
        if key != "channel_gain" and space[key].shape != (num_clients,):
            raise ValueError(
                f"observation_space[{key!r}] has shape {space[key].shape}, "
                f"expected ({num_clients},)"
            )
    return num_clients, num_subchannels


def _read_action_space(
    space: spaces.Space[Any], num_clients: int, num_subchannels: int
) -> int | None:
    expected = f"MultiDiscrete([{num_clients + 1}] * {num_subchannels})"
    if isinstance(space, spaces.Dict) and (
        "assignment" not in space.spaces or set(space.spaces) - set(_ACTION_KEYS)
    ):
        raise ValueError(
            "Dict action_space keys must be 'assignment' plus optional 'power', "
            f"'controls'; got {sorted(space.spaces)}"
        )
    assignment = space["assignment"] if isinstance(space, spaces.Dict) else space
    if not (
        isinstance(assignment, spaces.MultiDiscrete)
        and assignment.shape == (num_subchannels,)
        and np.all(assignment.nvec == num_clients + 1)
        and np.all(assignment.start == 0)
    ):
        raise ValueError(
            f"action assignment space must be {expected}, got {assignment!r}"
        )
    if not isinstance(space, spaces.Dict) or "power" not in space.spaces:
        return None
    power = space["power"]
    if not (
        isinstance(power, spaces.MultiDiscrete)
        and power.shape == (num_subchannels,)
        and np.all(power.nvec == power.nvec.flat[0])
        and np.all(power.start == 0)
    ):
        raise ValueError(
            f"action_space['power'] must be MultiDiscrete([L] * {num_subchannels}), "
            f"got {power!r}"
        )
    return int(power.nvec.flat[0])
