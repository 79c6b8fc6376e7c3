"""Neighbor selection of a D2D target as a scheduling decision (pFedWN step 1).

The channel-measurement stage (CCM, Fig. 3 of pFedWN) at t = 0: nodes are placed,
the path-loss gains and the analytic error probabilities P_s^err of every link
s → target are computed (:mod:`rayfl.wireless.d2d_error`), and a scheduling
policy (``policies``, default ``channel_threshold``) picks the selected
neighbors M_n from the target's observation, through the same ``policy(obs) ->
action`` interface as the OFDMA scheduling env. The observation has the keys
the D2D plug-in's ``observation_keys`` (:mod:`rayfl.d2d.plugin`; the core and
extra keys of :mod:`rayfl.observation`), one row per node:

| key | shape | meaning | unit |
|-----|-------|---------|------|
| channel_gain | (N, F) | P ĥ² h̃_f² of link s → target on sub-channel f (one fading draw) | dB |
| eligible | (N,) | 1 for the neighbors G_n (every node but the target) | – |
| loss | (N,) | last train loss of s whose model reached the target (the target: its own) | nats |
| upload_count | (N,) | rounds the model of s reached the target | count |
| privacy_spent | (N,) | always 0 (no differential privacy in D2D runs) | ε |
| staleness | (N,) | rounds since the model of s last reached the target | rounds |
| data_size | (N,) | train samples of s | samples |
| round | (1,) | round index t | – |
| error_probability | (N,) | analytic P_s^err (1 for the target) | – |
| distance_m | (N,) | distance to the target (0 for the target) | m |
| em_weight | (N,) | π_s after the previous round (0 if not a neighbor) | – |
| selected | (N,) | 1 for last round's M_n | – |
| available | (N,) | 1 if node s can send this round (``topology.availability`` set) | – |
| compute_time_s | (N,) | d^lo_s = τ·abs(D_s)·Φ/f_s (a CPU law or ``round_deadline_s`` set) | s |

Action: ``MultiDiscrete([N + 1] * F)``, entry f is the neighbor sending on
sub-channel f or N (idle); the selected neighbors are the non-idle entries.

Implementation details:
    1. Geometry: N = ``data.num_clients`` nodes uniform in the square, from
       (seed, "d2d_geometry") (:func:`rayfl.d2d.layout.make_layout`); with
       ``topology.mobility`` they move, and round t's observation shows round
       t's ``distance_m``, ``error_probability`` and ``channel_gain``
       (:mod:`rayfl.d2d.motion`).
    2. The CCM fading draw of ``channel_gain`` comes from (seed, "d2d_link",
       round 0, client = target); per-round link draws use round t + 1.
    3. Selection happens once, at t = 0 (spec §2.4), unless
       ``selection_via: env`` asks the policy every round.
    4. ``loss`` is 0 until a row's first model arrives; a neighbor that trained
       but whose model was lost keeps its last loss (the target never saw it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.devices import device_keys
from rayfl.d2d.layout import D2DLayout, error_probabilities, make_layout
from rayfl.d2d.motion import D2DMotion
from rayfl.observation import (
    ObservationTracker,
    SystemContext,
    observation_space,
)
from rayfl.registry import build_policy, topology_of
from rayfl.seeding import rng_for
from rayfl.wireless.units import linear_to_db

__all__ = [
    "D2DLayout",
    "Selection",
    "decode_assignment",
    "make_layout",
    "pi_vector",
    "record_round",
    "reselect",
    "round_observation",
    "select_neighbors",
    "selection_observation",
    "selection_spaces",
    "selection_spaces_with_lead",
    "target_policy",
]

#: The D2D plug-in's name (``rayfl.d2d.plugin.D2D.name``).
TOPOLOGY = "d2d"


def selection_spaces(
    num_nodes: int, num_subchannels: int, extra_keys: Sequence[str] = ()
) -> tuple[spaces.Dict, spaces.MultiDiscrete]:
    """Return the (observation_space, action_space) of one target's decision.

    ``extra_keys``: the moving devices' keys
    (:func:`rayfl.d2d.devices.device_keys` of the topology).
    """
    keys = (*topology_of(TOPOLOGY).observation_keys, *extra_keys)
    return (
        observation_space(keys, num_nodes, num_subchannels),
        spaces.MultiDiscrete(np.full(num_subchannels, num_nodes + 1, dtype=np.int64)),
    )


def selection_spaces_with_lead(
    n: int, f: int, lead: tuple[int, ...], keys: tuple[str, ...] = ()
) -> tuple[spaces.Dict, spaces.MultiDiscrete]:
    """The target's spaces of :func:`selection_spaces` with a leading ``lead`` axis (one per target)."""
    obs, action = selection_spaces(n, f, keys)
    if not lead:
        return obs, action
    boxes: dict[str, spaces.Space[Any]] = {
        k: spaces.Box(
            np.broadcast_to(box.low, lead + box.shape),  # type: ignore[attr-defined, operator]  # gymnasium: Dict items are Space
            np.broadcast_to(box.high, lead + box.shape),  # type: ignore[attr-defined, operator]  # gymnasium: Dict items are Space
            dtype=np.float32,
        )
        for k, box in obs.spaces.items()
    }
    return spaces.Dict(boxes), spaces.MultiDiscrete(
        np.full(lead + (f,), n + 1, dtype=np.int64)
    )


