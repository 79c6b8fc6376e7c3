"""Training of the learned scheduler (issue 11): ``rayfl train-policy``.

Importing this package imports no RLlib; :mod:`rayfl.rl.train` and
:mod:`rayfl.rl.module` need the ``rl`` extra (``pip install -e '.[rl]'``).
"""

from rayfl.rl.config import RLConfig

__all__ = ["RLConfig"]
