"""Which neighbors' models reach a target in one round (``topology.link_model``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.devices import LinkState
from rayfl.d2d.selection import D2DLayout, Selection
from rayfl.seeding import rng_for
from rayfl.wireless.d2d import d2d_round_delivery

__all__ = ["deliveries"]


def deliveries(
    topology: D2DTopologyConfig,
    layout: D2DLayout,
    selection: Selection,
    senders: list[int],
    *,
    round: int,
    seed: int,
    error: npt.NDArray[np.float64] | None = None,
    state: LinkState | None = None,
) -> dict[int, bool]:
    """Return which senders' models reach ``selection.target`` in ``round``.

    ``ideal`` delivers every model; ``bernoulli`` drops sender s with
    probability P_s^err; ``mc_sinr`` draws the round's fading on each sender's
    sub-channel. Draws come from (seed, "d2d_link", round + 1, target).

    Args:
        topology: The D2D topology section.
        layout: The run's node layout (path gains, noise power).
        selection: The target's selection (P^err, sub-channels).
        senders: Clients whose model is sent to the target.
        round: Round index t.
        seed: The run seed.
        error: Round t's P^err (N,) of the links to the target when the nodes
            move (:meth:`rayfl.d2d.motion.D2DMotion.links`, with ``layout``
            round t's); None: the selection's (t = 0).
        state: Round t's availability, deadline and fading memory
            (:meth:`rayfl.d2d.motion.D2DMotion.link_state`; None: the paper's):
            a node away or late delivers nothing, and correlated fading
            decides the bernoulli and mc_sinr draws (:mod:`rayfl.d2d.devices`).
    """
    ok = _links(topology, layout, selection, senders, round, seed, error, state)
    if state is None:
        return ok
    return {s: ok[s] and state.reason(s) is None for s in senders}


def _links(
    topology: D2DTopologyConfig,
    layout: D2DLayout,
    selection: Selection,
    senders: list[int],
    round: int,
    seed: int,
    error: npt.NDArray[np.float64] | None,
    state: LinkState | None,
) -> dict[int, bool]:
    """The channel's verdict on each sender (``link_model``), before the devices'."""
    if topology.link_model == "ideal" or not senders:
        return {s: True for s in senders}
    target = selection.target
    num_clients = layout.num_nodes
    rng = rng_for(seed, "d2d_link", round=round + 1, client=target)
    forced = np.full(num_clients, -1, dtype=np.int64)
    forced[list(selection.neighbors)] = list(selection.subchannel)
    fading = None if state is None else state.fading
    if topology.link_model == "bernoulli":
        draws = rng.random(num_clients)
        if fading is not None:  # the fade's quantile: Exp(1)'s CDF of g
            rows = np.arange(num_clients)
            draws = 1.0 - np.exp(-fading[rows, np.maximum(forced, 0)])
        p_err = selection.error_probability if error is None else error
        return {s: bool(draws[s] >= p_err[s]) for s in senders}
    ok, _ = d2d_round_delivery(
        layout.path_gain,
        target,
        tx_power_w=topology.tx_power_w,
        noise_power_w=layout.noise_power_w,
        sinr_threshold=topology.sinr_threshold,
        fading_threshold=topology.fading_threshold,
        rayleigh_factor=topology.rayleigh_factor,
        num_subchannels=topology.num_subchannels,
        rng=rng,
        subchannel=forced,
        fading=None if fading is None else topology.rayleigh_factor * fading,
    )
    return {s: bool(ok[s]) for s in senders}
