"""FL algorithms: one recipe per module, built by name through a registry."""

from rayfl.algorithms.base import Algorithm, ClientContext, ClientUpdate
from rayfl.algorithms.registry import ALGORITHMS, make_algorithm

__all__ = ["ALGORITHMS", "Algorithm", "ClientContext", "ClientUpdate", "make_algorithm"]
