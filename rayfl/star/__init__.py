"""The star topology: N clients, one cloud, one wireless uplink (``StarRound``)."""

from rayfl.star.round import StarRound, StarTracker

__all__ = ["StarRound", "StarTracker"]
