"""Proportional-fair scheduling: largest instantaneous-to-average SNR ratio.

The "proportional fair" (PF) policy of Yang, Liu, Quek & Poor, "Scheduling
Policies for Federated Learning in Wireless Networks", IEEE Trans. Commun. 68(1),
2020, Sec. III: each round the access point schedules the K clients with the
largest ratio ρ_n^t / ρ̄_n of instantaneous SNR to average SNR. A client is
served when its channel is good *for it*, not when it is good in absolute terms.

Symbol table: N → ``num_clients``, K → ``num_subchannels``, ρ_n^t →
``instant_gain`` (linear), ρ̄_n → ``average_gain`` (linear), W → ``window``.

Implementation details:
    1. The paper's ρ̄_n is the known mean SNR. The policy does not know it, so it
       tracks it with an exponential moving average of window W rounds:
       ρ̄_n ← (1 − 1/W)·ρ̄_n + (1/W)·ρ_n^t (the classic PF tracker). The ratio
       uses ρ̄_n from *before* this round's update. The first observation sets
       ρ̄_n = ρ_n^t, so the first round ranks all clients equally.
    2. The client's instantaneous SNR ρ_n^t is its wideband gain, the mean of its
       linear gains over the K subchannels (the paper's channel is flat across
       subchannels). Transmit power and noise cancel in the ratio.
    3. Ties in the ratio are broken by the larger ρ_n^t, then the lower id.
    4. All clients' averages are updated every call, eligible or not.
    5. The chosen clients get subchannels by the Hungarian method maximising
       Σ gain [dB]. ``reset`` forgets the averages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

import numpy as np
import numpy.typing as npt
from annotated_types import Ge
from gymnasium import spaces

from policies.base import Observation, Policy

_TINY_GAIN = 1e-300


def wideband_gain(gain_db: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Return each client's mean linear gain over its subchannels.

    Args:
        gain_db: (num_clients, num_subchannels) gains in dB.

    Returns:
        (num_clients,) float64 linear gains.

    Example:
        >>> wideband_gain([[10.0, 20.0], [0.0, 0.0]]).tolist()
        [55.0, 1.0]
    """
    linear = np.power(10.0, np.asarray(gain_db, dtype=np.float64) / 10.0)
    mean: npt.NDArray[np.float64] = linear.mean(axis=1)
    return mean


class ProportionalFairPolicy(Policy):
    """Schedule the K eligible clients with the largest ρ_n^t / ρ̄_n (Yang et al. 2020).

    Args:
        observation_space: The env's observation space.
        action_space: The env's action space.
        window: W ≥ 1, rounds of the exponential average of the SNR (detail 1).

    Example:
        >>> obs_space = spaces.Dict({
        ...     "channel_gain": spaces.Box(-np.inf, np.inf, (2, 1)),
        ...     "eligible": spaces.Box(0, 1, (2,))})
        >>> policy = ProportionalFairPolicy(obs_space, spaces.MultiDiscrete([3]))
        >>> ones = np.ones(2)
        >>> policy({"channel_gain": np.array([[0.0], [-20.0]]), "eligible": ones})
        array([0])
        >>> policy({"channel_gain": np.array([[0.0], [-10.0]]), "eligible": ones})
        array([1])
    """

    #: W, rounds of the SNR average: any W ≥ 1.
    tunable: ClassVar[Mapping[str, tuple[float, float, float]]] = {
        "window": (20.0, 1.0, float("inf"))
    }

    def __init__(
        self,
        observation_space: spaces.Space[Any],
        action_space: spaces.Space[Any],
        *,
        window: Annotated[float, Ge(1)] = 20.0,
        context: Any = None,
    ) -> None:
        if not window >= 1.0:
            raise ValueError(f"window must be >= 1 round, got {window}")
        self.window = float(window)
        self.average_gain: npt.NDArray[np.float64] | None = None
        super().__init__(observation_space, action_space, context=context)

    def reset(self, seed: int | None = None) -> None:
        """Reset the generator and forget the average SNRs."""
        super().reset(seed)
        self.average_gain = None

    def schedule(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Rank eligible clients by ρ_n^t / ρ̄_n, update ρ̄_n, match subchannels."""
        gain_db = self.field(obs, "channel_gain")
        instant_gain = wideband_gain(gain_db)
        average_gain = instant_gain if self.average_gain is None else self.average_gain
        ratio = instant_gain / np.maximum(average_gain, _TINY_GAIN)
        self.average_gain = average_gain + (instant_gain - average_gain) / self.window
        eligible = np.flatnonzero(self.eligible_mask(obs))
        ranked = eligible[
            np.lexsort((eligible, -instant_gain[eligible], -ratio[eligible]))
        ]
        return self.assign_subchannels(gain_db, ranked[: self.num_subchannels])
