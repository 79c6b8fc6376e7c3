"""Scheduling-policy base class and the helpers every policy shares.

A policy maps one observation of a decision unit (the star's cell, one edge of
the hierarchy, one D2D target) to one action: which client transmits on which
uplink subchannel and, for a ``Dict`` action space, at which power level; or,
for a ``MultiBinary(N)`` action space, only which clients take part (the
engine then gives the subchannels). Every policy in this package subclasses
:class:`Policy` and implements :meth:`Policy.schedule` (the assignment) and/or
:meth:`Policy.participants` (the client set).

Symbol table (the observation table of :mod:`rayfl.observation`): N →
``num_clients``, K → ``num_subchannels``, L → ``num_power_levels``, h_{n,k} [dB]
→ ``obs["channel_gain"][n, k]``, a_{n,k} = 1 → ``assignment[k] == n`` (N = idle).

Implementation details:
    1. Subchannel matching and the action rules are the pure functions of
       :mod:`policies.assignment`; the methods here only bind N and K.
    2. Policies own their generator (``np_random``), never the global one.
    3. N and K are read from the observation space through
       :func:`rayfl.observation.unit_shape`, the schema's own reader.
    4. A parameter the run also knows (a link constant, abs(w)) defaults to
       None and is resolved by :func:`run_constants`: the value passed, else the
       run's (from the :class:`~rayfl.observation.SystemContext`), else the
       policy's documented default. Every policy resolves them this one way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, cast

import numpy as np
import numpy.typing as npt
from annotated_types import Ge, Gt, Le
from gymnasium import spaces

from policies.assignment import assign_subchannels, check_assignment
from rayfl.observation import SystemContext, unit_shape

Observation = Mapping[str, Any]
Action = npt.NDArray[np.int64] | dict[str, npt.NDArray[Any]]

# Parameter ranges, declared in the constructors' signatures: the config's
# validation (``rayfl.registry.check_params``) refuses a value outside them before
# a run starts; the constructors check them too when called directly.
Positive = Annotated[float, Gt(0)]
NonNegative = Annotated[float, Ge(0)]
Fraction = Annotated[float, Gt(0), Le(1)]  # (0, 1]
Probability = Annotated[float, Ge(0), Le(1)]  # [0, 1]
Count = Annotated[int, Ge(1)]
Natural = Annotated[int, Ge(0)]

_ACTION_KEYS = ("assignment", "power", "controls")


class _AnyTopology:
    """``Policy.topologies`` when a class declares none: every registered topology.

    Read when asked (a class attribute descriptor), so a topology registered at
    run time (:func:`rayfl.registry.register_topology`) counts too.
    """

    def __get__(self, instance: Any, owner: type | None = None) -> frozenset[str]:
        from rayfl.registry import topology_names

        return frozenset(topology_names())


class Policy:
    """Base class of scheduling policies: ``policy(obs) -> action``.

    Subclasses set their own parameters, then call ``super().__init__`` (which
    calls :meth:`reset`), and implement :meth:`schedule` (action part
    ``assignment``) and/or :meth:`participants` (action part ``participants``).

    Args:
        observation_space: The unit's observation space (a ``Dict`` of the
            keys of :data:`rayfl.observation.FIELDS`).
        action_space: ``MultiDiscrete([N + 1] * K)``, a ``Dict`` with
            ``"assignment"`` (plus ``"power"``, ``"controls"``), or
            ``MultiBinary(N)`` for a client set without subchannels.
        context: Run constants (:class:`rayfl.observation.SystemContext`) the
            policy may fill its unset parameters from; None when unknown.

    Attributes:
        topologies: Values of ``topology.kind`` the rule is meant for (undeclared:
            every registered topology, read when asked).
        required_keys: Observation keys the rule reads (validated at init).
        action_parts: Action parts the rule can fill (see
            :func:`rayfl.registry.check_policy`).
        optional_parts: Parts it fills when offered and does without otherwise.
        extra_params: Keyword parameters the constructor takes through
            ``**kwargs`` (name → type), beyond its signature; with the signature
            they are what a config may pass in ``scheduler.params``
            (:func:`rayfl.registry.check_params`).
        fixed_params: Parameters of a parent's constructor that the class sets
            itself, so a config may not pass them.
        allows_idle: True if the rule may leave subchannels idle although at
            least K clients are eligible (no shipped policy does).
        tunable: The numeric parameters worth tuning per scenario
            (``rayfl bench policies --self-tune``): name → (default, low, high),
            the constructor's default and the range of valid values the
            search stays in (empty: nothing to tune). A bound of 0 the
            constructor refuses (``lyapunov``'s V > 0) is never tried: the
            search multiplies the default by 0.2 to 2, then by 2 or ½.
        num_clients: N, from the observation space.
        num_subchannels: K, or 0 for a ``participants`` decision without
            ``channel_gain``.
        num_power_levels: L, or None if the action space has no ``"power"``.
        context: The :class:`~rayfl.observation.SystemContext`, or None.
        np_random: The policy's own generator, set by :meth:`reset`.
    """

    topologies: ClassVar[frozenset[str]] = cast(Any, _AnyTopology())
    required_keys: ClassVar[tuple[str, ...]] = ("channel_gain", "eligible")
    action_parts: ClassVar[frozenset[str]] = frozenset({"assignment"})
    optional_parts: ClassVar[frozenset[str]] = frozenset({"power"})
    extra_params: ClassVar[Mapping[str, Any]] = {}
    fixed_params: ClassVar[frozenset[str]] = frozenset()
    tunable: ClassVar[Mapping[str, tuple[float, float, float]]] = {}
    allows_idle: bool = False

    def __init__(
        self,
        observation_space: spaces.Space[Any],
        action_space: spaces.Space[Any],
        *,
        context: SystemContext | None = None,
        **params: Any,
    ) -> None:
        if params:
            raise TypeError(
                f"{type(self).__name__} got unknown parameters {sorted(params)}"
            )
        self.observation_space = observation_space
        self.action_space = action_space
        self.context = context
        self.num_clients, num_subchannels = _read_observation_space(
            observation_space, self.required_keys
        )
        #: K; 0 when the observation has no ``channel_gain`` (client sets only)
        self.num_subchannels: int = num_subchannels or 0
        self.decides_participants = isinstance(action_space, spaces.MultiBinary)
        if self.decides_participants:
            if "participants" not in self.action_parts:
                raise ValueError(
                    f"{type(self).__name__} assigns subchannels; a MultiBinary "
                    "action space (participants only) does not fit it"
                )
            if action_space.shape != (self.num_clients,):
                raise ValueError(
                    f"participants action space must be MultiBinary({self.num_clients}),"
                    f" got {action_space!r}"
                )
            self.num_power_levels = None
        else:
            if "assignment" not in self.action_parts:
                raise ValueError(
                    f"{type(self).__name__} chooses participants only; its action "
                    f"space must be MultiBinary(N), got {action_space!r}"
                )
            if not self.num_subchannels:
                raise ValueError(
                    f"{type(self).__name__} needs 'channel_gain' (N, K) in the "
                    "observation space to assign subchannels"
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
        if self.decides_participants:
            return cast(Action, self._participants_action(obs))
        assignment = self.schedule(obs)
        check_assignment(
            assignment, self.eligible_mask(obs), require_full=not self.allows_idle
        )
        return self.to_action(assignment)

    def schedule(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Return the (K,) assignment for ``obs``; ``num_clients`` marks idle."""
        raise NotImplementedError(f"{type(self).__name__} must implement schedule(obs)")

    def participants(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Return the ids of the clients that take part (action part ``participants``)."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement participants(obs)"
        )

    def _participants_action(self, obs: Observation) -> npt.NDArray[np.int8]:
        chosen = np.asarray(self.participants(obs), dtype=np.int64).reshape(-1)
        if np.unique(chosen).size != chosen.size:
            raise ValueError(f"participants repeat a client: {chosen.tolist()}")
        eligible = self.eligible_mask(obs)
        if chosen.size and (
            chosen.min() < 0
            or chosen.max() >= self.num_clients
            or not eligible[chosen].all()
        ):
            raise ValueError(f"participants include an ineligible client: {chosen}")
        mask = np.zeros(self.num_clients, dtype=self.action_space.dtype)
        mask[chosen] = 1
        return mask

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
        expected: tuple[int, ...] = (self.num_clients,)
        if key == "channel_gain":
            expected = (self.num_clients, self.num_subchannels)
        elif key == "round":
            expected = (1,)
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


def run_constants(
    given: Mapping[str, Any], run: Mapping[str, Any], defaults: Mapping[str, Any]
) -> dict[str, Any]:
    """Resolve each constant in ``defaults``: given > the run's > the default.

    Args:
        given: The values passed to the policy; None = not passed.
        run: The values the run's context supplies; a key present (even with
            value None, e.g. "no downlink") counts, an absent key does not.
        defaults: Every constant's default (its name → value).

    Returns:
        One value per name of ``defaults``.

    Example:
        >>> run_constants({"a": None, "b": 2}, {"a": 5, "b": 6}, {"a": 0, "b": 0, "c": 1})
        {'a': 5, 'b': 2, 'c': 1}
    """
    out = {}
    for name, default in defaults.items():
        value = given.get(name)
        if value is None:
            value = run.get(name, default)
        out[name] = value
    return out


def context_constants(context: SystemContext) -> dict[str, Any]:
    """The run constants ``context`` supplies, under the policies' parameter names.

    Only what the run says is present: ``model_dim`` (abs(w)); from
    ``context.link``: ``bandwidth_hz``, ``noise_psd_dbm_hz``, ``tx_power_dbm``,
    ``downlink_power_dbm`` (the base station's power when the round time
    includes the downlink, else None), and, when the link gives them,
    ``cycles_per_sample``, ``cpu_freq_hz``, ``effective_capacitance``; from
    ``context.training`` in step mode: ``compute_samples`` = τ·abs(b).
    """
    values: dict[str, Any] = {"model_dim": int(context.model_dim)}
    link = context.link
    if link is not None:
        downlink = link.downlink_latency and link.bs_tx_power_dbm is not None
        values.update(
            bandwidth_hz=link.bandwidth_hz,
            noise_psd_dbm_hz=link.noise_psd_dbm_hz,
            tx_power_dbm=link.tx_power_dbm,
            downlink_power_dbm=link.bs_tx_power_dbm if downlink else None,
        )
        for name, value in (
            ("cycles_per_sample", link.cpu_cycles_per_sample),
            ("cpu_freq_hz", link.cpu_frequency_hz),
            ("effective_capacitance", link.effective_capacitance),
        ):
            if value is not None:
                values[name] = value
    training = context.training
    if training.local_steps and training.batch_size:
        values["compute_samples"] = training.local_steps * training.batch_size
    return values


def _read_observation_space(
    space: spaces.Space[Any], keys: tuple[str, ...]
) -> tuple[int, int | None]:
    num_clients, num_subchannels = unit_shape(space)
    boxes = cast(spaces.Dict, space).spaces
    for key in keys:
        if key not in boxes or not isinstance(boxes[key], spaces.Box):
            raise ValueError(
                f"observation_space needs a Box under {key!r}; has keys {sorted(boxes)}"
            )
        expected = {"channel_gain": (num_clients, num_subchannels), "round": (1,)}
        if boxes[key].shape != expected.get(key, (num_clients,)):
            raise ValueError(
                f"observation_space[{key!r}] has shape {boxes[key].shape}, "
                f"expected {expected.get(key, (num_clients,))}"
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
