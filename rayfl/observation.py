"""The engine's observation: one schema, its spaces, its history, and the run context.

Every scheduling decision (a star round, one edge of the hierarchy, one D2D
target) sees one observation table of one *unit*: N rows (the unit's clients,
devices or candidate neighbors) and K subchannels. The table's keys, shapes,
units and bounds are written once, in :data:`FIELDS`; the Gymnasium spaces
(:func:`observation_space`), the :class:`Observation` type and the docs are
read from it.

| key | dtype | shape | unit | low | high | meaning |
|---|---|---|---|---|---|---|
| channel_gain | float32 | (N, K) | dB | −inf | inf | gain of row n on subchannel k (−inf: closed subchannel) |
| eligible | float32 | (N,) | – | 0 | 1 | 1 if row n may be scheduled this round |
| loss | float32 | (N,) | nats | 0 | inf | last training loss row n reported |
| upload_count | float32 | (N,) | count | 0 | inf | uploads row n has made |
| privacy_spent | float32 | (N,) | ε | 0 | inf | privacy loss row n has spent |
| staleness | float32 | (N,) | rounds | 0 | inf | rounds since row n's update last arrived |
| data_size | float32 | (N,) | samples | 0 | inf | training samples of row n |
| round | float32 | (1,) | – | 0 | inf | the round index |
| error_probability | float32 | (N,) | – | 0 | 1 | analytic packet-error probability of the link n → target |
| distance_m | float32 | (N,) | m | 0 | inf | distance of row n to the target |
| em_weight | float32 | (N,) | – | 0 | 1 | mixture weight of row n after the last round |
| selected | float32 | (N,) | – | 0 | 1 | 1 if row n was a neighbor in the last round |
| available | float32 | (N,) | – | 0 | 1 | 1 if the base station reaches row n this round |
| channel_age | float32 | (N,) | rounds | 0 | inf | rounds since row n's channel_gain was measured |
| compute_time_s | float32 | (N,) | s | 0 | inf | row n's local training time d^lo = τ·abs(D_n)·Φ/f_n |

The first eight are the *core* keys (:data:`CORE_KEYS`), the next four the
device-to-device *extras* (:data:`EXTRA_KEYS`), the last three the star's
*moving-world* keys (:data:`MOVING_KEYS`, issue 48), present only when the config
enables their model (:func:`rayfl.star.moving.moving_keys`). Each topology plug-in
declares the keys it fills (``observation_keys``) and the action parts it can take
(``action_parts``; :mod:`rayfl.topology`); a policy that reads only keys a
topology fills runs there.

:class:`SystemContext` is what a policy may know beyond the observation (model
size, link and privacy constants, the run seed), given at construction
(``Policy(..., context=...)``). :class:`ObservationTracker` keeps the per-row
history (last loss, staleness, uploads, last selection) so every caller observes
the same thing and a resume restores it.

Example:
    >>> space = observation_space(("channel_gain", "eligible", "round"), 3, 2)
    >>> space["channel_gain"].shape, space["round"].shape
    ((3, 2), (1,))
    >>> unit_shape(space)
    (3, 2)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from rayfl.seeding import rng_for

__all__ = [
    "ACTION_PARTS",
    "CORE_KEYS",
    "EXTRA_KEYS",
    "MOVING_KEYS",
    "FIELDS",
    "Field",
    "LinkConstants",
    "Observation",
    "ObservationTracker",
    "PrivacyConstants",
    "SystemContext",
    "TrainingConstants",
    "observation_space",
    "unit_shape",
]

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Field:
    """One key of the observation table.

    Attributes:
        key: The observation key.
        shape: ``"NK"`` (one value per row and subchannel), ``"N"`` (per row)
            or ``"1"`` (one value).
        unit: Physical unit, for the docs (``"-"`` when dimensionless).
        low: Lower bound of the space.
        high: Upper bound of the space.
        meaning: One line for the docs.
    """

    key: str
    shape: str
    unit: str
    low: float
    high: float
    meaning: str

    def dims(self, num_rows: int, num_subchannels: int) -> tuple[int, ...]:
        """Return the concrete shape for N = ``num_rows`` and K = ``num_subchannels``."""
        return {
            "NK": (num_rows, num_subchannels),
            "N": (num_rows,),
            "1": (1,),
        }[self.shape]

    def space(self, num_rows: int, num_subchannels: int) -> spaces.Box:
        """Return the float32 ``Box`` of this key for one unit."""
        return spaces.Box(
            np.float32(self.low),
            np.float32(self.high),
            shape=self.dims(num_rows, num_subchannels),
            dtype=np.float32,
        )


_INF = math.inf

#: The schema, in table order (core keys first).
FIELDS: dict[str, Field] = {
    f.key: f
    for f in (
        Field("channel_gain", "NK", "dB", -_INF, _INF, "gain of row n on subchannel k"),
        Field("eligible", "N", "-", 0.0, 1.0, "1 if row n may be scheduled"),
        Field("loss", "N", "nats", 0.0, _INF, "last training loss of row n"),
        Field("upload_count", "N", "count", 0.0, _INF, "uploads row n has made"),
        Field("privacy_spent", "N", "epsilon", 0.0, _INF, "privacy loss of row n"),
        Field("staleness", "N", "rounds", 0.0, _INF, "rounds since row n arrived"),
        Field("data_size", "N", "samples", 0.0, _INF, "training samples of row n"),
        Field("round", "1", "-", 0.0, _INF, "the round index"),
        Field("error_probability", "N", "-", 0.0, 1.0, "packet-error probability"),
        Field("distance_m", "N", "m", 0.0, _INF, "distance of row n to the target"),
        Field("em_weight", "N", "-", 0.0, 1.0, "mixture weight of row n"),
        Field("selected", "N", "-", 0.0, 1.0, "1 if row n was a neighbor last round"),
        Field("available", "N", "-", 0.0, 1.0, "1 if row n is reachable"),
        Field("channel_age", "N", "rounds", 0.0, _INF, "age of row n's channel_gain"),
        Field("compute_time_s", "N", "s", 0.0, _INF, "local training time of row n"),
    )
}

#: Keys every topology fills (in the engine's target design).
CORE_KEYS: tuple[str, ...] = (
    "channel_gain",
    "eligible",
    "loss",
    "upload_count",
    "privacy_spent",
    "staleness",
    "data_size",
    "round",
)
#: Keys only the device-to-device topology fills.
EXTRA_KEYS: tuple[str, ...] = (
    "error_probability",
    "distance_m",
    "em_weight",
    "selected",
)
#: Keys of the star's moving world (issue 48), each only when its model is on.
MOVING_KEYS: tuple[str, ...] = ("available", "channel_age", "compute_time_s")

#: The parts an action may have: a client set without subchannels
#: (``participants``, ``MultiBinary(N)``), a subchannel assignment
#: (``MultiDiscrete([N + 1] * K)``), power levels and per-client controls.
ACTION_PARTS: tuple[str, ...] = ("participants", "assignment", "power", "controls")


class Observation(TypedDict, total=False):
    """One unit's observation (all arrays float32; see :data:`FIELDS`)."""

    channel_gain: F32
    eligible: F32
    loss: F32
    upload_count: F32
    privacy_spent: F32
    staleness: F32
    data_size: F32
    round: F32
    error_probability: F32
    distance_m: F32
    em_weight: F32
    selected: F32
    available: F32
    channel_age: F32
    compute_time_s: F32


