"""The star topology: N clients, one cloud, one wireless uplink (``StarRound``)."""

from rayfl.star.round import StarRound, star_observation

__all__ = ["StarRound", "star_observation"]
