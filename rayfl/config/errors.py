"""A pydantic ``ValidationError`` of a config as a short, one-line-per-problem text.

Each problem is one line naming the field path: unknown keys list the section's
allowed keys, unknown names (a ``Literal`` or a union's ``kind``) say "did you
mean", a cross-section check gives its own message, and anything else is
``<path>: <msg> (got <value>)`` with the value cut short. At most
:data:`MAX_PROBLEMS` lines of at most :data:`MAX_LINE` characters.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from rayfl.algorithms.config import algorithm_names
from rayfl.config.loader import clip, clip_text
from rayfl.config.numbers import union_kind
from rayfl.config.topology import topology_tags
from rayfl.names import UnknownNameError, unknown_name_message

__all__ = ["MAX_LINE", "MAX_PROBLEMS", "MAX_TEXT", "format_validation_error"]

MAX_PROBLEMS = 10  # lines after the first
MAX_LINE = 400
MAX_TEXT = 1900  # the whole message


def _allowed_keys(root: Any, loc: tuple[Any, ...]) -> list[str] | None:
    """The keys of the section at ``loc[:-1]`` (a union's tag picks its member)."""
    models: list[Any] = [root]
    for part in loc[:-1]:
        tagged = [m for m in models if union_kind(m) == part]
        if tagged:
            models = tagged
            continue
        fields = getattr(models[0], "model_fields", None)
        if len(models) != 1 or not fields or part not in fields:
            return None
        ann = fields[part].annotation
        args = [a for a in getattr(ann, "__args__", ()) if hasattr(a, "model_fields")]
        models = args or [ann]
    fields = getattr(models[0], "model_fields", None) if len(models) == 1 else None
    return sorted(fields) if fields else None


def _unknown_name(path: str, err: Any) -> str | None:
    """The "did you mean" message of an unknown name (a Literal or a kind), or None."""
    ctx = err.get("ctx") or {}
    if isinstance(ctx.get("error"), UnknownNameError):
        return str(ctx["error"])
    if err["type"] == "literal_error":
        expected, name = ctx.get("expected", ""), err.get("input")
    elif err["type"] == "union_tag_invalid":
        expected, name = ctx.get("expected_tags", ""), ctx.get("tag")
        path = f"{path}.{ctx.get('discriminator', 'kind')}".replace("'", "")
    else:
        return None
    allowed = re.findall(r"'([^']*)'", str(expected))
    if not isinstance(name, str) or not allowed:
        return None
    return unknown_name_message(path, name, allowed)


def format_validation_error(error: ValidationError, root: Any) -> str:
    """``invalid config:`` then one line per problem of ``error`` on model ``root``.

    Each echoed value is cut short (:func:`rayfl.config.loader.clip`), as is
    each line (:data:`MAX_LINE`) and their number (:data:`MAX_PROBLEMS`).
    """
    tags = {  # union members' tags pydantic puts in the location
        "algorithm": set(algorithm_names()),
        "topology": topology_tags(),
    }
    lines = []
    for err in error.errors():
        loc = raw_loc = tuple(err["loc"])
        if len(loc) > 1 and loc[1] in tags.get(str(loc[0]), ()):
            loc = (loc[0],) + loc[2:]
        path = clip_text(".".join(str(p) for p in loc) or "<config>", 120)
        msg = err["msg"].removeprefix("Value error, ")
        unknown = _unknown_name(path, err)
        if unknown:
            lines.append(unknown)
        elif err["type"] == "extra_forbidden":
            allowed = _allowed_keys(root, raw_loc)
            hint = f"; allowed keys: {', '.join(allowed)}" if allowed else ""
            lines.append(f"{path}: unknown key{hint}")
        elif loc == ():  # a cross-section check: its message names the fields
            lines.append(msg)
        elif err["type"] in ("model_type", "dict_type"):
            lines.append(f"{path}: {msg}")
        elif isinstance(err.get("input"), dict):  # a section's own cross-field check
            lines.append(msg if msg.startswith(f"{path}.") else f"{path}: {msg}")
        else:
            lines.append(f"{path}: {msg} (got {clip(err.get('input'))})")
    return _message(lines)


def _message(problems: list[str]) -> str:
    """``invalid config:`` and the problems: at most :data:`MAX_PROBLEMS` lines.

    Each line is cut to :data:`MAX_LINE` characters; a problem of two lines
    (an unknown name and its allowed values) counts two.
    """
    lines = [clip_text(ln, MAX_LINE) for p in problems for ln in p.splitlines()]
    if len(lines) > MAX_PROBLEMS:
        more = len(lines) - MAX_PROBLEMS + 1
        lines = lines[: MAX_PROBLEMS - 1] + [f"... and {more} more lines of problems"]
    return clip_text(
        "invalid config:\n  " + "\n  ".join(ln.strip() for ln in lines), MAX_TEXT
    )