def observation_space(
    keys: Iterable[str], num_rows: int, num_subchannels: int
) -> spaces.Dict:
    """Return the ``Dict`` space of one unit's observation.

    Args:
        keys: Keys of :data:`FIELDS` (the order is kept).
        num_rows: N, rows of the unit.
        num_subchannels: K, subchannels of the unit.

    Raises:
        ValueError: For a key not in :data:`FIELDS` or N, K < 1.
    """
    keys = tuple(keys)
    unknown = [k for k in keys if k not in FIELDS]
    if unknown:
        raise ValueError(
            f"unknown observation keys {unknown}; known: {', '.join(FIELDS)}"
        )
    if num_rows < 1 or num_subchannels < 1:
        raise ValueError(
            f"an observation needs N >= 1 rows and K >= 1 subchannels, "
            f"got N={num_rows}, K={num_subchannels}"
        )
    return spaces.Dict(
        {k: FIELDS[k].space(int(num_rows), int(num_subchannels)) for k in keys}
    )


def unit_shape(space: spaces.Space[Any]) -> tuple[int, int | None]:
    """Return (N, K) of an observation space; K is None without ``channel_gain``.

    N comes from ``channel_gain`` (N, K) if present, else from ``eligible`` (N,).

    Raises:
        ValueError: If ``space`` is not a ``Dict`` of ``Box`` es with one of
            those keys, or their shapes disagree with the schema.
    """
    if not isinstance(space, spaces.Dict):
        raise ValueError(f"observation_space must be a gymnasium Dict, got {space!r}")
    boxes = space.spaces
    if "channel_gain" in boxes:
        if not isinstance(boxes["channel_gain"], spaces.Box):
            raise ValueError("observation_space['channel_gain'] must be a Box")
        shape = tuple(boxes["channel_gain"].shape or ())
        if len(shape) != 2 or min(shape) < 1:
            raise ValueError(
                f"observation_space['channel_gain'] must be (N, K), got {shape}"
            )
        return int(shape[0]), int(shape[1])
    if "eligible" in boxes and isinstance(boxes["eligible"], spaces.Box):
        shape = tuple(boxes["eligible"].shape or ())
        if len(shape) == 1 and shape[0] >= 1:
            return int(shape[0]), None
    raise ValueError(
        "observation_space needs a Box under 'channel_gain' (N, K) or "
        f"'eligible' (N,); has keys {sorted(boxes)}"
    )


