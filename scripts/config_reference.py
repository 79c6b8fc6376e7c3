#!/usr/bin/env python3
"""Generate the configuration reference of the docs from the pydantic models.

Every field of :class:`rayfl.config.RunConfig`, section by section, with its type,
default, allowed values and description, as one Markdown page. The documentation
site's hook (scripts/docs_site.py) adds it to the site at every build, so it never
goes stale. Sections with several kinds (``algorithm``, ``topology``) list the
fields shared by every kind once, then each kind's own fields.

Usage:
    python scripts/config_reference.py      # print the page
"""

from __future__ import annotations

import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


@dataclass
class FieldDoc:
    """One documented config field: its dotted path and its table cells."""

    path: str
    type: str
    default: str
    allowed: str
    description: str


@dataclass
class SectionDoc:
    """One config model rendered as a table, with the sections nested in it."""

    path: str
    title: str
    doc: str
    fields: list[FieldDoc] = field(default_factory=list)
    children: list[SectionDoc] = field(default_factory=list)


def _models_in(annotation: Any) -> list[type]:
    """Return the pydantic models named by a field annotation (unions unpacked)."""
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type] = []
    for arg in typing.get_args(annotation):
        out += _models_in(arg)
    return out


def _is_literal(annotation: Any) -> bool:
    return typing.get_origin(annotation) is typing.Literal


