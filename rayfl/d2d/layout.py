"""A D2D network's layout: node positions, distances, path gains, P^err.

:func:`make_layout` drops the nodes at t = 0 (seed_003 §2.2);
:func:`layout_from` builds the layout of any positions (a moving network's
round t, :mod:`rayfl.d2d.motion`); :func:`error_probabilities` gives the
analytic P_s^err of every link s → target of a layout
(:mod:`rayfl.wireless.d2d_error`).

| symbol | code | meaning |
|---|---|---|
| x_s | ``positions_m`` | node s's position in [0, L]², m |
| d_{s,n} | ``distances_m`` | distance s → n, m |
| ĥ²_{s,n} | ``path_gain`` | path-loss power gain of s → n (eqs. 3–4) |
| σ² = κTW | ``noise_power_w`` | thermal noise, W |
| P_s^err | :func:`error_probabilities` | analytic error probability of s → target |

Implementation details:
    1. Geometry: N = ``data.num_clients`` nodes uniform in the square (binomial
       point process, spec §2.2 [REC]), from (seed, "d2d_geometry"); a random
       target is drawn from the same generator after the positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rayfl.d2d.config import D2DTopologyConfig
from rayfl.seeding import rng_for
from rayfl.wireless.d2d import (
    d2d_gain_linear,
    free_space_reference_loss_db,
    pairwise_distances_m,
    place_nodes_square,
)
from rayfl.wireless.d2d_error import error_probabilities_to_target, thermal_noise_w
from rayfl.wireless.d2d_error_batched import error_probabilities_batched

__all__ = ["D2DLayout", "error_probabilities", "layout_from", "make_layout"]


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


def layout_from(
    topology: D2DTopologyConfig,
    positions: npt.NDArray[np.float64],
    targets: tuple[int, ...],
) -> D2DLayout:
    """Return the layout of nodes at ``positions`` (N, 2) with these targets."""
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
    noise = thermal_noise_w(
        bandwidth_hz=topology.bandwidth_hz, temperature_k=topology.noise_temperature_k
    )
    return D2DLayout(positions, distances, gain, noise, targets)


def make_layout(topology: D2DTopologyConfig, num_nodes: int, *, seed: int) -> D2DLayout:
    """Drop ``num_nodes`` nodes and pick the target(s) (implementation detail 1).

    Raises:
        ValueError: If ``topology.target`` is not a node id.
    """
    if num_nodes < 2:
        raise ValueError(f"a D2D network needs >= 2 clients, got {num_nodes}")
    rng = rng_for(seed, "d2d_geometry")
    positions = place_nodes_square(num_nodes, side_m=topology.side_m, rng=rng)
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
    return layout_from(topology, positions, targets)


def error_probabilities(
    layout: D2DLayout,
    target: int,
    topology: D2DTopologyConfig,
    *,
    batched: bool = True,
) -> npt.NDArray[np.float64]:
    """Return the analytic P_s^err (N,) of every link s → ``target`` (1 for itself).

    ``batched`` (the default): every link in one fixed quadrature
    (:mod:`rayfl.wireless.d2d_error_batched`, within 5e-8 of the adaptive
    one; the papers' goldens hold with it); False: adaptive ``quad`` per
    link (:func:`rayfl.wireless.d2d_error.error_probabilities_to_target`).
    """
    method = error_probabilities_batched if batched else error_probabilities_to_target
    return method(
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