# --------------------------------------------------------------------- history
class ObservationTracker:
    """Per-row history of one unit: last loss, staleness, uploads, last selection.

    Args:
        num_rows: N.
        initial_loss: Loss every row starts with (e.g. the initial model's test
            loss); a scalar or (N,).

    Attributes:
        loss: (N,) last finite training loss each row reported.
        staleness: (N,) rounds since each row's update last arrived.
        upload_count: (N,) updates that arrived from each row.
        selected: (N,) 1 if the row was chosen in the last round.
    """

    def __init__(self, num_rows: int, initial_loss: float | npt.ArrayLike = 0.0):
        n = int(num_rows)
        self.loss = np.broadcast_to(
            np.asarray(initial_loss, dtype=np.float64), (n,)
        ).copy()
        self.staleness = np.zeros(n)
        self.upload_count = np.zeros(n)
        self.selected = np.zeros(n)

    def update(
        self,
        chosen: Sequence[int] | npt.ArrayLike,
        delivered: Sequence[int] | npt.ArrayLike,
        losses: Mapping[int, float] | None = None,
    ) -> None:
        """Record one finished round.

        Args:
            chosen: Rows scheduled this round.
            delivered: Rows whose update arrived (staleness resets to 0).
            losses: Training loss per delivered row; non-finite values are
                ignored (the row keeps its last loss).
        """
        delivered = np.asarray(delivered, dtype=np.int64).reshape(-1)
        for row, value in (losses or {}).items():
            if np.isfinite(value):
                self.loss[int(row)] = float(value)
        self.staleness += 1
        self.staleness[delivered] = 0
        self.upload_count[delivered] += 1
        self.selected[:] = 0
        self.selected[np.asarray(chosen, dtype=np.int64).reshape(-1)] = 1

    def record(
        self, rows: Sequence[Mapping[str, Any]], delivered: Sequence[int]
    ) -> None:
        """Record one round from its rows (``client``, ``delivered``, ``train_loss``)."""
        losses = {
            int(r["client"]): r.get("train_loss", math.nan)
            for r in rows
            if r.get("delivered")
        }
        self.update([int(r["client"]) for r in rows], delivered, losses)

    def fields(self) -> dict[str, F32]:
        """Return the tracked keys as float32 observation entries."""
        return {
            "loss": np.maximum(self.loss, 0).astype(np.float32),
            "staleness": self.staleness.astype(np.float32),
            "upload_count": self.upload_count.astype(np.float32),
            "selected": self.selected.astype(np.float32),
        }

    def state_dict(self) -> dict[str, list[float]]:
        """Return the history as plain lists (for a checkpoint)."""
        return {
            "loss": self.loss.tolist(),
            "staleness": self.staleness.tolist(),
            "upload_count": self.upload_count.tolist(),
            "selected": self.selected.tolist(),
        }

    def load_state_dict(self, state: Mapping[str, Sequence[float]]) -> None:
        """Restore a :meth:`state_dict`.

        Raises:
            ValueError: If a length differs from N.
        """
        for name in ("loss", "staleness", "upload_count", "selected"):
            values = np.asarray(state[name], dtype=np.float64)
            if values.shape != self.loss.shape:
                raise ValueError(
                    f"tracker state {name!r} has {values.size} rows, "
                    f"expected {self.loss.size}"
                )
            setattr(self, name, values.copy())


