"""The Ray lifecycle: starting, joining and stopping a cluster, and what it can hold.

- :mod:`rayfl.cluster.session`: ``RaySession``, the Ray session a run starts or joins;
- :mod:`rayfl.cluster.config`: the ``ray:`` section of a config;
- :mod:`rayfl.cluster.files`: Ray's session directory and logs, kept or removed;
- :mod:`rayfl.cluster.watchdog`: stops Ray's processes when the driver dies;
- :mod:`rayfl.cluster.address`: parsing and reaching a cluster's address;
- :mod:`rayfl.cluster.resources`: the memory and CPU guard (``ResourceError``).

Import from the submodules: this package imports nothing (the watchdog runs as
``python -m rayfl.cluster.watchdog`` and must start fast).
"""
