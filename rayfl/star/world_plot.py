"""One client's moving world over a run: its channel gain and when it was reachable.

With ``wireless.fading_dynamics``, ``availability``, ``mobility`` or
``shadowing_decorrelation_m`` on (issue 48), ``rayfl run`` draws ``plots/world_client<c>.png`` beside the round
plots: client c's uplink gain on each subchannel (dB, path loss included) at
every round, the rounds it was unreachable shaded. The series are the run's
own: every draw of the world is keyed by (seed, purpose, round, client), so
the uplink model rebuilt from the run's config (:func:`client_world`) draws
exactly the channel and availability the run's clients met
(tests/star/test_world_plot.py checks them against the env's observations).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["client_world", "moves", "plot_client_world"]


def moves(cfg: Any) -> bool:
    """Whether ``cfg``'s channel or availability moves (fading, availability, mobility, shadowing)."""
    w = cfg.wireless
    if w is None:
        return False
    return bool(
        w.fading_dynamics != "iid"
        or w.availability != "always"
        or w.mobility != "static"
        or w.shadowing_decorrelation_m is not None
    )


def client_world(
    cfg: Any, client: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Return client ``client``'s uplink gains (rounds, K) in dB and availability (rounds,).

    Raises:
        ValueError: Without a ``wireless`` section, or for a client outside [0, N).
    """
    from rayfl.uplink import UplinkModel

    if cfg.wireless is None:
        raise ValueError("the world is drawn only with a wireless section")
    n = cfg.data.num_clients
    if not 0 <= client < n:
        raise ValueError(f"client must be in [0, {n}), got {client}")
    # the channel and availability do not read the data sizes
    uplink = UplinkModel(cfg, num_train=np.ones(n, np.int64))
    gains, available = [], []
    for t in range(cfg.rounds):
        state = uplink.channel_state(t)
        assert state is not None  # a wireless section
        gains.append(np.asarray(state.gain_db)[client])
        available.append(bool(uplink.available(t)[client]))
    return np.asarray(gains, np.float64), np.asarray(available, bool)


def plot_client_world(cfg: Any, out: str | Path, client: int = 0) -> Path:
    """Draw :func:`client_world` of ``client`` into the PNG ``out``; return its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gains, available = client_world(cfg, client)
    rounds = np.arange(len(gains))
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for t in np.flatnonzero(~available):
        ax.axvspan(t - 0.5, t + 0.5, color="0.85", lw=0)
    for k in range(gains.shape[1]):
        ax.plot(rounds, gains[:, k], lw=0.8, alpha=0.5, label=f"subchannel {k}")
    ax.plot(rounds, gains.mean(axis=1), color="k", lw=1.6, label="mean")
    ax.set_xlabel("round t (from 0, as in rounds.parquet)")
    ax.set_ylabel("uplink gain (dB)")
    shown = f"unreachable rounds shaded ({int((~available).sum())} of {len(rounds)})"
    ax.set_title(f"client {client}: channel gain; {shown}", fontsize=9)
    if gains.shape[1] <= 6:
        ax.legend(fontsize=7, ncol=3, loc="lower right")
    fig.tight_layout()
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
