"""Per-client features of a scheduling observation: the learned policy's input.

The scheduling env's observation (``envs.star.scheduling`` table) holds raw values in
very different units: gains around −100 dB, losses of a few nats, counts that
grow with the round, data sizes in the thousands. :func:`client_features` turns
one observation into a (N, F) float32 array of scale-free features, one row per
client, so that one small network shared by all clients (``policies.learned``)
can score every client; the same function serves training (through
``envs.rl.ClientFeatures``) and inference, so the two never disagree.

Symbol table: N → ``num_clients``, K → ``num_subchannels``, F →
``NUM_FEATURES``, h_{n,k} [dB] → ``obs["channel_gain"][n, k]``, ℓ_n →
``obs["loss"][n]``, Υ_n → ``obs["upload_count"][n]``, t → ``obs["round"]``.

| column | feature | range |
|--------|---------|-------|
| 0 | ℓ_n / max_m ℓ_m (loss relative to the worst client) | [0, 1] |
| 1 | z-score of ℓ_n across clients | [−5, 5] |
| 2 | log(1 + ℓ_n) | [0, ∞) |
| 3 | staleness_n / (t + 1) | [0, 1] |
| 4 | Υ_n / (t + 1), the share of rounds the client uploaded in | [0, 1] |
| 5 | z-score of Υ_n across clients | [−5, 5] |
| 6 | N · |D_n| / Σ_m |D_m| (data share; 1 = average) | [0, N] |
| 7 | z-score across clients of max_k h_{n,k} (best subchannel) | [−5, 5] |
| 8 | z-score across clients of mean_k h_{n,k} | [−5, 5] |
| 9 | eligible (1 may upload, 0 may not) | {0, 1} |
| 10 | log(1 + ε_n), privacy spent | [0, ∞) |
| 11 | K / N (the fraction of clients a round can schedule) | (0, ∞) |

Implementation details:
    1. Normalisation is a fixed, stateless transform (ratios and z-scores taken
       across the clients of the same observation), not running statistics
       (gymnasium's ``NormalizeObservation``): the exported policy then needs no
       saved normaliser, acts identically in any env, and the features mean the
       same thing for N = 10 and N = 1000 — the per-client network transfers
       across system sizes.
    2. z-scores use the population std plus 1e-6 and are clipped to [−5, 5];
       with all clients equal they are 0.
    3. Non-finite gains (a −inf dB link) are replaced by the lowest finite gain
       minus 10 dB before the z-scores, so one dead link cannot turn every
       feature into NaN.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["FEATURE_NAMES", "NUM_FEATURES", "client_features", "client_features_many"]

FEATURE_NAMES = (
    "loss_relative",
    "loss_z",
    "log1p_loss",
    "staleness_share",
    "upload_share",
    "upload_z",
    "data_share",
    "best_gain_z",
    "mean_gain_z",
    "eligible",
    "log1p_epsilon",
    "subchannels_per_client",
)
NUM_FEATURES = len(FEATURE_NAMES)
_Z_CLIP = 5.0


def _zscore(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Return (x − mean) / (std + 1e-6) clipped to ±5 (0 for a constant vector)."""
    centred = values - values.mean()
    return np.clip(centred / (values.std() + 1e-6), -_Z_CLIP, _Z_CLIP)  # type: ignore[no-any-return]  # numpy stubs: Any


