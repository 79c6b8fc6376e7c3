"""Device-to-device (D2D) links: geometry, pairwise gains and SINR with interference.

Implements the channel of Ni et al. (pFedWN), spec seed_003 §2.2–2.3: nodes dropped
uniformly in a square, single-slope path loss (ĥ)² = (λ_w/(4π d_0))²·(d_0/d)^α (eq. 3),
Rayleigh block fading (eq. 4), interference from the other concurrent transmitters on
the same sub-channel (eq. 5) and SINR γ = P_s·abs(h_s)²/(σ² + I_s).

Symbol table (paper symbol → code name):

| Symbol          | Code name                         | Unit / shape          |
|-----------------|-----------------------------------|-----------------------|
| d_{ij}          | ``distances_m``                   | m, (N, N)             |
| d_0             | ``reference_distance_m``          | m                     |
| α_s             | ``exponent``                      | –                     |
| λ_w = c/f_c     | ``carrier_frequency_hz``          | Hz                    |
| abs(h_{ij})²    | ``gain_linear`` (tx i → rx j)     | –, (N, N)             |
| P_s             | ``tx_power_w``                    | W, (N,)               |
| α_r^f           | ``transmitting``, ``subchannel``  | bool / int, (N,)      |
| σ² = κ·T·W      | ``noise_power_w``                 | W                     |
| I_s^f           | interference term                 | W                     |
| γ_s             | ``d2d_sinr_linear``               | –, (N, N)             |

Implementation details:
    1. Distances below d_0 are clamped to d_0 (seed_003 §2.2 [REC]); self-links get
       gain 0, so a node never interferes with its own reception.
    2. The SINR is the instantaneous one ("mc_sinr" link model, seed_003 A8); the
       paper's analytic log-normal error probability is in
       :mod:`rayfl.wireless.d2d_error`.
    3. Sub-channel choice in the ISM band: each node uses f* = argmax_f h̃^f of its
       own fading towards the receiver and transmits only if h̃^{f*} ≥ β
       (``best_subchannel``; seed_003 §2.3 and [35]).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rayfl.wireless.units import linear_to_db

__all__ = [
    "best_subchannel",
    "d2d_gain_linear",
    "d2d_round_delivery",
    "d2d_sinr_linear",
    "free_space_reference_loss_db",
    "pairwise_distances_m",
    "place_nodes_square",
]

FloatArray = npt.NDArray[np.float64]

SPEED_OF_LIGHT_M_S = 299_792_458.0


def place_nodes_square(
    num_nodes: int, *, side_m: float, rng: np.random.Generator
) -> FloatArray:
    """Drop nodes uniformly in a square (binomial point process, seed_003 §2.2).

    Args:
        num_nodes: N, number of nodes, >= 0.
        side_m: Side of the square in m, > 0 (50 m in seed_003 Table I).
        rng: Source of randomness.

    Returns:
        Positions in m, shape (N, 2), float64, in [0, side_m]².
    """
    if side_m <= 0:
        raise ValueError(f"side_m must be > 0, got {side_m:g}")
    return rng.uniform(0.0, side_m, size=(num_nodes, 2))


def pairwise_distances_m(positions_m: npt.ArrayLike) -> FloatArray:
    """Compute Euclidean distances between all node pairs.

    Args:
        positions_m: Node positions in m, shape (N, D), float.

    Returns:
        Distances in m, shape (N, N), float64, symmetric, zero diagonal.

    Example:
        >>> pairwise_distances_m([[0.0, 0.0], [3.0, 4.0]]).tolist()
        [[0.0, 5.0], [5.0, 0.0]]
    """
    points = np.asarray(positions_m, dtype=np.float64)
    if points.ndim != 2:
        raise ValueError(f"positions_m must have shape (N, D), got {points.shape}")
    difference = points[:, None, :] - points[None, :, :]
    return np.asarray(np.sqrt(np.sum(difference**2, axis=-1)), dtype=np.float64)


def free_space_reference_loss_db(
    *, carrier_frequency_hz: float, reference_distance_m: float = 1.0
) -> float:
    """Compute the Friis loss at d_0: −10·log10((λ_w/(4π d_0))²) (seed_003 eq. 3).

    Args:
        carrier_frequency_hz: f_c in Hz, > 0 (2.4 GHz in seed_003 Table I).
        reference_distance_m: d_0 in m, > 0.

    Returns:
        Loss at d_0 in dB (positive).

    Example:
        >>> round(free_space_reference_loss_db(carrier_frequency_hz=2.4e9), 2)
        40.05
    """
    wavelength_m = SPEED_OF_LIGHT_M_S / carrier_frequency_hz
    amplitude = wavelength_m / (4.0 * np.pi * reference_distance_m)
    return float(-linear_to_db(amplitude**2))


def d2d_gain_linear(
    distances_m: npt.ArrayLike,
    *,
    ref_db: float,
    exponent: float,
    reference_distance_m: float = 1.0,
    fading_power_gain: npt.ArrayLike | None = None,
) -> FloatArray:
    """Compute link power gains 10^{−ref_db/10}·(d_0/d)^α·g, seed_003 eqs. (3)–(4).

    Args:
        distances_m: (N, N) distances in m; entry [i, j] is the link i → j.
        ref_db: Loss at d_0 in dB (see ``free_space_reference_loss_db``).
        exponent: Path-loss exponent α_s (3 in seed_003 Table I).
        reference_distance_m: d_0 in m; shorter distances are clamped to d_0.
        fading_power_gain: Optional (N, N) fading power gains g (e.g. Exp(Γ)).

    Returns:
        Gains, shape (N, N), float64, zero on the diagonal.

    Example:
        >>> d2d_gain_linear([[0.0, 10.0], [10.0, 0.0]], ref_db=0.0,
        ...     exponent=2.0).round(12).tolist()
        [[0.0, 0.01], [0.01, 0.0]]
    """
    distance = np.asarray(distances_m, dtype=np.float64)
    if distance.ndim != 2 or distance.shape[0] != distance.shape[1]:
        raise ValueError(f"distances_m must have shape (N, N), got {distance.shape}")
    clamped = np.maximum(distance, reference_distance_m)
    gain = 10.0 ** (-ref_db / 10.0) * (reference_distance_m / clamped) ** exponent
    if fading_power_gain is not None:
        gain = gain * np.asarray(fading_power_gain, dtype=np.float64)
    gain = np.array(gain, dtype=np.float64)
    np.fill_diagonal(gain, 0.0)
    return gain


def d2d_sinr_linear(
    *,
    gain_linear: npt.ArrayLike,
    tx_power_w: npt.ArrayLike,
    transmitting: npt.ArrayLike,
    noise_power_w: float,
    subchannel: npt.ArrayLike | None = None,
) -> FloatArray:
    """Compute the SINR of every link i → j among concurrent transmitters.

    SINR_ij = P_i g_ij / (σ² + Σ_{k≠i, k transmitting, same sub-channel} P_k g_kj),
    seed_003 §2.3 (interference eq. 5).

    Args:
        gain_linear: (N, N) power gains, entry [i, j] for transmitter i → receiver j.
        tx_power_w: (N,) or scalar transmit power in W.
        transmitting: (N,) bool, which nodes transmit (α_r^f).
        noise_power_w: σ² in W, > 0.
        subchannel: Optional (N,) int sub-channel of each node; only transmitters on
            the sub-channel of i interfere with i's links. None means one channel.

    Returns:
        SINR (linear), shape (N, N), float64; row i is 0 where i does not transmit.

    Example:
        >>> sinr = d2d_sinr_linear(gain_linear=[[0, 1, 0], [0, 0, 0], [0, 1, 0]],
        ...     tx_power_w=1.0, transmitting=[True, False, True], noise_power_w=1.0)
        >>> float(sinr[0, 1])
        0.5
    """
    gain = np.asarray(gain_linear, dtype=np.float64)
    num_nodes = gain.shape[0]
    if gain.shape != (num_nodes, num_nodes):
        raise ValueError(f"gain_linear must have shape (N, N), got {gain.shape}")
    active = np.asarray(transmitting, dtype=bool)
    if active.shape != (num_nodes,):
        raise ValueError(
            f"transmitting must have shape ({num_nodes},), got {active.shape}"
        )
    power = np.broadcast_to(np.asarray(tx_power_w, dtype=np.float64), (num_nodes,))
    received_w = (power * active)[:, None] * gain  # [k, j]: power of k at j
    if subchannel is None:
        channel = np.zeros(num_nodes, dtype=np.int64)
    else:
        channel = np.asarray(subchannel, dtype=np.int64)
        if channel.shape != (num_nodes,) or np.any(channel < 0):
            raise ValueError(
                f"subchannel must be (N,) non-negative ints, got shape {channel.shape}"
            )
    one_hot = np.zeros((num_nodes, int(channel.max(initial=0)) + 1))
    one_hot[np.arange(num_nodes), channel] = 1.0
    total_per_channel_w = one_hot.T @ received_w  # [f, j]
    interference_w = np.maximum(total_per_channel_w[channel] - received_w, 0.0)
    return np.asarray(received_w / (noise_power_w + interference_w), np.float64)


def best_subchannel(
    fading_power_gain: npt.ArrayLike, *, fading_threshold: float
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Pick each node's best sub-channel and apply the fading threshold β.

    f* = argmax_f h̃^f (path loss does not depend on f), and the node transmits
    only if h̃^{f*} ≥ β, i.e. its power gain (h̃^{f*})² ≥ β² (seed_003 §2.3).

    Args:
        fading_power_gain: (N, F) fading power gains (h̃^f)², e.g. Exp(Γ) draws.
        fading_threshold: β, amplitude, ≥ 0.

    Returns:
        ``(subchannel, transmitting)``: (N,) int64 f* and (N,) bool.

    Example:
        >>> f, on = best_subchannel([[1.0, 5.0], [0.5, 2.0]], fading_threshold=2.0)
        >>> f.tolist(), on.tolist()
        ([1, 1], [True, False])
    """
    fading = np.asarray(fading_power_gain, dtype=np.float64)
    if fading.ndim != 2 or fading.shape[1] < 1:
        raise ValueError(f"fading_power_gain must be (N, F), got {fading.shape}")
    channel = np.argmax(fading, axis=1).astype(np.int64)
    best = fading[np.arange(fading.shape[0]), channel]
    return channel, best >= fading_threshold**2


