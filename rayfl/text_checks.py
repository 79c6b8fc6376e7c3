"""Text in config fields and in their errors: checked on the way in, clipped on the way out.

:func:`clip` and :func:`clip_text` cut an echoed value or message short (every
config error echoes at most a short prefix of what it was given).

A string field of the run config (``name``, ``data.root``, ``output.dir``,
``ray.address``) is refused at validation, before Ray starts, when it holds a
control character (NUL, newline...), when a path is longer than the file
system allows, or when leading or trailing whitespace would make a path or an
address other than the one meant. Each check raises ``ValueError`` naming the
field and echoing at most a short prefix of the value.

Example:
    >>> check_text("name", "run-1")
    'run-1'
    >>> check_address("ray.address", "10.0.0.1:6379")
    '10.0.0.1:6379'
"""

from __future__ import annotations

import os
import re
import reprlib
from pathlib import Path
from typing import Any

__all__ = [
    "ADDRESS",
    "ECHO_CHARS",
    "clip",
    "clip_text",
    "NAME_MAX_BYTES",
    "PATH_MAX_BYTES",
    "check_address",
    "check_path",
    "check_text",
]

NAME_MAX_BYTES = 255
"""Longest path component (file or directory name) in bytes, when the file
system does not say (``os.pathconf(..., "PC_NAME_MAX")``): ext4, XFS, APFS."""

PATH_MAX_BYTES = 4096
"""Longest whole path in bytes, when the file system does not say (Linux's PATH_MAX)."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: ``host:port`` or ``ray://host:port`` (an IPv6 host in brackets): the one
#: parser of a Ray address (also :func:`rayfl.cluster.address.host_port`).
ADDRESS = re.compile(
    r"^(?:ray://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d+)$"
)


ECHO_CHARS = 60
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = ECHO_CHARS
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict = 3, 6, 6


def clip_text(text: str, limit: int = ECHO_CHARS) -> str:
    """``text``, cut to ``limit`` characters plus ``… (N chars)`` when longer.

    Example:
        >>> clip_text("x" * 100, 5)
        'xxxxx… (100 chars)'
    """
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} chars)"


def clip(value: Any, limit: int = ECHO_CHARS) -> str:
    """A short ``repr`` of ``value`` for an error message (never raises).

    Huge integers, deep or long containers and long strings are summarised.

    Example:
        >>> clip(10**5000)
        '<an integer of about 5001 digits>'
        >>> clip("ab")
        "'ab'"
    """
    try:
        if isinstance(value, int) and value.bit_length() > 200:
            return (
                f"<an integer of about {int(value.bit_length() * 0.30103) + 1} digits>"
            )
        if isinstance(value, str) and len(value) > limit:
            return f"{value[:limit]!r}… ({len(value)} chars)"
        return clip_text(_REPR.repr(value), limit)
    except Exception:  # a value whose repr fails: say what it is
        return f"<a {type(value).__name__}>"


def check_text(field: str, value: str) -> str:
    """Refuse a control character (NUL, tab, newline...) in ``value``.

    Raises:
        ValueError: Naming ``field`` and the character's position.
    """
    found = _CONTROL.search(value)
    if found:
        raise ValueError(
            f"{field} must not contain control characters, got {found.group()!r} "
            f"at position {found.start()} of {clip(value)}"
        )
    return value


def _limit(existing: Path, name: str, default: int) -> int:
    """The file system's limit ``name`` at ``existing``, or ``default``."""
    try:
        value = os.pathconf(existing, name)
    except (OSError, ValueError):
        return default
    return value if value and value > 0 else default


def check_path(field: str, value: str) -> str:
    """Refuse a path with control characters, edge whitespace or too long a name.

    A component longer than ``NAME_MAX_BYTES`` (or the file system's
    ``PC_NAME_MAX`` at the path's nearest existing parent) or a whole path
    longer than ``PATH_MAX_BYTES`` (``PC_PATH_MAX``) could not be created.

    Raises:
        ValueError: Naming ``field`` and what is wrong.

    Example:
        >>> check_path("output.dir", "runs/a")
        'runs/a'
    """
    check_text(field, value)
    if value.strip() != value or not value.strip():
        raise ValueError(
            f"{field} must not be blank or start or end with whitespace (a directory "
            f"named by spaces is almost never meant), got {clip(value)}"
        )
    path = Path(value).expanduser()
    _check_lengths(field, value, path, NAME_MAX_BYTES, PATH_MAX_BYTES)
    existing = path
    while not _exists(existing) and existing != existing.parent:
        existing = existing.parent
    name_max = _limit(existing, "PC_NAME_MAX", NAME_MAX_BYTES)
    path_max = _limit(existing, "PC_PATH_MAX", PATH_MAX_BYTES)
    _check_lengths(field, value, path, name_max, path_max)
    return value


def _exists(path: Path) -> bool:
    """``path.exists()``, False where the OS refuses to look (too long, no access)."""
    try:
        return path.exists()
    except OSError:
        return False


def _check_lengths(
    field: str, value: str, path: Path, name_max: int, path_max: int
) -> None:
    """Refuse a component over ``name_max`` bytes or a path over ``path_max``."""
    for part in path.parts:
        if len(os.fsencode(part)) > name_max:
            raise ValueError(
                f"{field} has a component of {len(os.fsencode(part))} bytes; the "
                f"file system allows {name_max}: got {clip(value)}"
            )
    size = len(os.fsencode(str(path.absolute())))
    if size > path_max:
        raise ValueError(
            f"{field} is {size} bytes long as an absolute path; the file system "
            f"allows {path_max}: got {clip(value)}"
        )


def check_address(field: str, value: str) -> str:
    """Refuse a Ray address that is not ``auto``, ``local``, ``host:port`` or ``ray://host:port``.

    Raises:
        ValueError: Naming ``field``, the accepted forms, or the bad port.

    Example:
        >>> check_address("ray.address", "ray://head:10001")
        'ray://head:10001'
    """
    check_text(field, value)
    if value in ("auto", "local"):
        return value
    match = ADDRESS.match(value)
    if match is None:
        raise ValueError(
            f"{field} must be auto, local, host:port or ray://host:port (no spaces), "
            f"got {clip(value)}"
        )
    port = match.group("port")
    if len(port) > 5 or not 1 <= int(port) <= 65535:
        raise ValueError(f"{field}: the port must be in 1..65535, got {clip(port)}")
    return value
