"""The hierarchy's own actors: one edge server per subnet and the cloud.

Edges run with ``num_cpus=0`` and are pinned (soft node affinity) to the node
of the device actor hosting most of their devices; the cloud also takes no CPU.
The device actors are the engine's ``ActorPool``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from rayfl.actors.pool import kill_actors
from rayfl.hierarchy.cloud import HierCloudServer
from rayfl.hierarchy.edge import EdgeServer
from rayfl.hierarchy.topology import Topology

__all__ = ["Servers"]


def _home(pool: Any, members: tuple[int, ...]) -> int:
    """Return the actor hosting most of ``members``."""
    return int(np.bincount(pool.actor_of[list(members)]).argmax())


@dataclass
class Servers:
    """The edge servers (one per subnet) and the cloud, with their nodes."""

    edges: list[Any]
    cloud: Any
    edge_nodes: list[str]
    cloud_node: str

    @classmethod
    def start(cls, topology: Topology, pool: Any, setup: Any, seed: int) -> Servers:
        """Start one edge per subnet (on its devices' home node) and the cloud."""
        edges = [
            EdgeServer.options(
                num_cpus=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(
                    pool.nodes[_home(pool, members)], soft=True
                ),
            ).remote(c, seed, bool(topology.trusted[c]))
            for c, members in enumerate(topology.subnets)
        ]
        cloud = HierCloudServer.options(num_cpus=0).remote(setup)
        return cls(
            edges=edges,
            cloud=cloud,
            edge_nodes=ray.get([e.ping.remote() for e in edges]),
            cloud_node=ray.get(cloud.ping.remote()),
        )

    def placement(self, pool: Any, topology: Topology) -> dict[str, Any]:
        """Return where the actors run (device actors, edges, cloud)."""
        nodes = pool.nodes
        return {
            "client_actors": pool.placement(),
            "edges": [
                {"node": node, "clients": list(s), "trusted": bool(t)}
                for node, s, t in zip(
                    self.edge_nodes, topology.subnets, topology.trusted, strict=True
                )
            ],
            "edges_on_home_node": sum(
                node == nodes[_home(pool, s)]
                for node, s in zip(self.edge_nodes, topology.subnets, strict=True)
            ),
            "cloud": self.cloud_node,
            "num_nodes": len(set(nodes) | set(self.edge_nodes) | {self.cloud_node}),
        }

    def reset(self, seed: int) -> None:
        """Reseed every edge's noise."""
        ray.get([e.reset.remote(int(seed)) for e in self.edges])

    def close(self) -> None:
        """Kill the edges and the cloud."""
        kill_actors(*self.edges, self.cloud)
        self.edges = []
