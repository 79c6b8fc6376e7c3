"""Number fields refuse booleans: pydantic takes ``True`` as 1 for an int or float.

A YAML ``rounds: yes`` or ``num_clients: true`` would run with 1. The run
config's validation walks the raw input beside the config's types before any
section validates (:func:`booleans_as_numbers`), so every int and float field
of every section refuses a boolean with one line naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

__all__ = ["booleans_as_numbers", "union_kind"]


def union_kind(model: Any) -> Any:
    """Return the ``kind`` tag of a union member's model (None if it has none).

    Example:
        >>> from rayfl.algorithms.config import DittoConfig
        >>> union_kind(DittoConfig), union_kind(int)
        ('ditto', None)
    """
    fields = getattr(model, "model_fields", None)
    if not isinstance(fields, dict) or "kind" not in fields:
        return None
    return fields["kind"].default


def _is_number_type(annotation: Any) -> bool:
    """Whether a field of this type takes ints or floats but not booleans."""
    if annotation in (int, float):
        return True
    args = get_args(annotation)
    if get_origin(annotation) is Annotated:
        return _is_number_type(args[0])
    if get_origin(annotation) in (Union, UnionType):
        return bool not in args and any(_is_number_type(a) for a in args)
    return False


def _element_type(annotation: Any) -> Any:
    """The element type of a list/tuple field (or of its list member), or None."""
    for member in get_args(annotation) or (annotation,):
        if get_origin(member) in (list, tuple):
            return get_args(member)[0]
    return None


def booleans_as_numbers(data: Any, model: Any, path: str = "") -> list[str]:
    """Return one message per number field given a boolean (pydantic takes True as 1).

    Walks the raw input beside the config's types before validation (so no
    section's own check sees ``True`` as 1 first): every int and float field of
    every section refuses ``true``/``false``, a union section by the member its
    ``kind`` names (or its first, the default); fields typed ``Any``
    (``sweep``, ``scheduler.params``) are checked where they are validated.

    Args:
        data: The raw input mapping of the section at ``path``.
        model: The section's model class (:class:`rayfl.config.RunConfig` at
            the root).
        path: Dotted field path (empty at the root).

    Returns:
        ``"<path> must be a number, not a boolean (got True)"`` per offender.

    Example:
        >>> from rayfl.config import RunConfig
        >>> booleans_as_numbers({"rounds": True, "data": {"num_clients": 4}}, RunConfig)
        ['rounds must be a number, not a boolean (got True)']
    """
    fields = getattr(model, "model_fields", {})
    found: list[str] = []
    for key, value in data.items() if isinstance(data, Mapping) else ():
        if key not in fields:
            continue
        annotation, where = fields[key].annotation, f"{path}{key}"
        members = [
            a
            for a in get_args(annotation) or (annotation,)
            if isinstance(a, type) and issubclass(a, BaseModel)
        ]
        if isinstance(value, Mapping) and members:
            kind = value.get("kind")
            chosen = [m for m in members if union_kind(m) == kind] or members[:1]
            found += booleans_as_numbers(value, chosen[0], f"{where}.")
        elif isinstance(value, bool) and _is_number_type(annotation):
            found.append(f"{where} must be a number, not a boolean (got {value})")
        elif isinstance(value, list | tuple) and _is_number_type(
            _element_type(annotation)
        ):
            found += [
                f"{where}[{i}] must be a number, not a boolean (got {item})"
                for i, item in enumerate(value)
                if isinstance(item, bool)
            ]
    return found
