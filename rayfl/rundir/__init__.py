"""The run directory and its writers.

- :mod:`rayfl.rundir.results`: making and reading a run directory (``load_run``);
- :mod:`rayfl.rundir.stream`: the per-round and per-client rows, streamed;
- :mod:`rayfl.rundir.status`: ``summary.json``'s status, ``error.txt``, ``RunFailed``;
- :mod:`rayfl.rundir.checkpoint`: checkpoints and resuming;
- :mod:`rayfl.rundir.atomic`: atomic writes, a full disk;
- :mod:`rayfl.rundir.plots`, :mod:`rayfl.rundir.tracking`: plots, experiment trackers;
- :mod:`rayfl.rundir.runs`: the table of ``rayfl runs``;
- :mod:`rayfl.rundir.config`: the ``output:`` section of a config.

Import from the submodules: this package imports nothing.
"""
