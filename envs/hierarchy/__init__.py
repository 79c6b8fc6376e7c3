"""The hierarchy's envs, named in the plug-in's ``envs`` mapping.

``HierarchicalFL-v0`` and the per-edge policies
(:mod:`.scheduling`), its surrogate dynamics (:mod:`.surrogate`),
``HierarchicalFL-Flat-v0`` (:mod:`.flat`) and one PettingZoo agent per edge
(:mod:`.multiagent`). :class:`rayfl.hierarchy.plugin.Hierarchy` names them in
its ``envs`` mapping.
"""
