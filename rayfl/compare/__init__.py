"""Comparisons: one config run under several policies, algorithms or values.

- :mod:`rayfl.compare.variants`: ``rayfl compare`` and ``sweep:`` (the runs, their table);
- :mod:`rayfl.compare.seeds`: the same over several seeds (mean ± std, plots);
- :mod:`rayfl.compare.progress`: the progress line, the row log and ``CompareFailed``.

Import from the submodules: this package imports nothing, so ``rayfl.compare.progress``
stays light (no torch, no Ray) for the command line's error handling.
"""