# --------------------------------------------------------------------- context
@dataclass(frozen=True)
class LinkConstants:
    """Constants of the unit's radio links (None fields: not modelled).

    Attributes:
        bandwidth_hz: B, one subchannel [Hz].
        noise_psd_dbm_hz: N0 [dBm/Hz].
        tx_power_dbm: P^max of a client [dBm].
        bs_tx_power_dbm: Transmit power of the base station / server [dBm].
        qam_order: QAM order of the uplink modulation.
        bits_per_element: Bits per transmitted model element.
        max_latency_s: Latency bound of a round [s].
        downlink_latency: True if the round time includes the downlink.
        cpu_cycles_per_sample: Φ, cycles per training sample.
        cpu_frequency_hz: f, client CPU frequency [Hz].
        effective_capacitance: χ, switched capacitance of the CPU.
        round_deadline_s: D, deadline on computation + airtime [s] (issue 48).
        fading_rho: ρ, lag-1 correlation of the fading (0: i.i.d., 1: none).
        rician_k: Rician K-factor, linear (0: Rayleigh or no fading).
        upload_bits: Z, expected bits of one upload at the model size.
        airtime_model: The run's airtime d^up [s] at a linear gain (uplink_airtime_s).
    """

    bandwidth_hz: float
    noise_psd_dbm_hz: float
    tx_power_dbm: float
    bs_tx_power_dbm: float | None = None
    qam_order: int | None = None
    bits_per_element: int | None = None
    max_latency_s: float | None = None
    downlink_latency: bool = False
    cpu_cycles_per_sample: float | None = None
    cpu_frequency_hz: float | None = None
    effective_capacitance: float | None = None
    round_deadline_s: float | None = None
    fading_rho: float | None = None
    rician_k: float | None = None
    upload_bits: float | None = None
    airtime_model: Callable[..., Any] | None = None


@dataclass(frozen=True)
class PrivacyConstants:
    """Privacy constants of the run (None: the run does not say).

    Attributes:
        clip_norm: C, the clipping norm (None: no clipping).
        noise_std: σ_DP of an upload's Gaussian noise (the star's; 0: no DP).
        epsilon: Target ε.
        delta: δ.
        max_uploads: T0, uploads a client may make.
        participation_target: β_i per row (DP-SparFL eq. 12), or None.
    """

    clip_norm: float | None = None
    noise_std: float | None = None
    epsilon: float | None = None
    delta: float | None = None
    max_uploads: int | None = None
    participation_target: tuple[float, ...] | None = None


@dataclass(frozen=True)
class TrainingConstants:
    """Local-training constants of the run.

    Attributes:
        local_steps: τ, local SGD steps per round (None: epochs instead).
        local_epochs: Passes over the data per round when ``local_steps`` is None.
        batch_size: Mini-batch size.
        lr: Learning rate.
        sparsity: Fraction of coordinates an upload keeps when no policy sets
            it (``algorithm.sparsity`` or ``compression.sparsify_fraction``).
    """

    local_steps: int | None = None
    local_epochs: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    sparsity: float | None = None


@dataclass(frozen=True)
class SystemContext:
    """What a policy may know about the run beyond the observation.

    Built by the engine for each decision unit and given to the policy at
    construction (``Policy(observation_space, action_space, context=...)``). A
    parameter the user passes wins over the context; the context wins over the
    policy's own default.

    Attributes:
        topology: The run's topology (the plug-in's ``name``).
        unit: Index of the unit (edge c, target n; 0 for the star).
        num_units: Number of units.
        seed: Run seed.
        rounds: T, rounds of the run.
        model_dim: abs(w), parameters of the model.
        link: Link constants, or None with ideal links.
        privacy: Privacy constants.
        training: Local-training constants.
        selection_epsilon: ε of the D2D channel-threshold selection, or None.

    Example:
        >>> ctx = SystemContext(topology="star", seed=3, rounds=10, model_dim=100)
        >>> int(ctx.rng("schedule", round=2).integers(100)) == int(
        ...     ctx.rng("schedule", round=2).integers(100))
        True
    """

    topology: str
    seed: int
    rounds: int
    model_dim: int
    unit: int = 0
    num_units: int = 1
    link: LinkConstants | None = None
    privacy: PrivacyConstants = field(default_factory=PrivacyConstants)
    training: TrainingConstants = field(default_factory=TrainingConstants)
    selection_epsilon: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.topology, str) or not self.topology:
            raise ValueError(
                "SystemContext.topology must name a registered topology; "
                f"got {self.topology!r}"
            )
        if not 0 <= self.unit < self.num_units:
            raise ValueError(
                f"SystemContext.unit must be in [0, {self.num_units}), got {self.unit}"
            )

    def rng(
        self, purpose: str, *, round: int | None = None, client: int | None = None
    ) -> np.random.Generator:
        """Return the run's keyed generator ``rng_for(seed, purpose, round, client)``.

        Args:
            purpose: A purpose of :data:`rayfl.seeding.PURPOSES`.
            round: Round key (None: 0).
            client: Client key (None: 0).
        """
        return rng_for(
            self.seed,
            purpose,
            round=0 if round is None else int(round),
            client=0 if client is None else int(client),
        )

    def replace(self, **changes: Any) -> SystemContext:
        """Return a copy with ``changes`` (e.g. another ``unit``)."""
        return dataclasses.replace(self, **changes)
