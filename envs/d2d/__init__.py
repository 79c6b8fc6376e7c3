"""D2D's envs, named in the ``envs`` mapping of :class:`rayfl.d2d.plugin.D2D`.

``D2DNeighbor-v0`` (:mod:`.neighbor`, re-exported here), its
dynamics (:mod:`.backends`, :mod:`.surrogate`), ``D2DNeighbor-Flat-v0``
(:mod:`.flat`) and one PettingZoo agent per target (:mod:`.multiagent`).
:class:`rayfl.d2d.plugin.D2D` names them in its ``envs`` mapping.
"""

from envs.d2d.neighbor import (
    D2D_REWARDS,
    DEFAULT_D2D_CONFIG,
    D2DNeighborEnv,
    make_selection_policies,
    policy_action,
)

__all__ = [
    "DEFAULT_D2D_CONFIG",
    "D2D_REWARDS",
    "D2DNeighborEnv",
    "make_selection_policies",
    "policy_action",
]
