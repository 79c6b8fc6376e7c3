"""Subchannel assignments: the Hungarian matching and the validity rules.

An assignment is a (K,) int array: ``assignment[k]`` is the client on subchannel
k, or ``num_clients`` if k idles (the env's ``MultiDiscrete([N + 1] * K)``).
These pure functions back :class:`policies.base.Policy`.

Symbol table: N → ``num_clients``, K → ``num_subchannels``, a_{n,k} = 1 →
``assignment[k] == n``.

Implementation details:
    1. Subchannel matching is the Hungarian method (``linear_sum_assignment``) on
       a (candidate clients × subchannels) score matrix, one client per subchannel.
    2. Prefilter: some optimal matching uses only each subchannel's ``K`` best
       clients. If subchannel k held a client r outside its top K, one of
       its top-K clients is free (the other K - 1 subchannels hold at most K - 1
       of them); swapping it in never lowers the total (nor raises a bottleneck).
       So the matching is solved on the union of the per-subchannel top-K rows.
    3. Non-finite scores (e.g. a -inf dB gain) are clipped to ±1e12, so a useless
       client is still assignable rather than making the matching infeasible.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment

_BIG_SCORE = 1e12


def assign_subchannels(
    score: npt.ArrayLike,
    clients: npt.ArrayLike,
    *,
    idle: int,
    maximize: bool = True,
    prefilter: bool = True,
) -> npt.NDArray[np.int64]:
    """Match distinct clients to subchannels, optimising the total score.

    Solves max (or min) Σ_k score[a_k, k] over injective maps from the used
    subchannels to ``clients`` with the Hungarian method; min(K, len(clients))
    subchannels are used, the others get ``idle``.

    Args:
        score: (num_clients, num_subchannels) float scores, e.g. gains in dB.
        clients: 1-D array of distinct candidate client ids (rows of ``score``).
        idle: Value written on unused subchannels (the env uses ``num_clients``).
        maximize: Maximise the total score if True, minimise it otherwise.
        prefilter: Solve on the union of each subchannel's top-K candidates
            (module docstring, detail 2); the optimum value is unchanged.

    Returns:
        (num_subchannels,) int64 array: the client on each subchannel, or ``idle``.

    Raises:
        ValueError: If ``score`` is not 2-D or ``clients`` repeats an id.

    Example:
        >>> gain_db = [[10.0, 1.0], [9.0, 8.0], [0.0, 0.0]]
        >>> assign_subchannels(gain_db, [0, 1, 2], idle=3).tolist()
        [0, 1]
    """
    weights = np.asarray(score, dtype=np.float64)
    if weights.ndim != 2:
        raise ValueError(
            f"score must be 2-D (clients, subchannels), got {weights.shape}"
        )
    ids = np.asarray(clients, dtype=np.int64).ravel()
    num_subchannels = weights.shape[1]
    assignment = np.full(num_subchannels, idle, dtype=np.int64)
    if ids.size == 0 or num_subchannels == 0:
        return assignment
    if np.unique(ids).size != ids.size:
        raise ValueError(f"clients must be distinct ids, got {ids.tolist()}")
    weights = weights[ids] if maximize else -weights[ids]
    if not np.isfinite(weights).all():
        weights = np.nan_to_num(weights, nan=-_BIG_SCORE)
        weights = np.clip(weights, -_BIG_SCORE, _BIG_SCORE)
    rows = np.arange(ids.size)
    if prefilter and ids.size > num_subchannels:
        by_subchannel = np.ascontiguousarray(-weights.T)  # (K, n): fast row partition
        top = np.argpartition(by_subchannel, num_subchannels - 1, axis=1)
        rows = np.unique(top[:, :num_subchannels])
        weights = weights[rows]
    row_ind, col_ind = linear_sum_assignment(weights, maximize=True)
    assignment[col_ind] = ids[rows[row_ind]]
    return assignment


def check_assignment(
    assignment: npt.ArrayLike,
    eligible: npt.ArrayLike,
    *,
    require_full: bool = True,
) -> None:
    """Check an assignment against the env's action rules.

    Args:
        assignment: (num_subchannels,) ints; ``num_clients`` means idle.
        eligible: (num_clients,) bool mask of clients allowed to upload.
        require_full: Also require every subchannel used when at least
            ``num_subchannels`` clients are eligible.

    Raises:
        ValueError: Naming the subchannel and client that break a rule.

    Example:
        >>> check_assignment([1, 0], [True, True])
        >>> check_assignment([1, 1], [True, True])
        Traceback (most recent call last):
        ...
        ValueError: client 1 is on subchannels [0, 1]; at most one allowed
    """
    values = np.asarray(assignment).ravel()
    mask = np.asarray(eligible, dtype=bool).ravel()
    num_clients = mask.size
    for subchannel, client in enumerate(values.tolist()):
        if not 0 <= client <= num_clients:
            raise ValueError(
                f"subchannel {subchannel}: client {client} outside [0, {num_clients}]"
            )
        if client < num_clients and not mask[client]:
            raise ValueError(f"subchannel {subchannel}: client {client} is ineligible")
    used = values[values < num_clients]
    ids, counts = np.unique(used, return_counts=True)
    for client in ids[counts > 1].tolist():
        where = np.flatnonzero(values == client).tolist()
        raise ValueError(
            f"client {client} is on subchannels {where}; at most one allowed"
        )
    if require_full and mask.sum() >= values.size and used.size < values.size:
        idle = np.flatnonzero(values == num_clients).tolist()
        raise ValueError(
            f"subchannels {idle} idle although enough clients are eligible"
        )
