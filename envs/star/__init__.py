"""The star's envs, named in the plug-in's ``envs`` mapping.

``WirelessFL-v0`` (:mod:`.scheduling`), its dynamics
(:mod:`.backends`), its vector env over emulate lanes (:mod:`.vector`) and
``WirelessFL-Flat-v0`` (:mod:`.flat`). :class:`rayfl.star.plugin.Star` names
them in its ``envs`` mapping.
"""