def selection_observation(
    layout: D2DLayout,
    target: int,
    topology: D2DTopologyConfig,
    *,
    seed: int,
    motion: D2DMotion | None = None,
) -> tuple[dict[str, npt.NDArray[np.float32]], npt.NDArray[np.float64]]:
    """Build the CCM part of ``target``'s t = 0 observation.

    ``motion``: the run's (its cached t = 0 P^err, computed once per target
    for the observation, the selection and the link draws); None: computed
    here.

    Returns:
        ``channel_gain``, ``eligible``, ``error_probability`` and ``distance_m``
        (module table), and the float64 error probabilities (N,).
    """
    error = (
        error_probabilities(layout, target, topology)
        if motion is None
        else motion.error(0, target)
    )
    n = layout.num_nodes
    eligible = np.ones(n, dtype=np.float32)
    eligible[target] = 0.0
    obs = {
        "channel_gain": _gain_db(
            layout, topology, target, rng_for(seed, "d2d_link", client=target)
        ),
        "eligible": eligible,
        "error_probability": error.astype(np.float32),
        "distance_m": layout.distances_m[:, target].astype(np.float32),
    }
    return obs, error


def _gain_db(
    layout: D2DLayout,
    topology: D2DTopologyConfig,
    target: int,
    rng: np.random.Generator | None = None,
    *,
    fading: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.float32]:
    """(N, F) P ĥ² h̃_f² [dB] of every link s → target: ``fading`` or one draw from ``rng``."""
    shape = (layout.num_nodes, topology.num_subchannels)
    if fading is None:
        assert rng is not None
        fading = rng.exponential(topology.rayleigh_factor, size=shape)
    received = topology.tx_power_w * layout.path_gain[:, target, None] * fading
    gain_db = linear_to_db(received)
    gain_db[target] = -1e3  # the target does not send to itself
    return gain_db.astype(np.float32)


@dataclass(frozen=True)
class Selection:
    """The neighbors one target selected.

    Attributes:
        target: The target n.
        neighbors: M_n, ascending.
        subchannel: Sub-channel of each selected neighbor (same order).
        error_probability: (N,) P_s^err of every link s → n.
    """

    target: int
    neighbors: tuple[int, ...]
    subchannel: tuple[int, ...]
    error_probability: npt.NDArray[np.float64]


def select_neighbors(
    layout: D2DLayout,
    topology: D2DTopologyConfig,
    *,
    seed: int,
    data_size: npt.ArrayLike | None = None,
    name: str | None = None,
    params: Mapping[str, Any] | None = None,
    motion: D2DMotion | None = None,
) -> list[Selection]:
    """Run the selection policy of every target (:func:`target_policy`) at t = 0.

    ``data_size`` is the (N,) train sizes the observation shows (None: 0);
    ``name`` and ``params`` are the run's ``scheduler.policy`` (None: the D2D
    default) and ``scheduler.params``; ``motion`` the run's (its devices'
    round-0 availability and compute times; needed when the topology has them).
    """
    n = layout.num_nodes
    out = []
    for target in layout.targets:
        policy = target_policy(
            topology, n, target=target, seed=seed, name=name, params=params
        )
        first, error = selection_observation(
            layout, target, topology, seed=seed, motion=motion
        )
        obs = round_observation(
            layout,
            first,
            ObservationTracker(n),
            None,
            topology,
            data_size=np.zeros(n) if data_size is None else data_size,
            seed=seed,
            round=0,
            motion=motion,
        )
        chosen, _ = decode_assignment(policy(obs), obs["eligible"] > 0.5)
        neighbors = tuple(sorted(chosen))
        out.append(
            Selection(target, neighbors, tuple(chosen[s] for s in neighbors), error)
        )
    return out


