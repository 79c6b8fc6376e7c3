"""The learned scheduler's pieces below the app: its config section and network.

Importing this package imports no RLlib; :mod:`rayfl.rl.module` needs the
``rl`` extra (``pip install -e '.[rl]'``). Training itself is the app
:mod:`rayfl.train_policy` (``rayfl train-policy``).
"""

from rayfl.rl.config import RLConfig

__all__ = ["RLConfig"]
