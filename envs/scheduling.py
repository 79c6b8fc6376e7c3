"""Old import path of the star's env; it lives in :mod:`envs.star.scheduling`."""

from envs.star.scheduling import DEFAULT_CONFIG, REWARDS, WirelessFLEnv

__all__ = ["DEFAULT_CONFIG", "REWARDS", "WirelessFLEnv"]
