"""Where a PPO iteration's wall time goes: the learner update against the rest.

:class:`LearnerClock` wraps the algorithm's ``learner_group.update`` (the PPO
update: ``num_epochs`` passes of minibatch SGD over the train batch) and
accumulates its wall time; ``rayfl train-policy`` records it per iteration as
``progress.csv``'s ``learn_s`` (the rest of ``iteration_s`` is sampling: the
env steps, RLlib's connectors and the module's forward pass). RLlib's own
timers are smoothed across iterations, so they cannot split one iteration.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["LearnerClock"]


class LearnerClock:
    """Seconds spent in ``algo.learner_group.update`` since the last :meth:`lap`.

    Args:
        algo: An RLlib algorithm of the new API stack (``learner_group``).
    """

    def __init__(self, algo: Any) -> None:
        self.seconds = 0.0
        group: Any = getattr(algo, "learner_group", None)
        update = getattr(group, "update", None)
        if group is None or update is None:  # nothing to time: learn_s stays 0
            return

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return update(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        group.update = timed

    def lap(self) -> float:
        """Return the update seconds since the last lap and start a new one."""
        seconds, self.seconds = self.seconds, 0.0
        return seconds
