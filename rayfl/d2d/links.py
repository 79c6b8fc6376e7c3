"""Which neighbors' models reach a target in one round (``topology.link_model``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rayfl.d2d.config import D2DTopologyConfig
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
    """
    if topology.link_model == "ideal" or not senders:
        return {s: True for s in senders}
    target = selection.target
    num_clients = layout.num_nodes
    rng = rng_for(seed, "d2d_link", round=round + 1, client=target)
    if topology.link_model == "bernoulli":
        draws = rng.random(num_clients)
        p_err = selection.error_probability if error is None else error
        return {s: bool(draws[s] >= p_err[s]) for s in senders}
    forced = np.full(num_clients, -1, dtype=np.int64)
    forced[list(selection.neighbors)] = list(selection.subchannel)
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
    )
    return {s: bool(ok[s]) for s in senders}
