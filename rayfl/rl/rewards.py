"""One reward set for the scheduling envs of every topology.

``WirelessFL-v0`` (star), ``HierarchicalFL-v0`` and ``D2DNeighbor-v0`` score a
step with the same names and formulas, from the same :class:`Scores` of the
round: the test loss and accuracy of the evaluated models (star: each client's
model on its test split; hierarchy: the global model on each device's test
split; D2D: each target's model on its test split) and the round's cost.

| name | reward per step | needs |
|------|-----------------|-------|
| min_max_loss | −max test loss (the min-max fairness objective, seed_000 §3.3) | – |
| loss | −mean test loss | – |
| loss_decrease | decrease of the mean test loss since the previous step | – |
| accuracy | mean test accuracy | emulate |
| accuracy_gain | increase of the mean test accuracy since the previous step | emulate |
| jain | Jain's index of the test losses (seed_000 §6.4) | – |
| latency | −delay of the round (s) | a cost model (star, hierarchical) |
| energy | −energy of the round's uploads (J) | a cost model (star, hierarchical) |

"Mean" is weighted by the test-split sizes where :class:`Scores` carries them
(the hierarchy: one global model, so the mean is its accuracy over all test
samples) and plain over the evaluated models otherwise. Before the first step
the envs evaluate the initial models (ω⁰, or the surrogate's loss at reset), so
the first ``loss_decrease``/``accuracy_gain`` is measured from them. The
surrogate modes train no model, so they have no accuracy.

Example:
    >>> import numpy as np
    >>> s = Scores(np.array([0.5, 1.5]), np.array([0.9, 0.7]))
    >>> reward("min_max_loss", s), reward("loss", s), round(reward("accuracy", s), 2)
    (-1.5, -1.0, 0.8)
    >>> round(reward("loss_decrease", Scores(np.array([0.5, 1.0])), before=s), 6)
    0.25
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rayfl.metrics import jain_index

__all__ = [
    "COST_REWARDS",
    "DIFFERENCE_REWARDS",
    "REWARDS",
    "Scores",
    "check_reward",
    "reward",
]

#: The names (``rayfl.rl.config.Reward`` lists them again: config sections
#: import no engine module; a test keeps the two equal).
REWARDS = (
    "min_max_loss",
    "loss",
    "loss_decrease",
    "accuracy",
    "accuracy_gain",
    "jain",
    "latency",
    "energy",
)
#: Rewards read from the round's cost model (a topology without one, such as
#: D2D, leaves them out of its plug-in's ``rewards``).
COST_REWARDS = ("latency", "energy")
#: Rewards that compare with the scores before the step.
DIFFERENCE_REWARDS = ("loss_decrease", "accuracy_gain")
_ACCURACY_REWARDS = ("accuracy", "accuracy_gain")


@dataclass(frozen=True)
class Scores:
    """What a reward reads from one round.

    Attributes:
        test_loss: Test loss of each evaluated model.
        test_acc: Test accuracy of each (None or NaN: not measured).
        weights: Test-split sizes weighting the means (None: plain mean).
        latency_s: Delay of the round [s].
        energy_j: Energy of the round's uploads [J].
    """

    test_loss: npt.NDArray[np.float64]
    test_acc: npt.NDArray[np.float64] | None = None
    weights: npt.NDArray[np.float64] | None = None
    latency_s: float = 0.0
    energy_j: float = 0.0

    def mean_loss(self) -> float:
        """The (weighted) mean test loss."""
        return _mean(self.test_loss, self.weights)

    def mean_acc(self) -> float:
        """The (weighted) mean test accuracy (NaN when not measured)."""
        if self.test_acc is None:
            return float("nan")
        return _mean(self.test_acc, self.weights)


def _mean(values: npt.NDArray[np.float64], weights: npt.ArrayLike | None) -> float:
    values = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(values)
    if not ok.any():
        return float("nan")
    if weights is None:
        return float(values[ok].mean())
    # np.average's arithmetic (float64 weight sum, Σ v·w / Σ w) without its checks
    w = np.asarray(weights)[ok]
    total = w.sum(dtype=np.result_type(w.dtype, np.float64))
    if total == 0.0:
        raise ZeroDivisionError("Weights sum to zero, can't be normalized")
    return float(np.multiply(values[ok], w, dtype=total.dtype).sum() / total)


def check_reward(
    name: str,
    *,
    topology: str,
    mode: str,
    field: str = "reward",
    rewards: Collection[str] | None = None,
) -> None:
    """Refuse, in one line, a reward the env of ``topology`` cannot compute in ``mode``.

    Args:
        name: The reward.
        topology: The topology's name (for the message).
        mode: ``emulate`` or ``surrogate``.
        field: The config field named in the message.
        rewards: The rewards that topology's envs compute (its plug-in's
            ``rewards``); None: all of :data:`REWARDS`.

    Raises:
        ValueError: Unknown name, an accuracy reward in surrogate mode, or a
            reward the topology has no form of.
    """
    if name not in REWARDS:
        raise ValueError(f"{field} must be one of {', '.join(REWARDS)}; got {name!r}")
    if name in _ACCURACY_REWARDS and mode == "surrogate":
        raise ValueError(
            f"{field}={name} needs mode=emulate (the surrogate trains no model, so it "
            "has no accuracy); use loss, loss_decrease or min_max_loss"
        )
    if rewards is not None and name not in rewards:
        why = " (it has no latency or energy model)" * (name in COST_REWARDS)
        usable = ", ".join(r for r in REWARDS if r in rewards)
        raise ValueError(
            f"{field}={name} has no form on topology.kind={topology}{why}; "
            f"use one of {usable}"
        )


def reward(name: str, now: Scores, before: Scores | None = None) -> float:
    """Return the reward ``name`` of a step that ended in ``now`` (module table).

    Args:
        name: One of :data:`REWARDS`.
        now: The scores after the step.
        before: The scores before it (``loss_decrease``, ``accuracy_gain``;
            None: 0 accuracy and the same loss).
    """
    if name == "min_max_loss":
        return -float(np.nanmax(now.test_loss))
    if name == "loss":
        return -now.mean_loss()
    if name == "loss_decrease":
        return 0.0 if before is None else before.mean_loss() - now.mean_loss()
    if name == "jain":
        return jain_index(now.test_loss)
    if name in _ACCURACY_REWARDS:
        acc = now.mean_acc()
        acc = 0.0 if np.isnan(acc) else acc
        if name == "accuracy":
            return acc
        previous = float("nan") if before is None else before.mean_acc()
        return acc - (0.0 if np.isnan(previous) else previous)
    if name == "latency":
        return -float(now.latency_s)
    if name == "energy":
        return -float(now.energy_j)
    raise ValueError(f"reward must be one of {', '.join(REWARDS)}; got {name!r}")
