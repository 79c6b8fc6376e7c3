"""Wrappers that adapt the scheduling env to RL libraries (transforms, not flags).

- :class:`FlattenAction`: a ``Dict`` action of ``assignment`` and ``power`` →
  one ``MultiDiscrete`` (SB3 and RLlib take MultiDiscrete directly).
- :class:`envs.rl.HungarianTopK`: a ``Box(N)`` of per-client scores → the
  assignment the ``learned`` policy makes at run time (top K eligible by score,
  subchannels by the Hungarian rule), with per-client controls when exposed.
- :class:`BoundedFeatures`: the (N, F) per-client features of
  :class:`envs.rl.ClientFeatures` → one flat ``Box(N·F)`` in [−1, 1]
  (:func:`bounded_features`), the observation of the ``*-Flat-v0`` ids.
- ``gymnasium.wrappers.FlattenObservation`` flattens the observation ``Dict``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from policies.features import FEATURE_NAMES

__all__ = [
    "BOUNDED_FEATURES",
    "BoundedFeatures",
    "FlattenAction",
    "bounded_features",
    "feature_names_of",
]

#: How :func:`bounded_features` maps each column of ``policies.features`` into
#: [−1, 1]: "unit" (already in [0, 1]), "z" (a z-score clipped to ±5, divided
#: by 5) or "squash" (x ≥ 0 → x / (1 + x), in [0, 1)).
BOUNDED_FEATURES: dict[str, str] = {
    "loss_relative": "unit",
    "loss_z": "z",
    "log1p_loss": "squash",
    "staleness_share": "unit",
    "upload_share": "unit",
    "upload_z": "z",
    "data_share": "squash",
    "best_gain_z": "z",
    "mean_gain_z": "z",
    "eligible": "unit",
    "log1p_epsilon": "squash",
    "subchannels_per_client": "squash",
    "available": "unit",
    "channel_age_share": "unit",
    "compute_z": "z",
}
_MAPS = ("unit", "z", "squash")


def _order(names: Sequence[str]) -> npt.NDArray[np.int64]:
    return np.array([_MAPS.index(BOUNDED_FEATURES[name]) for name in names])


def bounded_features(
    features: npt.ArrayLike, names: Sequence[str] = FEATURE_NAMES
) -> npt.NDArray[np.float32]:
    """Return the (N, F) client features mapped into [−1, 1], flattened row-major.

    Column by column (:data:`BOUNDED_FEATURES`): the [0, 1] columns stay, the
    z-scores (clipped to ±5 by ``client_features``) are divided by 5, and the
    unbounded non-negative columns x become x / (1 + x). Every map is monotone,
    so no ordering between clients is lost, and stateless, like the features.

    Args:
        features: (N, F) from ``policies.features.client_features``.
        names: Its F columns' names (default the core twelve).

    Returns:
        float32 array of shape (N · F,), every value in [−1, 1].

    Example:
        >>> row = np.zeros((1, len(FEATURE_NAMES)))
        >>> row[0, FEATURE_NAMES.index("loss_z")] = 5.0
        >>> row[0, FEATURE_NAMES.index("data_share")] = 1.0
        >>> out = bounded_features(row)
        >>> float(out[FEATURE_NAMES.index("loss_z")]), float(out[FEATURE_NAMES.index("data_share")])
        (1.0, 0.5)
    """
    table = np.asarray(features, dtype=np.float64)
    if table.ndim != 2 or table.shape[1] != len(names):
        raise ValueError(
            f"features must have shape (N, {len(names)}), got {table.shape}"
        )
    z = table / 5.0
    positive = np.maximum(table, 0.0)
    squash = positive / (1.0 + positive)
    out = np.choose(_order(names), [table, z, squash])
    return np.clip(out, -1.0, 1.0).astype(np.float32).reshape(-1)


def feature_names_of(env: gym.Env) -> tuple[str, ...]:
    """The feature columns of a wrapped env (the core twelve if it does not say)."""
    try:
        return tuple(env.get_wrapper_attr("feature_names"))
    except AttributeError:
        return FEATURE_NAMES


class BoundedFeatures(gym.ObservationWrapper):
    """Observation = :func:`bounded_features` of a (N, F) feature matrix: ``Box(N·F)`` in [−1, 1].

    Goes over :class:`envs.rl.ClientFeatures` (or :class:`envs.rl.EdgeScores`):
    the flat, bounded, scaled vector RL libraries take without a running
    normaliser (Stable-Baselines3 ``MlpPolicy`` without ``VecNormalize``).
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        shape = env.observation_space.shape
        #: The feature columns (``envs.rl.ClientFeatures.feature_names``).
        self.feature_names = feature_names_of(env)
        width = len(self.feature_names)
        if shape is None or len(shape) != 2 or shape[1] != width:
            raise ValueError(
                f"BoundedFeatures needs a (N, {width}) feature observation "
                f"(envs.rl.ClientFeatures), got {env.observation_space}"
            )
        self.observation_space = spaces.Box(-1.0, 1.0, (shape[0] * width,), np.float32)

    def observation(self, observation: Any) -> npt.NDArray[np.float32]:
        """Return ``bounded_features(observation, feature_names)``."""
        return bounded_features(observation, self.feature_names)


class FlattenAction(gym.ActionWrapper):
    """Concatenate a Dict(assignment, power) action into one MultiDiscrete."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.action_space
        if isinstance(space, spaces.MultiDiscrete):
            self._keys: tuple[str, ...] = ()
            self.action_space = space
            return
        if not isinstance(space, spaces.Dict) or "controls" in space.spaces:
            raise ValueError(
                "FlattenAction needs a MultiDiscrete or Dict(assignment, power) action; "
                "with controls use a Box-based wrapper (envs.rl.HungarianTopK)"
            )
        self._keys = tuple(space.spaces)
        self._sizes = [len(space[k].nvec) for k in self._keys]  # type: ignore[attr-defined]  # gymnasium: Dict items are Space
        self.action_space = spaces.MultiDiscrete(
            np.concatenate([space[k].nvec for k in self._keys])  # type: ignore[attr-defined]  # gymnasium: Dict items are Space
        )

    def action(self, action: npt.NDArray[np.int64]) -> Any:
        """Split the flat action back into the env's Dict."""
        if not self._keys:
            return action
        parts = np.split(np.asarray(action), np.cumsum(self._sizes)[:-1])
        return dict(zip(self._keys, parts, strict=False))
