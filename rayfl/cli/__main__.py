"""``python -m rayfl.cli ARGS``: the ``rayfl`` command (:func:`rayfl.cli.main`)."""

import sys

from rayfl.cli import main

sys.exit(main())