def target_policy(
    topology: D2DTopologyConfig,
    num_nodes: int,
    *,
    target: int,
    seed: int,
    name: str | None = None,
    params: Mapping[str, Any] | None = None,
    spaces_: tuple[spaces.Dict, spaces.MultiDiscrete] | None = None,
) -> Any:
    """Build a target's selection policy, reset from (seed, "policy", target).

    The policy's context carries ``topology.epsilon`` as ``selection_epsilon``
    (``channel_threshold`` reads it when its ``epsilon`` is not given); its
    seed is the target's policy seed, so targets draw independent streams.

    Args:
        topology: The D2D topology section.
        num_nodes: N.
        target: The target n.
        seed: The run (episode) seed.
        name: A registered policy (the run's ``scheduler.policy``; None: the
            D2D plug-in's ``default_policy``).
        params: Its parameters (``scheduler.params``; None: none).
        spaces_: Its (observation, action) spaces, if the caller keeps them
            (None: :func:`selection_spaces`, built anew). The D2D lanes build
            one policy at a time, call it once and share their spaces.
    """
    if name is None:
        name = topology_of(TOPOLOGY).default_policy
    policy_seed = int(rng_for(seed, "policy", client=target).integers(2**31))
    context = SystemContext(
        topology=TOPOLOGY,
        seed=policy_seed,
        rounds=1,  # not known here; no D2D policy reads it
        model_dim=1,
        selection_epsilon=float(topology.epsilon),
    )
    return build_policy(
        name,
        selection_spaces(num_nodes, topology.num_subchannels, device_keys(topology))
        if spaces_ is None
        else spaces_,
        params=params,
        context=context,
        seed=policy_seed,
    )


def reselect(
    old: Selection,
    neighbors: tuple[int, ...],
    subchannel: tuple[int, ...],
    *,
    num_clients: int,
) -> Selection:
    """Return ``old``'s target with new neighbors M_n (ascending) and sub-channels.

    Raises:
        ValueError: On a repeated neighbor, the target itself or a client id
            out of range.
    """
    pairs = sorted(zip(neighbors, subchannel, strict=True))
    new = tuple(int(m) for m, _ in pairs)
    if len(set(new)) != len(new) or old.target in new:
        raise ValueError(
            f"neighbors of target {old.target} must be distinct other clients, "
            f"got {list(neighbors)}"
        )
    if any(not 0 <= m < num_clients for m in new):
        raise ValueError(f"neighbor ids must be in 0..{num_clients - 1}")
    return Selection(
        old.target, new, tuple(int(f) for _, f in pairs), old.error_probability
    )


def decode_assignment(
    action: Any, eligible: npt.NDArray[np.bool_]
) -> tuple[dict[int, int], list[tuple[int, int]]]:
    """Return a target's chosen neighbors (client → sub-channel) and the dropped entries.

    Args:
        action: (F,) ints, the neighbor on each sub-channel (N = idle), or a
            dict with that array under ``"assignment"``.
        eligible: (N,) the candidates G_n (every client but the target).

    Returns:
        Client → its (lowest) sub-channel, and the (sub-channel, client)
        entries dropped: a non-candidate or a repeat.

    Raises:
        ValueError: For an entry outside 0..N.

    Example:
        >>> decode_assignment(np.array([2, 0, 2, 3]), np.array([0, 1, 1], bool))
        ({2: 0}, [(1, 0), (2, 2)])
    """
    if isinstance(action, Mapping):
        action = action["assignment"]
    n = len(eligible)
    values = np.asarray(action).reshape(-1).tolist()
    if any(not 0 <= int(s) <= n for s in values):
        raise ValueError(f"action entries must be in 0..{n} ({n} = idle), got {values}")
    chosen: dict[int, int] = {}
    dropped: list[tuple[int, int]] = []
    for sub, s in enumerate(int(v) for v in values):
        if s == n:
            continue
        if not eligible[s] or s in chosen:
            dropped.append((sub, s))
            continue
        chosen[s] = sub
    return chosen, dropped


