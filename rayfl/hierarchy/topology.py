"""Subnets, trust flags and device-edge distances of a hierarchical run.

Pure numpy: :func:`build_topology` turns the ``topology`` config into a
:class:`Topology` (who belongs to which edge, which edges are trusted, how far
each device is from its edge), seeded by (seed, "hier_topology").

Implementation details:
    1. ``clients_per_edge`` gives contiguous id blocks; ``assignment: random`` is
       a seeded permutation cut into near-equal blocks; ``nearest`` drops edges on
       a square grid of side √N·100 m and devices uniformly, each device joining
       its nearest edge (subnet sizes then vary; an empty subnet is an error).
    2. Trusted edges: exactly round(p_c N) drawn at random (spec A7) or
       Bernoulli(p_c) per edge; ``trusted_edges`` lists them explicitly.
    3. Distances for the wireless model: the geometric distance for ``nearest``
       (clamped to [d_min, d_max]), otherwise d_i ~ U[d_min, d_max] (spec §2.7).
    4. Baselines (spec §6): ``pedpfl`` puts every device under one untrusted
       aggregator; ``hfl_dp`` makes every edge untrusted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rayfl.hierarchy.config import TopologyConfig
from rayfl.seeding import rng_for

__all__ = ["Topology", "build_topology"]


@dataclass(frozen=True)
class Topology:
    """Who is under which edge.

    Attributes:
        subnets: Device ids of each edge, ascending, one list per edge.
        trusted: Trust flag per edge (N,) bool.
        distance_m: Device-edge distance per device (I,) float64.
    """

    subnets: tuple[tuple[int, ...], ...]
    trusted: npt.NDArray[np.bool_]
    distance_m: npt.NDArray[np.float64]

    @property
    def num_edges(self) -> int:
        """N."""
        return len(self.subnets)

    @property
    def sizes(self) -> npt.NDArray[np.int64]:
        """s_c per edge."""
        return np.array([len(s) for s in self.subnets], dtype=np.int64)

    def edge_of(self) -> npt.NDArray[np.int64]:
        """Return the edge id of every device (I,)."""
        out = np.empty(int(self.sizes.sum()), dtype=np.int64)
        for c, members in enumerate(self.subnets):
            out[list(members)] = c
        return out


def _blocks(sizes: list[int]) -> list[list[int]]:
    bounds = np.cumsum([0, *sizes])
    return [
        list(range(int(a), int(b)))
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]


def _equal_sizes(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if c < total % parts else 0) for c in range(parts)]


def build_topology(cfg: TopologyConfig, num_clients: int, seed: int) -> Topology:
    """Assign devices to edges, pick trusted edges and device-edge distances.

    Args:
        cfg: The ``topology`` section.
        num_clients: I, number of devices.
        seed: Run seed.

    Returns:
        The topology.

    Raises:
        ValueError: If sizes do not add up to I, or a subnet is empty.

    Example:
        >>> from rayfl.hierarchy.config import TopologyConfig
        >>> t = build_topology(TopologyConfig(num_edges=2, trusted_fraction=0.5), 4, 0)
        >>> t.subnets, int(t.trusted.sum())
        (((0, 1), (2, 3)), 1)
    """
    rng = rng_for(seed, "hier_topology")
    cost = cfg.cost
    num_edges = 1 if cfg.baseline == "pedpfl" else cfg.num_edges
    if num_edges > num_clients:
        raise ValueError(
            f"topology.num_edges ({num_edges}) must be <= data.num_clients ({num_clients})"
        )
    subnets, positions_m = _subnets(cfg, num_clients, num_edges, rng)
    trusted = _trusted(cfg, num_edges, rng)
    if positions_m is None:
        distance = rng.uniform(
            cost.distance_min_m, cost.distance_max_m, size=num_clients
        )
    else:
        distance = np.clip(positions_m, cost.distance_min_m, cost.distance_max_m)
    return Topology(
        tuple(tuple(int(i) for i in s) for s in subnets),
        trusted,
        np.asarray(distance, dtype=np.float64),
    )


def _subnets(
    cfg: TopologyConfig, num_clients: int, num_edges: int, rng: np.random.Generator
) -> tuple[list[list[int]], np.ndarray | None]:
    """Return the devices of each edge and, for ``nearest``, each one's distance."""
    cost = cfg.cost
    positions_m = None
    if cfg.baseline == "pedpfl":
        subnets = [list(range(num_clients))]
    elif cfg.clients_per_edge is not None:
        sizes = (
            [int(cfg.clients_per_edge)] * num_edges
            if isinstance(cfg.clients_per_edge, int)
            else [int(s) for s in cfg.clients_per_edge]
        )
        if sum(sizes) != num_clients:
            raise ValueError(
                f"topology.clients_per_edge sums to {sum(sizes)} but data.num_clients="
                f"{num_clients}"
            )
        subnets = _blocks(sizes)
    elif cfg.assignment == "contiguous":
        subnets = _blocks(_equal_sizes(num_clients, num_edges))
    elif cfg.assignment == "random":
        perm = rng.permutation(num_clients)
        subnets = [
            sorted(int(i) for i in perm[b])
            for b in _blocks(_equal_sizes(num_clients, num_edges))
        ]
    else:  # nearest
        side = math.ceil(math.sqrt(num_edges))
        spacing = 2 * cost.distance_max_m / math.sqrt(2)
        grid = np.array([(i % side, i // side) for i in range(num_edges)], float)
        edges_xy = (grid + 0.5) * spacing
        devices_xy = rng.uniform(0, side * spacing, size=(num_clients, 2))
        dist = np.linalg.norm(devices_xy[:, None, :] - edges_xy[None], axis=2)
        nearest = dist.argmin(axis=1)
        subnets = [np.flatnonzero(nearest == c).tolist() for c in range(num_edges)]
        empty = [c for c, s in enumerate(subnets) if not s]
        if empty:
            raise ValueError(
                f"topology.assignment=nearest left edges {empty} without devices; use "
                "fewer edges, more clients or another assignment"
            )
        positions_m = dist[np.arange(num_clients), nearest]
    return subnets, positions_m


def _trusted(
    cfg: TopologyConfig, num_edges: int, rng: np.random.Generator
) -> np.ndarray:
    """Return each edge's trust flag (baselines, a fixed list, or drawn)."""
    if cfg.baseline in ("hfl_dp", "pedpfl"):
        trusted = np.zeros(num_edges, dtype=bool)
    elif cfg.trusted_edges is not None:
        trusted = np.zeros(num_edges, dtype=bool)
        trusted[list(cfg.trusted_edges)] = True
    elif cfg.trust_sampling == "bernoulli":
        trusted = rng.random(num_edges) < cfg.trusted_fraction
    else:
        count = int(round(cfg.trusted_fraction * num_edges))
        trusted = np.zeros(num_edges, dtype=bool)
        trusted[rng.choice(num_edges, size=count, replace=False)] = True
    return trusted
