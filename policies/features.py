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

A moving world (issue 48, :mod:`rayfl.star.moving`) adds observation keys;
each adds a column after these twelve, in this order, when its key is in the
observation (:func:`feature_names`; the envs and an exported policy's
``features`` list say which):

| feature | key | value | range |
|---------|-----|-------|-------|
| available | ``available`` | 1 reachable this round, 0 not | {0, 1} |
| channel_age_share | ``channel_age`` | a_n / (t + 1), the age of the seen channel over the rounds so far | [0, 1] |
| compute_z | ``compute_time_s`` | z-score across clients of the local training time d^lo_n | [−5, 5] |

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

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "FEATURE_NAMES",
    "MOVING_FEATURES",
    "check_feature_names",
    "NUM_FEATURES",
    "client_features",
    "client_features_many",
    "feature_names",
]

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
#: A moving world's feature → the observation key it reads (second table).
MOVING_FEATURES = {
    "available": "available",
    "channel_age_share": "channel_age",
    "compute_z": "compute_time_s",
}
_Z_CLIP = 5.0


def feature_names(keys: Iterable[str] = ()) -> tuple[str, ...]:
    """Return the feature columns of an observation with ``keys``.

    The twelve core features, then each moving-world feature whose key is in
    ``keys`` (module tables).

    Example:
        >>> feature_names(["channel_gain", "compute_time_s"])[-2:]
        ('subchannels_per_client', 'compute_z')
    """
    present = set(keys)
    extra = tuple(f for f, key in MOVING_FEATURES.items() if key in present)
    return FEATURE_NAMES + extra


def check_feature_names(names: Sequence[str]) -> tuple[str, ...]:
    """Return the moving-world features of ``names`` (after the core twelve).

    Raises:
        ValueError: If ``names`` is not the core twelve followed by
            moving-world features.
    """
    names = tuple(names)
    extra = names[len(FEATURE_NAMES) :]
    if names[: len(FEATURE_NAMES)] != FEATURE_NAMES or any(
        f not in MOVING_FEATURES for f in extra
    ):
        raise ValueError(
            f"feature names must be {list(FEATURE_NAMES)} followed by some of "
            f"{list(MOVING_FEATURES)}, got {list(names)}"
        )
    return extra


def _moving_columns(
    obs: Mapping[str, Any],
    extra: Sequence[str],
    rounds_so_far: Any,
    zscore: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]],
) -> list[npt.NDArray[np.float64]]:
    """The columns of the moving-world features ``extra`` (second table)."""
    missing = [MOVING_FEATURES[f] for f in extra if MOVING_FEATURES[f] not in obs]
    if missing:
        raise ValueError(
            f"features {list(extra)} need the observation keys {missing}: the "
            "policy was trained in a moving world (wireless.availability, "
            "cpu_frequency_distribution or round_deadline_s) this run does not have"
        )
    columns = []
    for f in extra:
        value = np.asarray(obs[MOVING_FEATURES[f]], dtype=np.float64)
        if f == "available":
            columns.append((value > 0.5).astype(np.float64))
        elif f == "channel_age_share":
            columns.append(np.clip(value / rounds_so_far, 0.0, 1.0))
        else:
            columns.append(zscore(value))
    return columns


def _zscore(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Return (x − mean) / (std + 1e-6) clipped to ±5 (0 for a constant vector)."""
    centred = values - values.mean()
    return np.clip(centred / (values.std() + 1e-6), -_Z_CLIP, _Z_CLIP)  # type: ignore[no-any-return]  # numpy stubs: Any


def client_features(
    obs: Mapping[str, Any], names: Sequence[str] = FEATURE_NAMES
) -> npt.NDArray[np.float32]:
    """Return the (N, F) feature matrix of one observation (tables above).

    Args:
        obs: A scheduling-env observation: ``channel_gain`` (N, K) dB, and
            ``loss``, ``upload_count``, ``privacy_spent``, ``staleness``,
            ``data_size``, ``eligible`` (N,), ``round`` (1,); and the keys of
            the moving-world features in ``names``.
        names: The columns: the core twelve, then moving-world features
            (:func:`feature_names`).

    Returns:
        float32 array of shape (N, len(names)).

    Raises:
        ValueError: If ``names`` is not of that form, or ``obs`` lacks a key
            a moving-world feature reads.

    Example:
        >>> obs = {"channel_gain": np.zeros((2, 1)), "loss": np.array([1.0, 2.0]),
        ...        "upload_count": np.zeros(2), "privacy_spent": np.zeros(2),
        ...        "staleness": np.zeros(2), "data_size": np.array([1.0, 3.0]),
        ...        "eligible": np.ones(2), "round": np.zeros(1)}
        >>> client_features(obs)[:, [0, 6, 11]].tolist()
        [[0.5, 0.5, 0.5], [1.0, 1.5, 0.5]]
    """
    extra = check_feature_names(names)
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
    columns += _moving_columns(obs, extra, rounds_so_far, _zscore)
    return np.stack(columns, axis=1).astype(np.float32)


def _zscore_rows(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """:func:`_zscore` of each row of a (E, N) array."""
    centred = values - values.mean(axis=1, keepdims=True)
    spread = values.std(axis=1, keepdims=True) + 1e-6
    return np.clip(centred / spread, -_Z_CLIP, _Z_CLIP)  # type: ignore[no-any-return]  # numpy stubs: Any


def client_features_many(
    obs: Mapping[str, Any], names: Sequence[str] = FEATURE_NAMES
) -> npt.NDArray[np.float32]:
    """Return :func:`client_features` of E observations stacked on a leading axis.

    The same numbers as the function on each lane (the same operations, each
    reduction along one row), for the vector envs' E lanes at once; a lane
    with a non-finite gain (a closed subchannel) takes the one-lane function.

    Args:
        obs: Batched observations: ``channel_gain`` (E, N, K), the per-client
            keys (E, N), ``round`` (E, 1).
        names: The columns (:func:`client_features`).

    Returns:
        float32 array of shape (E, N, len(names)).
    """
    extra = check_feature_names(names)
    gain = np.asarray(obs["channel_gain"], dtype=np.float64)
    lanes, num_clients, num_subchannels = gain.shape
    if not np.isfinite(gain).all():
        return np.stack(
            [
                client_features({k: v[e] for k, v in obs.items()}, names)
                for e in range(lanes)
            ]
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
    columns += _moving_columns(obs, extra, rounds_so_far, _zscore_rows)
    return np.stack(columns, axis=2).astype(np.float32)