def _type_name(annotation: Any) -> str:
    """Render an annotation as the YAML-level type a user writes."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is typing.Annotated:
        return _type_name(args[0])
    if _is_literal(annotation):
        return " | ".join(sorted({type(a).__name__ for a in args}))
    if origin in (typing.Union, types.UnionType):
        names: list[str] = []
        for arg in args:
            name = _type_name(arg)
            if name not in names:
                names.append(name)
        return " | ".join(names)
    if origin in (tuple, list, set, frozenset):
        inner = [a for a in args if a is not Ellipsis]
        item = _type_name(inner[0]) if inner else "any"
        return f"list[{item}]"
    if origin is dict:
        key, value = (_type_name(a) for a in args) if args else ("str", "any")
        return f"dict[{key}, {value}]"
    if annotation is typing.Any:
        return "any"
    if isinstance(annotation, type):
        if _models_in(annotation):
            return "section"
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _literals(annotation: Any) -> list[Any]:
    """Return the Literal values allowed anywhere in ``annotation``."""
    if _is_literal(annotation):
        return list(typing.get_args(annotation))
    values: list[Any] = []
    for arg in typing.get_args(annotation):
        values += _literals(arg)
    return values


def _yaml(value: Any) -> str:
    """Render a Python value as the YAML a user would write."""
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, tuple | frozenset | set):
        value = list(value)
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("...").strip()


TOP_TITLE = "Top level"
_BOUNDS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}


def _constraints(info: Any) -> list[str]:
    """Return the numeric and length bounds of a field, e.g. ``['≥ 1', '≤ 64']``."""
    out = []
    for meta in info.metadata:
        for attr, sign in _BOUNDS.items():
            bound = getattr(meta, attr, None)
            if bound is not None:
                out.append(
                    f"{sign} {bound:g}"
                    if isinstance(bound, float)
                    else f"{sign} {bound}"
                )
        if getattr(meta, "min_length", None) is not None:
            out.append(f"length ≥ {meta.min_length}")
        if getattr(meta, "max_length", None) is not None:
            out.append(f"length ≤ {meta.max_length}")
    return out


def _registry_names() -> dict[str, list[str]]:
    """Allowed values of name fields checked against a registry, not a Literal."""
    from rayfl.names import policy_names

    return {"scheduler.policy": policy_names()}


def _allowed(path: str, info: Any, names: dict[str, list[str]]) -> str:
    parts = []
    values = _literals(info.annotation) or names.get(path, [])
    if values:
        parts.append(", ".join(f"`{_yaml(v)}`" for v in values))
    parts += _constraints(info)
    return "; ".join(parts)


def _default(info: Any) -> str:
    from pydantic_core import PydanticUndefined

    if info.default_factory is not None:
        value = info.default_factory()
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    if _models_in(type(value)):
        return "see below"
    return f"`{_yaml(value)}`"


def _summary(doc: str | None) -> str:
    """Return the first paragraph of a docstring, on one line."""
    if not doc:
        return ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def _discriminator(info: Any) -> str | None:
    disc = getattr(info, "discriminator", None)
    if disc is None:
        for meta in info.metadata:
            disc = getattr(meta, "discriminator", None) or disc
    return disc if isinstance(disc, str) else None


def _field_description(path: str, name: str, info: Any, model: type) -> str:
    """The field's description; a section or a union's tag is described by its model."""
    if info.description:
        return " ".join(info.description.split())
    if name == "kind" and _is_literal(info.annotation):
        return "Selects this kind (described above)."
    sections = _models_in(info.annotation)
    if len(sections) == 1:
        return _summary(sections[0].__doc__)
    if sections:
        return "A section with several kinds, chosen by its `kind` (see below)."
    return ""


def _section(
    model: type, path: str, title: str, names: dict[str, list[str]]
) -> SectionDoc:
    """Document ``model`` (at dotted ``path``) and, recursively, its sections."""
    section = SectionDoc(path, title, _summary(model.__doc__))
    for name, info in model.model_fields.items():
        full = f"{path}.{name}" if path else name
        sub = _models_in(info.annotation)
        section.fields.append(
            FieldDoc(
                full,
                _type_name(info.annotation),
                _default(info),
                _allowed(full, info, names),
                _field_description(full, name, info, model),
            )
        )
        if len(sub) == 1:
            section.children.append(_section(sub[0], full, f"`{full}`", names))
        elif sub:
            section.children.append(_union(sub, full, info, names))
    return section


def _union(
    variants: list[type], path: str, info: Any, names: dict[str, list[str]]
) -> SectionDoc:
    """Document a discriminated union: its fields common to all kinds, then each kind."""
    tag = _discriminator(info) or "kind"
    default = info.default_factory() if info.default_factory else info.default
    default_kind = getattr(default, tag, None)
    kinds = [typing.get_args(v.model_fields[tag].annotation)[0] for v in variants]
    listing = ", ".join(
        f"`{k}`" + (" (default)" if k == default_kind else "") for k in kinds
    )
    doc = f"Chosen by `{path}.{tag}`: {listing}."
    union = SectionDoc(path, f"`{path}`", doc)
    common = [
        n
        for n in variants[0].model_fields
        if n != tag
        and all(
            n in v.model_fields
            and v.model_fields[n].description == variants[0].model_fields[n].description
            and v.model_fields[n].default == variants[0].model_fields[n].default
            for v in variants
        )
    ]
    if len(variants) > 1 and common:
        shared = SectionDoc(path, "Fields of every kind", "")
        full = _section(variants[0], path, "", names)
        shared.fields = [f for f in full.fields if f.path.rsplit(".", 1)[-1] in common]
        union.children.append(shared)
    for variant, kind in zip(variants, kinds, strict=True):
        doc_ = _section(variant, path, f"`{tag}: {kind}`", names)
        doc_.fields = [
            f for f in doc_.fields if f.path.rsplit(".", 1)[-1] not in common
        ]
        union.children.append(doc_)
    return union


def config_sections() -> SectionDoc:
    """Return the documentation tree of :class:`rayfl.config.RunConfig`."""
    from rayfl.config import RunConfig

    return _section(RunConfig, "", TOP_TITLE, _registry_names())


def iter_fields(section: SectionDoc) -> typing.Iterator[FieldDoc]:
    """Yield every field of a documentation tree, depth first."""
    yield from section.fields
    for child in section.children:
        yield from iter_fields(child)


def table_cell(text: str) -> str:
    """Escape the table separators of ``text`` outside its code spans."""
    pieces = text.split("`")
    for i in range(0, len(pieces), 2):  # even pieces are outside backticks
        pieces[i] = pieces[i].replace("|", "\\|")
    return "`".join(pieces)


def _render(section: SectionDoc, level: int, out: list[str]) -> None:
    if section.title:
        out += [f"{'#' * level} {section.title}", ""]
    if section.doc:
        out += [section.doc, ""]
    own = section.fields
    if own:
        out += [
            "| field | type | default | allowed | description |",
            "|---|---|---|---|---|",
        ]
        for f in own:
            cells = [f"`{f.path}`", f"`{f.type}`", f.default, f.allowed, f.description]
            out.append("| " + " | ".join(table_cell(c) for c in cells) + " |")
        out.append("")
    # the top level's sections are headings of the same level as it
    child_level = (
        level if not section.path and section.title == TOP_TITLE else level + 1
    )
    for child in section.children:
        _render(child, child_level, out)


def config_reference() -> str:
    """Return the Markdown page documenting every field of a run's configuration."""
    out = [
        "# Configuration reference",
        "",
        "A run is configured by one YAML file validated into `rayfl.config.RunConfig`;",
        "any field can be overridden on the command line with its dotted path",
        "(`rayfl run cfg.yaml rounds=5 data.num_clients=100`) or from Python",
        '(`rayfl.run("cfg.yaml", rounds=5, data__num_clients=100)`). Defaults and',
        "values are written as in YAML (`null` is Python's `None`). This page is",
        "generated from the configuration models at every build.",
        "",
    ]
    _render(config_sections(), 2, out)
    return "\n".join(out)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # rayfl, policies
    print(config_reference())
