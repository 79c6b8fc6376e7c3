"""Gymnasium environments over the rayfl engine (registered on import)."""

from gymnasium.envs.registration import register

__all__ = ["ENV_IDS"]

_ENTRY_POINTS = {
    "WirelessFL-v0": "envs.star.scheduling:WirelessFLEnv",
    # devices → edges → cloud: per-edge subchannel scheduling (rayfl.hierarchy, issue 8)
    "HierarchicalFL-v0": "envs.hierarchy.scheduling:HierarchicalSchedulingEnv",
    # one D2D target's neighbour selection (rayfl.d2d, issue 9)
    "D2DNeighbor-v0": "envs.d2d.neighbor:D2DNeighborEnv",
    # RL-ready (issue 34): flat observations in [-1, 1], flat score actions,
    # gym.make(id) without arguments, surrogate mode and min_max_loss by default
    "WirelessFL-Flat-v0": "envs.star.flat:WirelessFLFlatEnv",
    "HierarchicalFL-Flat-v0": "envs.hierarchy.flat:HierarchicalFLFlatEnv",
    "D2DNeighbor-Flat-v0": "envs.d2d.flat:D2DNeighborFlatEnv",
}
ENV_IDS = tuple(_ENTRY_POINTS)
# gym.make_vec(id, num_envs=E): E emulate episodes in lockstep over shared actors
# (issue 34; envs.star.vector; the hierarchy's and D2D's: issue 47)
_VECTOR_ENTRY_POINTS = {
    "WirelessFL-v0": "envs.star.vector:WirelessFLVectorEnv",
    "HierarchicalFL-v0": "envs.hierarchy.vector:HierarchicalFLVectorEnv",
    "D2DNeighbor-v0": "envs.d2d.vector:D2DNeighborVectorEnv",
    # the flat id's lanes, surrogate by default as the id (issue 47)
    "WirelessFL-Flat-v0": "envs.star.flat:WirelessFLFlatVectorEnv",
}

for env_id, entry_point in _ENTRY_POINTS.items():
    register(
        id=env_id,
        entry_point=entry_point,
        vector_entry_point=_VECTOR_ENTRY_POINTS.get(env_id),
    )
