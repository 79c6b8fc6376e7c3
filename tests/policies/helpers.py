"""Spaces and observations shaped like the scheduling env's contract."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

PER_CLIENT_KEYS = ("loss", "upload_count", "privacy_spent", "staleness", "data_size")


def make_spaces(
    num_clients: int, num_subchannels: int, power_levels: int | None = None
) -> tuple[spaces.Dict, spaces.Space]:
    """Observation space of the env table, plain or Dict (with power) actions."""
    inf = np.inf
    per_client = {
        key: spaces.Box(0.0, inf, (num_clients,), np.float32) for key in PER_CLIENT_KEYS
    }
    observation_space = spaces.Dict(
        {
            "channel_gain": spaces.Box(
                -inf, inf, (num_clients, num_subchannels), np.float32
            ),
            **per_client,
            "eligible": spaces.Box(0.0, 1.0, (num_clients,), np.float32),
            "round": spaces.Box(0.0, inf, (1,), np.float32),
            # D2D neighbor selection (policies.channel_threshold); ignored by others
            "error_probability": spaces.Box(0.0, 1.0, (num_clients,), np.float32),
        }
    )
    assignment = spaces.MultiDiscrete([num_clients + 1] * num_subchannels)
    if power_levels is None:
        return observation_space, assignment
    action_space = spaces.Dict(
        {
            "assignment": assignment,
            "power": spaces.MultiDiscrete([power_levels] * num_subchannels),
        }
    )
    return observation_space, action_space


def sample_observation(
    observation_space: spaces.Dict, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """Sample the space, then make gains finite (path loss × Rayleigh) and
    `eligible` a random 0/1 mask of random density."""
    obs = dict(observation_space.sample())
    num_clients, num_subchannels = observation_space["channel_gain"].shape
    distance_km = rng.uniform(0.001, 0.0707, num_clients)
    path_loss_db = 128.1 + 37.6 * np.log10(distance_km)
    fading_db = 10.0 * np.log10(rng.exponential(1.0, (num_clients, num_subchannels)))
    obs["channel_gain"] = (-path_loss_db[:, None] + fading_db).astype(np.float32)
    density = rng.uniform(0.0, 1.0)
    obs["eligible"] = (rng.random(num_clients) < density).astype(np.float32)
    obs["data_size"] = rng.integers(100, 3000, num_clients).astype(np.float32)
    return obs


def observation(
    channel_gain: np.ndarray, eligible: np.ndarray | None = None, **fields: np.ndarray
) -> dict[str, np.ndarray]:
    """A hand-made observation: given fields, the rest zeros (all eligible)."""
    num_clients = channel_gain.shape[0]
    obs = {key: np.zeros(num_clients, np.float32) for key in PER_CLIENT_KEYS}
    obs["data_size"] = np.full(num_clients, 1000.0, np.float32)
    obs["eligible"] = np.ones(num_clients, np.float32)
    if eligible is not None:
        obs["eligible"] = np.asarray(eligible, np.float32)
    obs["round"] = np.zeros(1, np.float32)
    obs["channel_gain"] = np.asarray(channel_gain, np.float32)
    obs.update({key: np.asarray(value, np.float32) for key, value in fields.items()})
    return obs


def scheduled(action) -> np.ndarray:
    """The assignment array of an action of either space type."""
    return np.asarray(action["assignment"] if isinstance(action, dict) else action)
