"""Unknown names in a config: one message with the allowed values and "did you mean".

Every config field that takes a name (``scheduler.policy``, ``algorithm.kind``,
``model.kind``, ``data.dataset``, ``data.partition``, ``rl.reward``,
``topology.kind``...) is checked when the config is validated, before Ray starts.
An unknown name gives one line naming the field, the close matches (by
:func:`difflib.get_close_matches`, after ignoring case, ``-`` and ``_``) and every
allowed value::

    scheduler.policy: unknown name 'bestchannel'; did you mean 'best_channel'?
      allowed: 'age_based', 'all', 'best_channel', ...

Example:
    >>> suggest("bestchannel", ["random", "best_channel", "round_robin"])
    ['best_channel']
    >>> check_name("model.kind", "cnn", ["mlr", "mlp", "cnn"])
    'cnn'
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "UnknownNameError",
    "check_name",
    "policy_names",
    "suggest",
    "unknown_name_message",
]


def _key(name: str) -> str:
    """Spelling-insensitive form: lower case, no ``_``, ``-`` or spaces."""
    return "".join(ch for ch in name.lower() if ch not in "_- ")


def suggest(name: str, allowed: Iterable[str], n: int = 3) -> list[str]:
    """Return up to ``n`` allowed names close to ``name``, best first.

    Names that differ only in case, ``_``, ``-`` or spaces (``BestChannel``,
    ``best-channel``) come first; then :func:`difflib.get_close_matches` on the
    normalised spelling (ratio ≥ 0.6).

    Args:
        name: The unknown name as written.
        allowed: The valid names.
        n: Most suggestions returned.

    Returns:
        The suggestions (possibly empty).
    """
    allowed = [str(a) for a in allowed]
    by_key: dict[str, list[str]] = {}
    for a in allowed:
        by_key.setdefault(_key(a), []).append(a)
    key = _key(str(name))
    out = list(by_key.get(key, []))
    for match in difflib.get_close_matches(key, list(by_key), n=n, cutoff=0.6):
        out += [a for a in by_key[match] if a not in out]
    return out[:n]


def unknown_name_message(field: str, name: object, allowed: Iterable[str]) -> str:
    """Return the one-screen message for an unknown ``name`` in ``field``.

    Args:
        field: Dotted config path, e.g. ``"scheduler.policy"``.
        name: The value given.
        allowed: The valid names (listed sorted).

    Returns:
        Two lines, ``<field>: unknown name '<name>'; did you mean 'x'?`` and
        ``allowed: 'a', 'b', ...`` (no "did you mean" when nothing is close).
    """
    allowed = sorted({str(a) for a in allowed})
    close = suggest(str(name)[:200], allowed)
    hint = ""
    if close:
        quoted = [repr(c) for c in close]
        both = " or ".join(
            [", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted
        )
        hint = f"; did you mean {both}?"
    from rayfl.text_checks import clip, clip_text

    listed = clip_text(", ".join(repr(a) for a in allowed), 500)
    return f"{field}: unknown name {clip(name)}{hint}\n  allowed: {listed}"


class UnknownNameError(ValueError):
    """A name not among the allowed ones (a ``ValueError``, so pydantic reports it).

    Attributes:
        field: Dotted config path of the name.
        name: The value given.
        allowed: The valid names, sorted.
        suggestions: The close matches, best first.
    """

    def __init__(self, field: str, name: object, allowed: Iterable[str]) -> None:
        self.field = field
        self.name = name
        self.allowed = sorted({str(a) for a in allowed})
        self.suggestions = suggest(str(name)[:200], self.allowed)
        super().__init__(unknown_name_message(field, name, self.allowed))


def check_name(field: str, name: str, allowed: Iterable[str]) -> str:
    """Return ``name`` if it is allowed, else raise :class:`UnknownNameError`.

    Args:
        field: Dotted config path, for the message.
        name: The value to check.
        allowed: The valid names.

    Raises:
        UnknownNameError: If ``name`` is not in ``allowed``.
    """
    allowed = list(allowed)
    if name not in allowed:
        raise UnknownNameError(field, name, allowed)
    return name


def policy_names() -> list[str]:
    """Return every valid policy name, sorted.

    The names of the one policy registry (:data:`rayfl.registry.POLICIES`,
    including policies registered at run time with ``register_policy``).
    """
    from rayfl.registry import registered_names

    return registered_names()
