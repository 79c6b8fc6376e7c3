"""OFDMA uplink channel: geometry, path loss, block fading, noise, SNR and rate.

Single-cell model of Zhao et al. 2025 (spec seed_000 §2.5): gain abs(h_{n,k})² =
PL(d_n)·g_{n,k} with PL(d) = 10^{-3}·d^{-2.8}, g ~ Exp(1) (Rayleigh), noise N0·B.

Symbol table (paper symbol → code name):

| Symbol            | Code name                       | Unit / shape           |
|-------------------|---------------------------------|------------------------|
| d_n               | ``distances_m``                 | m, (N,)                |
| PL(d_n)           | ``path_loss_db``                | dB (loss, positive)    |
| g_{n,k}           | ``fading_power_gain``           | –, unit mean           |
| abs(h_{n,k})²     | ``gain_linear``                 | –, (N, K)              |
| σ_0² = N0·B       | ``noise_power_w``               | W                      |
| P_n               | ``tx_power_w``                  | W                      |
| γ_{n,k}           | ``snr_linear`` / ``snr_db``     | –, (N, K)              |
| r_{n,k}           | ``rate_bps``                    | bit/s                  |

Implementation details:
    1. Distances are uniform in [d_min, d_max] (not uniform over the cell area), as
       seed_000 §2.5/§6.1 states "d_n ~ U[10, 100] m".
    2. Fading is i.i.d. per (client, subchannel, round) on the uplink and per
       (client, round) on the downlink, as recommended in seed_000 [AMBIG-2].
    3. Log-normal shadowing (default 0 dB) is drawn once per client, with geometry.
       A moving world (``wireless.mobility``, ``shadowing_decorrelation_m``;
       :class:`rayfl.wireless.world.MovingGeometry`) passes each round's
       distances and shadowing to :meth:`WirelessChannel.state_of`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from rayfl.wireless.config import WirelessConfig
from rayfl.wireless.units import db_to_linear, dbm_to_w, linear_to_db

FloatArray = npt.NDArray[np.float64]


def place_clients(
    num_clients: int,
    *,
    distance_min_m: float,
    distance_max_m: float,
    rng: np.random.Generator,
) -> FloatArray:
    """Draw client-to-base-station distances d ~ U[d_min, d_max].

    Uniform in distance, not in area, as seed_000 §2.5/§6.1 states "d_n ~ U[10, 100]
    m" (Table I of Zhao et al.).

    Args:
        num_clients: N, number of clients, >= 0.
        distance_min_m: Smallest distance in m, > 0.
        distance_max_m: Largest distance in m, > distance_min_m.
        rng: Source of randomness.

    Returns:
        Distances in m, shape (N,), float64.

    Raises:
        ValueError: If not 0 < distance_min_m < distance_max_m.
    """
    if not 0 < distance_min_m < distance_max_m:
        raise ValueError(
            "distance_min_m must satisfy 0 < distance_min_m < distance_max_m, got "
            f"{distance_min_m:g} and {distance_max_m:g}"
        )
    return rng.uniform(distance_min_m, distance_max_m, size=num_clients)


def path_loss_db(
    distance_m: npt.ArrayLike, *, ref_db: float, exponent: float
) -> FloatArray:
    """Compute the log-distance path loss PL(d) = ref_db + 10·α·log10(d / 1 m).

    seed_000 §2.5: ref_db = 30 dB at 1 m, α = 2.8, i.e. gain 10^{-3}·d^{-2.8}.

    Args:
        distance_m: Distance in m, any shape, > 0.
        ref_db: Loss at the 1 m reference distance in dB.
        exponent: Path-loss exponent α.

    Returns:
        Path loss in dB (positive = attenuation), same shape, float64.

    Example:
        >>> float(path_loss_db(100.0, ref_db=30.0, exponent=2.0))
        70.0
    """
    distance = np.asarray(distance_m, dtype=np.float64)
    return ref_db + 10.0 * exponent * np.log10(distance)


def fading_power_gain(
    shape: int | tuple[int, ...],
    *,
    kind: Literal["rayleigh", "rician", "none"],
    rng: np.random.Generator,
    rician_k_db: float = 0.0,
) -> FloatArray:
    """Draw unit-mean small-scale fading power gains g = abs(h)².

    Rayleigh: g ~ Exp(1) (seed_000 §2.5). Rician with factor K: h = sqrt(K/(K+1)) +
    sqrt(1/(K+1))·CN(0, 1), so E[g] = 1. ``"none"``: g = 1.

    Args:
        shape: Output shape, e.g. (N, K).
        kind: ``"rayleigh"``, ``"rician"`` or ``"none"``.
        rng: Source of randomness (unused for ``"none"``).
        rician_k_db: Rician K-factor in dB (``"rician"`` only).

    Returns:
        Power gains, ``shape``, float64, mean 1.

    Raises:
        ValueError: If ``kind`` is unknown.
    """
    if kind == "rayleigh":
        return rng.exponential(1.0, size=shape)
    if kind == "rician":
        k_linear = float(db_to_linear(rician_k_db))
        scatter = rng.standard_normal(size=shape) + 1j * rng.standard_normal(size=shape)
        h = np.sqrt(k_linear / (k_linear + 1)) + scatter * np.sqrt(0.5 / (k_linear + 1))
        return np.asarray(np.abs(h) ** 2, dtype=np.float64)
    if kind == "none":
        return np.ones(shape, dtype=np.float64)
    raise ValueError(f"kind must be one of 'rayleigh', 'rician', 'none', got {kind!r}")


def noise_power_w(*, noise_psd_dbm_hz: float, bandwidth_hz: float) -> float:
    """Compute the AWGN power σ_0² = N0·B (seed_000 §2.5).

    Args:
        noise_psd_dbm_hz: N0 in dBm/Hz.
        bandwidth_hz: B in Hz, > 0.

    Returns:
        Noise power in W.

    Example:
        >>> round(noise_power_w(noise_psd_dbm_hz=-174.0, bandwidth_hz=1.0) * 1e21, 3)
        3.981
    """
    return float(dbm_to_w(noise_psd_dbm_hz)) * bandwidth_hz


def snr_linear(
    *, tx_power_w: npt.ArrayLike, gain_linear: npt.ArrayLike, noise_power_w: float
) -> FloatArray:
    """Compute the SNR γ = P·abs(h)²/σ_0², eq. (12) of Zhao et al. (seed_000 §2.5).

    Args:
        tx_power_w: Transmit power P in W, broadcastable against ``gain_linear``.
        gain_linear: Channel power gain abs(h)², e.g. (N, K), float.
        noise_power_w: Noise power σ_0² in W, > 0.

    Returns:
        Linear SNR, broadcast shape, float64.

    Example:
        >>> round(float(snr_linear(tx_power_w=2.0, gain_linear=1e-9,
        ...     noise_power_w=1e-9)), 12)
        2.0
    """
    power = np.asarray(tx_power_w, dtype=np.float64)
    return power * np.asarray(gain_linear, dtype=np.float64) / noise_power_w


def shannon_rate_bps(
    *, bandwidth_hz: npt.ArrayLike, snr_linear: npt.ArrayLike
) -> FloatArray:
    """Compute the rate r = B·log2(1 + γ), eq. (11) of Zhao et al. (seed_000 §2.5).

    Args:
        bandwidth_hz: B in Hz, broadcastable against ``snr_linear``.
        snr_linear: Linear SNR γ >= 0, any shape.

    Returns:
        Rate in bit/s, broadcast shape, float64.

    Example:
        >>> float(shannon_rate_bps(bandwidth_hz=1e6, snr_linear=3.0))
        2000000.0
    """
    snr = np.asarray(snr_linear, dtype=np.float64)
    rate_bps = np.asarray(bandwidth_hz, dtype=np.float64) * np.log1p(snr) / np.log(2)
    return np.asarray(rate_bps, dtype=np.float64)


@dataclass(frozen=True)
class ChannelState:
    """One block-fading realization of the uplink (and downlink) channel.

    Attributes:
        distances_m: (N,) float64, client-BS distances in m.
        gain_linear: (N, K) float64, uplink power gain PL × shadowing × fading.
        gain_db: (N, K) float64, ``gain_linear`` in dB.
        snr_db: (N, K) float64, uplink SNR at the maximum client power, eq. (12).
        downlink_snr_db: (N,) float64, downlink (broadcast) SNR at the BS power,
            with noise N0·``downlink_bandwidth_hz`` [AMBIG-2].
        tx_power_w: Maximum client transmit power P^th in W.
        noise_power_w: σ_0² = N0·B in W, per subchannel.
        bandwidth_hz: B in Hz, per subchannel.
        downlink_bandwidth_hz: Bandwidth of the broadcast in Hz: B, or K·B with
            ``wireless.downlink_band: full``; None means B.
    """

    distances_m: FloatArray
    gain_linear: FloatArray
    gain_db: FloatArray
    snr_db: FloatArray
    downlink_snr_db: FloatArray
    tx_power_w: float
    noise_power_w: float
    bandwidth_hz: float
    downlink_bandwidth_hz: float | None = None

    @property
    def num_clients(self) -> int:
        """Number of clients N."""
        return int(self.gain_linear.shape[0])

    @property
    def num_subchannels(self) -> int:
        """Number of subchannels K."""
        return int(self.gain_linear.shape[1])


def _read_only(array: FloatArray) -> FloatArray:
    array.flags.writeable = False
    return array


class WirelessChannel:
    """Hold a fixed geometry and draw one block-fading realization per round.

    Args:
        config: Wireless parameters.
        num_clients: N, number of clients.
        rng: Generator used once, for distances then shadowing.
    """

    def __init__(
        self, config: WirelessConfig, num_clients: int, rng: np.random.Generator
    ) -> None:
        self.config = config
        self.num_clients = num_clients
        self.distances_m = _read_only(
            place_clients(
                num_clients,
                distance_min_m=config.distance_min_m,
                distance_max_m=config.distance_max_m,
                rng=rng,
            )
        )
        #: (N,) log-normal shadowing in dB, drawn once per client after distances.
        self.shadowing_db = _read_only(
            rng.normal(0.0, config.shadowing_std_db, size=num_clients)
        )
        self.large_scale_gain_linear = _read_only(
            self.large_scale_gain(self.distances_m, self.shadowing_db)
        )
        self.noise_power_w = noise_power_w(
            noise_psd_dbm_hz=config.noise_psd_dbm_hz, bandwidth_hz=config.bandwidth_hz
        )

    def large_scale_gain(
        self, distances_m: FloatArray, shadowing_db: FloatArray
    ) -> FloatArray:
        """Return the linear gain 10^(−(PL(d) + s)/10) of distances and shadowing.

        Args:
            distances_m: (N,) client-BS distances d_n in m.
            shadowing_db: (N,) shadowing s_n in dB (a loss: positive attenuates).

        Returns:
            (N,) float64, path loss × shadowing as a linear power gain.
        """
        cfg = self.config
        loss_db = shadowing_db + path_loss_db(
            distances_m, ref_db=cfg.path_loss_ref_db, exponent=cfg.path_loss_exponent
        )
        return np.asarray(db_to_linear(-loss_db), dtype=np.float64)

    def realize(
        self,
        rng: np.random.Generator,
        *,
        distances_m: FloatArray | None = None,
        shadowing_db: FloatArray | None = None,
    ) -> ChannelState:
        """Draw the fading of one round (uplink (N, K) first, then downlink (N,)).

        Args:
            rng: Generator for this round's fading.
            distances_m: The round's (N,) distances of a moving world (None:
                the fixed geometry's).
            shadowing_db: The round's (N,) shadowing in dB (None: the fixed one).

        Returns:
            The channel state of the round; its arrays are read-only.
        """
        cfg = self.config
        shape = (self.num_clients, cfg.num_subchannels)
        kind, k_db = cfg.fading, cfg.rician_k_db
        uplink_fading = fading_power_gain(shape, kind=kind, rician_k_db=k_db, rng=rng)
        downlink_fading = fading_power_gain(
            self.num_clients, kind=kind, rician_k_db=k_db, rng=rng
        )
        return self.state_of(
            uplink_fading,
            downlink_fading,
            distances_m=distances_m,
            shadowing_db=shadowing_db,
        )

    def state_of(
        self,
        uplink_fading: FloatArray,
        downlink_fading: FloatArray,
        *,
        distances_m: FloatArray | None = None,
        shadowing_db: FloatArray | None = None,
    ) -> ChannelState:
        """Return the channel state of given fading powers (e.g. correlated ones).

        Args:
            uplink_fading: (N, K) unit-mean fading power of each uplink.
            downlink_fading: (N,) unit-mean fading power of each downlink.
            distances_m: The round's (N,) distances in m when devices move
                (None: the fixed geometry's, ``distances_m``).
            shadowing_db: The round's (N,) shadowing in dB when it evolves
                (None: the once-per-client draw, ``shadowing_db``).

        Returns:
            The channel state; its arrays are read-only. Path loss, shadowing,
            uplink and downlink SNR all follow the given geometry.
        """
        cfg = self.config
        large = self.large_scale_gain_linear
        if distances_m is None and shadowing_db is None:
            distances_m = self.distances_m
        else:
            if distances_m is None:
                distances_m = self.distances_m
            if shadowing_db is None:
                shadowing_db = self.shadowing_db
            distances_m = _read_only(np.array(distances_m, dtype=np.float64))
            large = self.large_scale_gain(distances_m, shadowing_db)
        gain = large[:, None] * uplink_fading
        tx_power_w = float(dbm_to_w(cfg.tx_power_dbm))
        snr = snr_linear(
            tx_power_w=tx_power_w, gain_linear=gain, noise_power_w=self.noise_power_w
        )
        downlink_bandwidth_hz = cfg.bandwidth_hz * (
            cfg.num_subchannels if cfg.downlink_band == "full" else 1
        )
        downlink_snr = snr_linear(
            tx_power_w=dbm_to_w(cfg.bs_tx_power_dbm),
            gain_linear=large * downlink_fading,
            noise_power_w=noise_power_w(
                noise_psd_dbm_hz=cfg.noise_psd_dbm_hz,
                bandwidth_hz=downlink_bandwidth_hz,
            ),
        )
        return ChannelState(
            distances_m=distances_m,
            gain_linear=_read_only(gain),
            gain_db=_read_only(linear_to_db(gain)),
            snr_db=_read_only(linear_to_db(snr)),
            downlink_snr_db=_read_only(linear_to_db(downlink_snr)),
            tx_power_w=tx_power_w,
            noise_power_w=self.noise_power_w,
            bandwidth_hz=cfg.bandwidth_hz,
            downlink_bandwidth_hz=downlink_bandwidth_hz,
        )