def d2d_round_delivery(
    path_gain_linear: npt.ArrayLike,
    target: int,
    *,
    tx_power_w: float,
    noise_power_w: float,
    sinr_threshold: float,
    fading_threshold: float,
    rayleigh_factor: float,
    num_subchannels: int,
    rng: np.random.Generator,
    subchannel: npt.ArrayLike | None = None,
    fading: npt.ArrayLike | None = None,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
    """Draw one block of fading and return which links s → target succeed.

    Every node other than the target is a D2D session in the band: it draws
    h̃² ~ Exp(Γ) on each of the |F| sub-channels of its link to the target, uses
    its best one (or the sub-channel given in ``subchannel``), transmits if the
    amplitude there is ≥ β, and interferes with the co-channel sessions. Link s
    succeeds if s transmits and its SINR ≥ γ_th (``"mc_sinr"``, seed_003 A8).

    Args:
        path_gain_linear: (N, N) path-loss gains ĥ², [i, j] for i → j.
        target: The receiving node n.
        tx_power_w: P, common transmit power in W.
        noise_power_w: σ² in W.
        sinr_threshold: γ_th, linear.
        fading_threshold: β.
        rayleigh_factor: Γ.
        num_subchannels: |F|.
        rng: Source of the fading draws.
        subchannel: Optional (N,) sub-channel per node (-1: its best one).
        fading: Optional (N, |F|) fading powers h̃² of the round (e.g. Γ times a
            correlated series); None: drawn i.i.d. Exp(Γ) from ``rng``.

    Returns:
        ``(delivered, sinr)``: (N,) bool and (N,) linear SINR at the target
        (0 for the target and for silent nodes).
    """
    gain = np.asarray(path_gain_linear, dtype=np.float64)
    n = gain.shape[0]
    drawn = rng.exponential(rayleigh_factor, size=(n, num_subchannels))
    fading = drawn if fading is None else np.asarray(fading, dtype=np.float64)
    channel, active = best_subchannel(fading, fading_threshold=fading_threshold)
    if subchannel is not None:
        forced = np.asarray(subchannel, dtype=np.int64)
        channel = np.where(forced >= 0, forced, channel)
        active = fading[np.arange(n), channel] >= fading_threshold**2
    active[target] = False
    received = tx_power_w * gain[:, target] * fading[np.arange(n), channel] * active
    per_channel = np.bincount(channel, weights=received, minlength=num_subchannels)
    interference = per_channel[channel] - received
    sinr = np.where(active, received / (noise_power_w + interference), 0.0)
    return active & (sinr >= sinr_threshold), sinr
