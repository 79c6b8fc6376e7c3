"""Old import path of the star's vector env; it lives in :mod:`envs.star.vector`."""

from envs.star.vector import LaneBackend, LaneSystem, WirelessFLVectorEnv

__all__ = ["LaneBackend", "LaneSystem", "WirelessFLVectorEnv"]