def pi_vector(
    num_nodes: int, neighbors: Sequence[int], pi: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Return π over all N nodes: ``pi`` at ``neighbors``, 0 elsewhere.

    Example:
        >>> pi_vector(4, [1, 3], [0.25, 0.75]).tolist()
        [0.0, 0.25, 0.0, 0.75]
    """
    out = np.zeros(num_nodes)
    if len(neighbors):
        out[list(neighbors)] = np.asarray(pi, dtype=np.float64)
    return out


def record_round(
    history: ObservationTracker,
    *,
    target: int,
    chosen: Sequence[int],
    arrived: Sequence[int],
    train_loss: Mapping[int, float],
) -> None:
    """Record one finished round in ``target``'s per-row history.

    Args:
        history: The target's tracker (N rows).
        target: The target n.
        chosen: M_n of the round.
        arrived: Neighbors whose model reached the target.
        train_loss: Client → train loss of the round (NaN or missing: none);
            only the target's own and the arrived ones are kept.
    """
    keep = (target, *arrived)
    losses = {int(c): float(train_loss[c]) for c in keep if c in train_loss}
    history.update(list(chosen), list(arrived), losses)


def round_observation(
    layout: D2DLayout,
    first: Mapping[str, npt.NDArray[np.float32]],
    history: ObservationTracker,
    em_weight: npt.ArrayLike | None,
    topology: D2DTopologyConfig,
    *,
    data_size: npt.ArrayLike,
    seed: int,
    round: int,
    motion: D2DMotion | None = None,
) -> dict[str, npt.NDArray[np.float32]]:
    """Return a target's observation before round ``round`` (module table).

    Round 0 shows the CCM draw of ``first`` (:func:`selection_observation`);
    later rounds a fresh fading draw from (seed, "d2d_csi", round, target), the
    CSI measured before the round's transmissions. Used by the engine
    (:meth:`rayfl.d2d.round.D2DRound.observe`) and by ``D2DNeighbor-v0``.

    Args:
        layout: The run's layout.
        first: The target's :func:`selection_observation`.
        history: The target's tracker (:func:`record_round`).
        em_weight: (N,) π after the previous round (None: 0).
        topology: The D2D topology section.
        data_size: (N,) train samples per node.
        seed: The run seed.
        round: Round index t.
        motion: The run's moving nodes (:class:`rayfl.d2d.motion.D2DMotion`;
            None or static: the t = 0 layout every round). When they move,
            round t ≥ 1 shows round t's ``distance_m``, ``error_probability``
            and the CSI draw on round t's path gains. Its devices
            (:mod:`rayfl.d2d.devices`) add round t's ``available`` (and an
            away node is not ``eligible``) and ``compute_time_s``; with
            correlated fading the CSI of round t ≥ 1 is round t − 1's fading.
    """
    target, n = int(np.argmin(first["eligible"])), layout.num_nodes  # ineligible
    error, distance = first["error_probability"], first["distance_m"]
    if motion is not None and motion.moving and round > 0:
        layout = motion.layout(round)
        error = motion.error(round, target).astype(np.float32)
        distance = layout.distances_m[:, target].astype(np.float32)
    devices = {} if not device_keys(topology) else _devices(motion, round, target)
    eligible = first["eligible"].copy()
    if "available" in devices:
        eligible *= devices["available"]
    gain = first["channel_gain"]
    if round > 0 and motion is not None and motion.devices.correlated:
        fading = topology.rayleigh_factor * motion.devices.fading(round - 1, target)
        gain = _gain_db(layout, topology, target, fading=fading)
    elif round > 0:
        csi = rng_for(seed, "d2d_csi", round=round, client=target)
        gain = _gain_db(layout, topology, target, csi)
    pi = np.zeros(n) if em_weight is None else np.asarray(em_weight, np.float64)
    tracked = history.fields()
    return {
        "channel_gain": np.array(gain, dtype=np.float32),
        "eligible": eligible,
        "loss": tracked["loss"],
        "upload_count": tracked["upload_count"],
        "privacy_spent": np.zeros(n, dtype=np.float32),
        "staleness": tracked["staleness"],
        "data_size": np.asarray(data_size, dtype=np.float32).copy(),
        "round": np.array([round], dtype=np.float32),
        "error_probability": error.copy(),
        "distance_m": distance.copy(),
        "em_weight": np.clip(pi, 0.0, 1.0).astype(np.float32),
        "selected": tracked["selected"],
        **devices,
    }


def _devices(
    motion: D2DMotion | None, round: int, target: int
) -> dict[str, npt.NDArray[np.float32]]:
    """Round ``round``'s device rows of ``target``'s observation (``motion`` needed)."""
    if motion is None:
        raise ValueError(
            "the topology's devices (availability, CPU frequencies or a round "
            "deadline) need the run's D2DMotion to observe"
        )
    return motion.devices.observed(round, target)