def client_features(obs: Mapping[str, Any]) -> npt.NDArray[np.float32]:
    """Return the (N, F) feature matrix of one observation (table above).

    Args:
        obs: A scheduling-env observation: ``channel_gain`` (N, K) dB, and
            ``loss``, ``upload_count``, ``privacy_spent``, ``staleness``,
            ``data_size``, ``eligible`` (N,), ``round`` (1,).

    Returns:
        float32 array of shape (N, ``NUM_FEATURES``).

    Example:
        >>> obs = {"channel_gain": np.zeros((2, 1)), "loss": np.array([1.0, 2.0]),
        ...        "upload_count": np.zeros(2), "privacy_spent": np.zeros(2),
        ...        "staleness": np.zeros(2), "data_size": np.array([1.0, 3.0]),
        ...        "eligible": np.ones(2), "round": np.zeros(1)}
        >>> client_features(obs)[:, [0, 6, 11]].tolist()
        [[0.5, 0.5, 0.5], [1.0, 1.5, 0.5]]
    """
    gain = np.asarray(obs["channel_gain"], dtype=np.float64)
    num_clients, num_subchannels = gain.shape
    finite = np.isfinite(gain)
    if not finite.all():
        floor = gain[finite].min() - 10.0 if finite.any() else 0.0
        gain = np.where(finite, gain, floor)
    loss = np.maximum(np.asarray(obs["loss"], dtype=np.float64), 0.0)
    uploads = np.asarray(obs["upload_count"], dtype=np.float64)
    staleness = np.asarray(obs["staleness"], dtype=np.float64)
    data = np.asarray(obs["data_size"], dtype=np.float64)
    epsilon = np.maximum(np.asarray(obs["privacy_spent"], dtype=np.float64), 0.0)
    rounds_so_far = float(np.asarray(obs["round"]).reshape(-1)[0]) + 1.0
    columns = [
        loss / max(loss.max(), 1e-12),
        _zscore(loss),
        np.log1p(loss),
        staleness / rounds_so_far,
        uploads / rounds_so_far,
        _zscore(uploads),
        num_clients * data / max(data.sum(), 1e-12),
        _zscore(gain.max(axis=1)),
        _zscore(gain.mean(axis=1)),
        (np.asarray(obs["eligible"], dtype=np.float64) > 0.5).astype(np.float64),
        np.log1p(np.minimum(epsilon, 1e30)),
        np.full(num_clients, num_subchannels / num_clients),
    ]
    return np.stack(columns, axis=1).astype(np.float32)


def _zscore_rows(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """:func:`_zscore` of each row of a (E, N) array."""
    centred = values - values.mean(axis=1, keepdims=True)
    spread = values.std(axis=1, keepdims=True) + 1e-6
    return np.clip(centred / spread, -_Z_CLIP, _Z_CLIP)  # type: ignore[no-any-return]  # numpy stubs: Any


def client_features_many(obs: Mapping[str, Any]) -> npt.NDArray[np.float32]:
    """Return :func:`client_features` of E observations stacked on a leading axis.

    The same numbers as the function on each lane (the same operations, each
    reduction along one row), for the vector envs' E lanes at once; a lane
    with a non-finite gain (a closed subchannel) takes the one-lane function.

    Args:
        obs: Batched observations: ``channel_gain`` (E, N, K), the per-client
            keys (E, N), ``round`` (E, 1).

    Returns:
        float32 array of shape (E, N, ``NUM_FEATURES``).
    """
    gain = np.asarray(obs["channel_gain"], dtype=np.float64)
    lanes, num_clients, num_subchannels = gain.shape
    if not np.isfinite(gain).all():
        return np.stack(
            [client_features({k: v[e] for k, v in obs.items()}) for e in range(lanes)]
        )
    loss = np.maximum(np.asarray(obs["loss"], dtype=np.float64), 0.0)
    uploads = np.asarray(obs["upload_count"], dtype=np.float64)
    staleness = np.asarray(obs["staleness"], dtype=np.float64)
    data = np.asarray(obs["data_size"], dtype=np.float64)
    epsilon = np.maximum(np.asarray(obs["privacy_spent"], dtype=np.float64), 0.0)
    rounds_so_far = (
        np.asarray(obs["round"], dtype=np.float64).reshape(lanes, -1)[:, :1] + 1.0
    )
    columns = [
        loss / np.maximum(loss.max(axis=1, keepdims=True), 1e-12),
        _zscore_rows(loss),
        np.log1p(loss),
        staleness / rounds_so_far,
        uploads / rounds_so_far,
        _zscore_rows(uploads),
        num_clients * data / np.maximum(data.sum(axis=1, keepdims=True), 1e-12),
        _zscore_rows(gain.max(axis=2)),
        _zscore_rows(gain.mean(axis=2)),
        (np.asarray(obs["eligible"], dtype=np.float64) > 0.5).astype(np.float64),
        np.log1p(np.minimum(epsilon, 1e30)),
        np.full((lanes, num_clients), num_subchannels / num_clients),
    ]
    return np.stack(columns, axis=2).astype(np.float32)
