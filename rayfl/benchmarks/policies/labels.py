"""The row labels of ``rayfl bench policies`` its flags add: ``--learned``, ``--self-tune``.

| flag | rows |
|------|------|
| ``--learned PATH`` or ``label=PATH,...`` | ``learned`` (the shipped policy or PATH) and ``learned_<name>`` (:func:`learned_checkpoints`) |
| (always) | ``learned_untrained`` (:data:`UNTRAINED`) |
| ``--self-tune [all or names]`` | ``<policy>_tuned`` (:func:`self_tune_names`; :mod:`.tuning`) |
"""

from __future__ import annotations

from collections.abc import Sequence

from rayfl.benchmarks import BenchError
from rayfl.registry import LEARNED_POLICY, POLICIES

__all__ = ["UNTRAINED", "learned_checkpoints", "self_tune_names"]

#: The freshly initialised learned policy's label.
UNTRAINED = f"{LEARNED_POLICY}_untrained"


def learned_checkpoints(text: str | None) -> dict[str, str]:
    """Parse ``--learned`` ``PATH`` (of ``learned``) or ``label=PATH,...`` to {label: path}.

    Labels: ``learned`` or ``learned_<name>`` (never taken for heuristics).

    Raises:
        BenchError: For a bad or repeated label or an empty path.
    """
    if not text:
        return {}
    if "=" not in text:
        return {LEARNED_POLICY: text}
    out: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",") if part.strip()):
        label, _, path = (v.strip() for v in item.partition("="))
        ok = label == LEARNED_POLICY or (
            label.startswith(f"{LEARNED_POLICY}_") and label != UNTRAINED
        )
        if not ok or not path or label in out:
            raise BenchError(
                f"--learned: give PATH or learned_<name>=PATH,... (labels 'learned' or "
                f"'learned_<name>' but not {UNTRAINED!r}, each once); got {item!r}"
            )
        out[label] = path
    return out


def self_tune_names(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """Parse ``--self-tune``: ``all`` or comma-separated heuristics; () when not given.

    Raises:
        BenchError: For a name that is not a registered heuristic (the
            learned policy is not one).
    """
    if text is None:
        return ()
    items = text.split(",") if isinstance(text, str) else list(text)
    names = tuple(dict.fromkeys(n.strip() for n in items if n.strip()))
    if names == ("all",):
        return names
    heuristics = [n for n in POLICIES if n != LEARNED_POLICY]
    unknown = [n for n in names if n not in heuristics]
    if unknown or not names:
        raise BenchError(
            f"--self-tune takes all or registered heuristics ({', '.join(heuristics)}); "
            f"got {unknown[0] if unknown else text!r}"
        )
    return names
