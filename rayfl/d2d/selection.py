"""Neighbor selection of a D2D target as a scheduling decision (pFedWN step 1).

The channel-measurement stage (CCM, Fig. 3 of pFedWN) at t = 0: nodes are placed,
the path-loss gains and the analytic error probabilities P_s^err of every link
s → target are computed (:mod:`rayfl.wireless.d2d_error`), and a scheduling
policy (``policies``, default ``channel_threshold``) picks the selected
neighbors M_n from the observation below, through the same ``policy(obs) ->
action`` interface as the OFDMA scheduling env.

| key | shape | meaning | unit |
|-----|-------|---------|------|
| channel_gain | (N, F) | P ĥ² h̃_f² of link s → target on sub-channel f (one fading draw) | dB |
| eligible | (N,) | 1 for the neighbors G_n (every node but the target) | – |
| error_probability | (N,) | analytic P_s^err (1 for the target) | – |
| distance_m | (N,) | distance to the target (0 for the target) | m |

Action: ``MultiDiscrete([N + 1] * F)``, entry f is the neighbor sending on
sub-channel f or N (idle); the selected neighbors are the non-idle entries.

Implementation details:
    1. Geometry: N = ``data.num_clients`` nodes uniform in the square (binomial
       point process, spec §2.2 [REC]), from (seed, "d2d_geometry"); a random
       target is drawn from the same generator after the positions.
    2. The CCM fading draw of ``channel_gain`` comes from (seed, "d2d_link",
       round 0, client = target); per-round link draws use round t + 1.
    3. Selection happens once, at t = 0 (spec §2.4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from rayfl.d2d.config import D2DTopologyConfig
from rayfl.seeding import rng_for
from rayfl.wireless.d2d import (
    d2d_gain_linear,
    free_space_reference_loss_db,
    pairwise_distances_m,
    place_nodes_square,
)
from rayfl.wireless.d2d_error import error_probabilities_to_target, thermal_noise_w

__all__ = [
    "D2DLayout",
    "Selection",
    "make_layout",
    "reselect",
    "round_observation",
    "select_neighbors",
    "selection_observation",
    "selection_spaces",
]


@dataclass(frozen=True)
class D2DLayout:
    """Node positions and path-loss gains of one D2D network.

    Attributes:
        positions_m: (N, 2) node positions in m.
        distances_m: (N, N) distances in m.
        path_gain: (N, N) path-loss power gains ĥ², [i, j] for i → j.
        noise_power_w: σ² = κTW in W.
        targets: The target clients, ascending.
    """

    positions_m: npt.NDArray[np.float64]
    distances_m: npt.NDArray[np.float64]
    path_gain: npt.NDArray[np.float64]
    noise_power_w: float
    targets: tuple[int, ...]

    @property
    def num_nodes(self) -> int:
        """N."""
        return int(self.positions_m.shape[0])


def make_layout(topology: D2DTopologyConfig, num_nodes: int, *, seed: int) -> D2DLayout:
    """Drop ``num_nodes`` nodes and pick the target(s) (implementation detail 1).

    Raises:
        ValueError: If ``topology.target`` is not a node id.
    """
    if num_nodes < 2:
        raise ValueError(f"a D2D network needs >= 2 clients, got {num_nodes}")
    rng = rng_for(seed, "d2d_geometry")
    positions = place_nodes_square(num_nodes, side_m=topology.side_m, rng=rng)
    distances = pairwise_distances_m(positions)
    ref_db = free_space_reference_loss_db(
        carrier_frequency_hz=topology.carrier_frequency_hz,
        reference_distance_m=topology.reference_distance_m,
    )
    gain = d2d_gain_linear(
        distances,
        ref_db=ref_db,
        exponent=topology.path_loss_exponent,
        reference_distance_m=topology.reference_distance_m,
    )
    if topology.target == "all":
        targets: tuple[int, ...] = tuple(range(num_nodes))
    elif topology.target == "random":
        targets = (int(rng.integers(num_nodes)),)
    else:
        if topology.target >= num_nodes:
            raise ValueError(
                f"topology.target must be < data.num_clients ({num_nodes}), "
                f"got {topology.target}"
            )
        targets = (int(topology.target),)
    noise = thermal_noise_w(
        bandwidth_hz=topology.bandwidth_hz, temperature_k=topology.noise_temperature_k
    )
    return D2DLayout(positions, distances, gain, noise, targets)


def selection_spaces(
    num_nodes: int, num_subchannels: int
) -> tuple[spaces.Dict, spaces.MultiDiscrete]:
    """Return the (observation_space, action_space) of the selection decision."""
    inf = np.inf
    observation_space = spaces.Dict(
        {
            "channel_gain": spaces.Box(
                -inf, inf, (num_nodes, num_subchannels), np.float32
            ),
            "eligible": spaces.Box(0.0, 1.0, (num_nodes,), np.float32),
            "error_probability": spaces.Box(0.0, 1.0, (num_nodes,), np.float32),
            "distance_m": spaces.Box(0.0, inf, (num_nodes,), np.float32),
        }
    )
    return observation_space, spaces.MultiDiscrete([num_nodes + 1] * num_subchannels)


def selection_observation(
    layout: D2DLayout, target: int, topology: D2DTopologyConfig, *, seed: int
) -> tuple[dict[str, npt.NDArray[np.float32]], npt.NDArray[np.float64]]:
    """Build the selection observation of ``target`` (module table).

    Returns:
        The observation and the float64 error probabilities (N,).
    """
    error = error_probabilities_to_target(
        layout.path_gain,
        target,
        tx_power_w=topology.tx_power_w,
        sinr_threshold=topology.sinr_threshold,
        noise_power_w=layout.noise_power_w,
        fading_threshold=topology.fading_threshold,
        rayleigh_factor=topology.rayleigh_factor,
        num_subchannels=topology.num_subchannels,
        interference_var=topology.interference_var,
        pdf=topology.fading_pdf,
    )
    n, f = layout.num_nodes, topology.num_subchannels
    rng = rng_for(seed, "d2d_link", round=0, client=target)
    fading = rng.exponential(topology.rayleigh_factor, size=(n, f))
    received = topology.tx_power_w * layout.path_gain[:, target, None] * fading
    with np.errstate(divide="ignore"):
        gain_db = 10.0 * np.log10(received)
    gain_db[target] = -1e3  # the target does not send to itself
    eligible = np.ones(n, dtype=np.float32)
    eligible[target] = 0.0
    obs = {
        "channel_gain": gain_db.astype(np.float32),
        "eligible": eligible,
        "error_probability": error.astype(np.float32),
        "distance_m": layout.distances_m[:, target].astype(np.float32),
    }
    return obs, error


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
    layout: D2DLayout, topology: D2DTopologyConfig, *, seed: int
) -> list[Selection]:
    """Run the selection policy for every target (once, at t = 0).

    The policy is looked up in the ``policies`` registry (imported lazily:
    rayfl does not depend on ``policies`` at module level, DESIGN.md).
    """
    from policies import make_policy

    spaces_ = selection_spaces(layout.num_nodes, topology.num_subchannels)
    params: dict[str, Any] = dict(topology.policy_params)
    if topology.policy == "channel_threshold":
        params.setdefault("epsilon", topology.epsilon)
    policy = make_policy(topology.policy, spaces_, **params)
    out = []
    for target in layout.targets:
        policy.reset(seed=int(rng_for(seed, "policy", client=target).integers(2**31)))
        obs, error = selection_observation(layout, target, topology, seed=seed)
        action = policy(obs)
        assignment = np.asarray(
            action["assignment"] if isinstance(action, dict) else action
        )
        chosen = {
            int(s): f
            for f, s in enumerate(assignment.tolist())
            if s < layout.num_nodes and s != target
        }
        neighbors = tuple(sorted(chosen))
        out.append(
            Selection(target, neighbors, tuple(chosen[s] for s in neighbors), error)
        )
    return out


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


def round_observation(
    layout: D2DLayout,
    first: dict[str, npt.NDArray[np.float32]],
    selection: Selection,
    em_weight: npt.NDArray[np.float64] | None,
    topology: D2DTopologyConfig,
    *,
    seed: int,
    round: int,
) -> dict[str, npt.NDArray[np.float32]]:
    """Return a target's selection observation before round ``round``.

    Round 0 shows ``first`` (:func:`selection_observation`) with no π and no
    previous M_n; later rounds a fresh fading draw from (seed, "d2d_csi",
    round, target), the CSI measured before the round's transmissions, with
    the previous round's M_n and π. The keys of ``D2DNeighbor-v0``.

    Args:
        layout: The run's layout.
        first: The target's t = 0 observation.
        selection: The target's current selection M_n.
        em_weight: π over M_n after the previous round (None at round 0).
        topology: The D2D topology section.
        seed: The run seed.
        round: Round index t.
    """
    target, n = selection.target, layout.num_nodes
    gain = first["channel_gain"]
    pi, selected = np.zeros(n), np.zeros(n)
    if round > 0:
        rng = rng_for(seed, "d2d_csi", round=round, client=target)
        fading = rng.exponential(
            topology.rayleigh_factor, size=(n, topology.num_subchannels)
        )
        received = topology.tx_power_w * layout.path_gain[:, target, None] * fading
        with np.errstate(divide="ignore"):
            gain_db = 10.0 * np.log10(received)
        gain_db[target] = -1e3
        gain = gain_db.astype(np.float32)
        neighbors = list(selection.neighbors)
        if em_weight is not None:
            pi[neighbors] = em_weight
        selected[neighbors] = 1.0
    return {
        "channel_gain": gain.copy(),
        "eligible": first["eligible"].copy(),
        "error_probability": first["error_probability"].copy(),
        "distance_m": first["distance_m"].copy(),
        "em_weight": np.clip(pi, 0.0, 1.0).astype(np.float32),
        "selected": selected.astype(np.float32),
        "round": np.array([round], dtype=np.float32),
    }
