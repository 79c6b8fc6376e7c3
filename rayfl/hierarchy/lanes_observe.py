"""Many lanes' edge observations at once: ``EdgeScheduling.observations`` as columns.

:func:`observe_lanes` returns, for each given lane run, what
:meth:`rayfl.hierarchy.scheduling.EdgeScheduling.observations` returns for it
(the same keys, values and dtypes: every number is the same elementwise
operation on the same inputs), computed per edge over a (lane × device)
stack instead of lane by lane. Each lane's arrays are rows of the stacks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["observe_lanes"]


def observe_lanes(
    runs: Sequence[Any],
    rounds: Sequence[int],
    privacy_spent: npt.NDArray[np.float64] | None,
) -> list[list[dict[str, npt.NDArray[np.float32]]]]:
    """Return every edge's observation of each run's global round.

    Args:
        runs: The lanes' runs (:class:`rayfl.hierarchy.lanes_round.LaneRun`),
            all of one config (the same subnets and bands).
        rounds: Global round k of each run.
        privacy_spent: Worst-observer ε per device of each run (L, I), or
            None for zeros.

    Returns:
        Per run, one observation dict per edge (``EdgeScheduling.observations``).
    """
    first = runs[0].scheduling
    lanes = len(runs)
    # np.array of equal rows: np.stack without its per-row expand_dims
    fading = np.array(
        [
            run.scheduling.draw(run.scheduling.fading_key(k, run.interval.period_index))
            for run, k in zip(runs, rounds, strict=True)
        ]
    )
    uploads = np.array([run.interval.local_update_count for run in runs]).astype(
        np.float64
    )
    caps = np.array([run.interval.participants for run in runs])
    loss = np.nan_to_num(np.array([run.scheduling.loss for run in runs]), nan=0.0)
    staleness = np.array([run.scheduling.staleness for run in runs])
    eps = (
        np.zeros(uploads.shape)
        if privacy_spent is None
        else np.minimum(np.asarray(privacy_spent, dtype=np.float64), 3e38)
    )
    round_column = np.asarray(rounds, dtype=np.float32)[:, None]
    out: list[list[dict[str, npt.NDArray[np.float32]]]] = [[] for _ in runs]
    for c, members in enumerate(first.subnets):
        k_e = first.num_subchannels[c]
        gain = first.large_scale_db[members, None] + 10 * np.log10(
            fading[:, members, :k_e]
        )
        for lane in range(lanes):
            open_k = first.open_subchannels(k_e, len(members), int(caps[lane, c]))
            gain[lane, :, open_k:] = -np.inf
        table = {
            "channel_gain": gain.astype(np.float32),
            "loss": np.maximum(loss[:, members], 0).astype(np.float32),
            "upload_count": uploads[:, members].astype(np.float32),
            "privacy_spent": eps[:, members].astype(np.float32),
            "staleness": staleness[:, members].astype(np.float32),
            "data_size": np.repeat(
                first.num_train[members].astype(np.float32)[None], lanes, axis=0
            ),
            "eligible": np.ones((lanes, len(members)), dtype=np.float32),
        }
        for lane in range(lanes):
            obs = {key: column[lane] for key, column in table.items()}
            obs["round"] = round_column[lane]
            out[lane].append(obs)
    return out
