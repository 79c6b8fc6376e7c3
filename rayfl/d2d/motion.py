"""D2D nodes that move (issue 48): round t's layout and P^err follow the nodes.

``topology.mobility`` moves the nodes in the square [0, side_m]² from the
positions :func:`rayfl.d2d.layout.make_layout` dropped (the t = 0 layout):
:class:`rayfl.wireless.mobility.Trajectories` in a
:class:`rayfl.wireless.areas.Square` (random waypoint: waypoints uniform in
the square; Gauss-Markov: reflected specularly at its edges), with the
``d2d_mobility`` streams of (seed, node). :class:`D2DMotion` gives round t's
layout (positions at the boundary t·T, T = ``round_duration_s``) and its
analytic error probabilities; the engine (:mod:`rayfl.d2d.round`), the lanes
(:mod:`rayfl.d2d.lanes`), the env (``D2DNeighbor-v0``) and its surrogate read
them for round t's observation (``distance_m``, ``error_probability``,
``channel_gain``) and link draws (:func:`rayfl.d2d.links.deliveries`).

| symbol | code | meaning |
|---|---|---|
| x_{s,t} | ``layout(t).positions_m`` | node s at the start of round t, m |
| d_{s,n,t}, ĥ²_{s,n,t} | ``layout(t).distances_m``, ``.path_gain`` | round t's distances and path gains |
| P_{s,t}^err | :meth:`D2DMotion.error` | round t's analytic P^err of s → target |

Implementation details:
    1. ``static`` (the default) is the paper's network: :meth:`D2DMotion.layout`
       returns the t = 0 layout object itself and :meth:`D2DMotion.links`
       gives no per-round P^err, so a static run's numbers are unchanged.
    2. Round 0 of a moving network is the t = 0 layout too (every model
       starts at the dropped positions), so the t = 0 selection (CCM) is the
       static one; the nodes move from round 1 on.
    3. Every draw is keyed by (seed, purpose, round, node): a node's path does
       not depend on which nodes share an actor or a lane, and a round may be
       asked in any order (an earlier round replays the walk from round 0).
    4. With ``selection_via: once`` M_n stays the t = 0 selection while the
       links' success follows the nodes (``link_model`` bernoulli: P^err of
       round t; mc_sinr: round t's path gains); with ``env`` the policy sees
       round t's observation.
    5. Every round's P^err is the fixed-quadrature one of
       :mod:`rayfl.wireless.d2d_error_batched` (within 5e-8 of the adaptive
       ``quad``), cached for the last round asked: one D2DMotion per run serves the observation and the link
       draws (the envs take their backend's, :attr:`D2DRound.motion` or the
       lane's), so P^err is computed once per (round, target).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.devices import D2DDevices, LinkState
from rayfl.d2d.layout import D2DLayout, error_probabilities, layout_from
from rayfl.wireless.areas import Square
from rayfl.wireless.mobility import MOBILITY_MODELS, Trajectories

__all__ = ["D2DMotion", "mobility_params"]


def mobility_params(topology: D2DTopologyConfig) -> dict[str, float]:
    """Return the ``topology.mobility_*`` fields set, by :data:`MOBILITY_MODELS` name.

    Example:
        >>> mobility_params(D2DTopologyConfig(mobility="random_waypoint",
        ...     round_duration_s=5, mobility_speed_min_mps=1,
        ...     mobility_speed_max_mps=3))
        {'speed_min_mps': 1.0, 'speed_max_mps': 3.0}
    """
    names = MOBILITY_MODELS[topology.mobility]
    values = {name: getattr(topology, f"mobility_{name}") for name in names}
    return {name: float(v) for name, v in values.items() if v is not None}


class D2DMotion:
    """Round t's layout and P^err of a D2D network (see the module docstring).

    Args:
        topology: The D2D topology section.
        layout: The t = 0 layout (:func:`rayfl.d2d.layout.make_layout`).
        seed: The run's seed.
        data_size, model_bits, local_epochs: For the nodes' compute times and
            airtimes (:class:`rayfl.d2d.devices.D2DDevices`, ``devices``).

    Example:
        >>> from rayfl.d2d.layout import make_layout
        >>> topo = D2DTopologyConfig(mobility="random_waypoint",
        ...     round_duration_s=5, mobility_speed_min_mps=1,
        ...     mobility_speed_max_mps=3, target=0)
        >>> start = make_layout(topo, 4, seed=0)
        >>> motion = D2DMotion(topo, start, seed=0)
        >>> motion.layout(0) is start, bool((motion.layout(3).positions_m
        ...     != start.positions_m).all())
        (True, True)
    """

    def __init__(
        self,
        topology: D2DTopologyConfig,
        layout: D2DLayout,
        *,
        seed: int,
        data_size: npt.ArrayLike | None = None,
        model_bits: float | None = None,
        local_epochs: int = 1,
    ) -> None:
        self.topology, self.start = topology, layout
        #: Availability, compute, deadline and fading memory (issue 48).
        self.devices = D2DDevices(
            topology,
            layout.num_nodes,
            seed=seed,
            data_size=data_size,
            model_bits=model_bits,
            local_epochs=local_epochs,
        )
        self.moving = topology.mobility != "static"
        self.walk: Trajectories | None = None
        if self.moving:
            assert topology.round_duration_s is not None  # the config checks it
            self.walk = Trajectories(
                topology.mobility,
                int(seed),
                range(layout.num_nodes),
                area=Square(topology.side_m),
                start=layout.positions_m,
                round_s=topology.round_duration_s,
                stream="d2d_mobility",
                **mobility_params(topology),
            )
        self._round = 0
        self._layout = layout
        self._errors: dict[int, npt.NDArray[np.float64]] = {}
        self._start_errors: dict[int, npt.NDArray[np.float64]] = {}

    def layout(self, t: int) -> D2DLayout:
        """Return round ``t``'s layout (the t = 0 one while static, or at t = 0)."""
        if self.walk is None or t == 0:
            return self.start
        if t != self._round:
            positions = self.walk.positions(t)
            self._layout = layout_from(self.topology, positions, self.start.targets)
            self._round, self._errors = t, {}
        return self._layout

    def error(self, t: int, target: int) -> npt.NDArray[np.float64]:
        """Return round ``t``'s analytic P_s^err (N,) of every link s → ``target``.

        Cached for the last round asked (the observation and the link draws
        of one round share it).
        """
        layout = self.layout(t)
        if layout is self.start:  # t = 0 or static: kept for the whole run
            if target not in self._start_errors:
                self._start_errors[target] = error_probabilities(
                    layout, target, self.topology
                )
            return self._start_errors[target]
        if target not in self._errors:
            self._errors[target] = error_probabilities(layout, target, self.topology)
        return self._errors[target]

    def links(
        self, t: int, target: int
    ) -> tuple[D2DLayout, npt.NDArray[np.float64] | None]:
        """Round ``t``'s layout and P^err of links to ``target`` for the link draws.

        None instead of P^err while the network is static or at t = 0: the
        caller keeps the selection's own (the t = 0 value, bit for bit).
        """
        if self.walk is None or t == 0:
            return self.start, None
        return self.layout(t), self.error(t, target)

    def link_state(self, t: int, target: int) -> LinkState | None:
        """Round ``t``'s availability, deadline and fading of links to ``target``.

        None with the paper's devices and i.i.d. fading
        (:meth:`rayfl.d2d.devices.D2DDevices.link_state`).
        """
        return self.devices.link_state(t, self.layout(t), target)
