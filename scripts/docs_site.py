#!/usr/bin/env python3
"""Generate the documentation site's derived pages, as an MkDocs hook and a script.

MkDocs loads this file as a hook (``hooks:`` in ``mkdocs.yml``). At each build it
adds, as generated pages that are never written to ``docs/`` (so they cannot go
stale):

- ``reference/configuration.md``: every field of :class:`rayfl.config.RunConfig`,
  section by section (field, type, default, allowed values, description), read from
  the pydantic models.
- ``reference/api/{rayfl,envs,policies}.md``: API pages whose entries
  (``::: module.Name`` blocks that mkdocstrings renders from docstrings) are listed
  from ``rayfl.__all__``, the registered environments and ``policies.POLICIES``.
- ``reproductions/index.md``: a table paper → what it implements → command → result
  file, built from the front matter of the pages ``docs/reproductions/*.md``.

Links from a page to repository files outside ``docs/`` (``../examples/x.yaml``)
become the file's path in code, since the site holds only ``docs/``.

It also expands the nav entry ``Reproductions: reproductions/index.md`` of
``mkdocs.yml`` into that index followed by every page of ``docs/reproductions/``.

A reproduction page starts with a front matter block::

    ---
    title: Wireless personalized FL
    paper: "Title of the paper (arXiv:2501.00000)"
    implements: min-max fair scheduling with the Ditto objective
    command: python examples/reproduce_wpfl.py --t0 20 --seeds 0 1 2
    result: docs/wpfl/t20_3seeds.csv
    run_time: 25 min on 2 cores
    ---

``command`` and ``result`` default to the ``cmd`` and ``csv`` of the page's first
results table (the ``<!-- table ... -->`` markers of scripts/doc_tables.py);
``paper`` defaults to the page's title. A page missing a key is a build warning,
so an error under ``mkdocs build --strict``.

Usage:
    python scripts/docs_site.py config     # print the configuration reference
    python scripts/docs_site.py reproductions
"""

from __future__ import annotations

import logging
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
LOG = logging.getLogger("mkdocs.hooks.docs_site")  # counted by --strict

CONFIG_PAGE = "reference/configuration.md"
API_PAGES = {
    "rayfl": "reference/api/rayfl.md",
    "envs": "reference/api/envs.md",
    "policies": "reference/api/policies.md",
}
REPRO_DIR = "reproductions"
REPRO_INDEX = f"{REPRO_DIR}/index.md"
REPRO_NAV_TITLE = "Reproductions"
#: front-matter keys of a reproduction page, in the index's column order
REPRO_KEYS = ("paper", "implements", "command", "result")

# --------------------------------------------------------------------------------
# Configuration reference
# --------------------------------------------------------------------------------


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
        kinds = sorted({type(a).__name__ for a in args})
        return " | ".join("str" if k == "str" else k for k in kinds)
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


def _cell(text: str) -> str:
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
            out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
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


# --------------------------------------------------------------------------------
# API reference
# --------------------------------------------------------------------------------


def api_pages() -> dict[str, str]:
    """Return the API pages: path under docs/ → Markdown with mkdocstrings blocks."""
    import gymnasium

    import envs  # registers the environments
    import rayfl
    from policies import POLICIES

    first = ["run", "resume", "load_run", "load_config", "RunConfig", "ConfigError"]
    names = [n for n in rayfl.__all__ if not n.startswith("_")]
    names.sort(key=lambda n: (first.index(n) if n in first else len(first), n))
    objects = [f"{getattr(rayfl, n).__module__}.{n}" for n in names]
    env_ids = list(envs.ENV_IDS)
    env_entries = [gymnasium.spec(i).entry_point.replace(":", ".") for i in env_ids]
    policy_entries = sorted({e.replace(":", ".") for e in POLICIES.values()})
    pages = {
        API_PAGES["rayfl"]: _api_page(
            "rayfl",
            "The Python entry points: run, resume and load runs, load configurations.",
            objects,
        ),
        API_PAGES["envs"]: _api_page(
            "envs",
            "Gymnasium environments over the engine, registered on `import envs`: "
            + ", ".join(f"`{i}`" for i in env_ids)
            + ".",
            [*env_entries, "envs.wrappers"],
        ),
        API_PAGES["policies"]: _api_page(
            "policies",
            "Scheduling policies behind one interface, `policy(obs) -> action`; "
            "`make_policy(name, env)` builds one by its registered name.",
            ["policies.base.Policy", "policies.registry", *policy_entries],
        ),
    }
    return pages


def _api_page(module: str, intro: str, objects: list[str]) -> str:
    out = [f"# `{module}`", "", intro, ""]
    for obj in objects:
        out += [f"::: {obj}", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------------
# Reproductions index
# --------------------------------------------------------------------------------

_FRONT = re.compile(r"\A---\s*\n(.*?\n)---\s*\n", re.S)
_TABLE = re.compile(r"^<!--\s*table\s+(.*?)\s*-->\s*$", re.M)
_ATTR = re.compile(r'(\w+)="([^"]*)"')


def front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split a Markdown page into its YAML front matter (or ``{}``) and body."""
    match = _FRONT.match(text)
    if not match:
        return {}, text
    meta = yaml.safe_load(match.group(1)) or {}
    if not isinstance(meta, dict):
        return {}, text
    return meta, text[match.end() :]


def page_summary(name: str, text: str) -> tuple[dict[str, str], list[str]]:
    """Return a reproduction page's index row (keys of REPRO_KEYS) and its problems."""
    meta, body = front_matter(text)
    row = {k: str(meta[k]).strip() for k in REPRO_KEYS if meta.get(k)}
    if meta.get("run_time"):
        row["run_time"] = str(meta["run_time"]).strip()
    tables = [dict(_ATTR.findall(m)) for m in _TABLE.findall(body)]
    results = [t for t in tables if "csv" in t]
    if "command" not in row and results and results[0].get("cmd"):
        row["command"] = results[0]["cmd"]
    if "result" not in row and results:
        row["result"] = results[0]["csv"]
    if "paper" not in row:
        title = meta.get("title") or next(
            (line[2:].strip() for line in body.splitlines() if line.startswith("# ")),
            None,
        )
        if title:
            row["paper"] = str(title)
    problems = [
        f"docs/{REPRO_DIR}/{name}: no `{k}` for the reproductions index; add "
        f"`{k}: ...` to the page's front matter (see docs/dev/README.md)"
        for k in REPRO_KEYS
        if k not in row
    ]
    return row, problems


def _result_cell(result: str) -> str:
    """Link a result file under docs/ from the index page; show others as code."""
    path = result.removeprefix("./")
    if path.startswith("docs/") and (ROOT / path).exists():
        rel = "../" + path.removeprefix("docs/")
        return f"[`{path.removeprefix('docs/')}`]({rel})"
    return f"`{path}`"


def reproductions_index(docs_dir: Path) -> tuple[str, list[str]]:
    """Return the index page of ``docs_dir/reproductions`` and the problems found."""
    pages = reproduction_pages(docs_dir)
    rows, problems = [], []
    for name in pages:
        row, issues = page_summary(
            name, (docs_dir / REPRO_DIR / name).read_text("utf-8")
        )
        rows.append((name, row))
        problems += issues
    timed = any("run_time" in row for _, row in rows)
    out = [
        "# Reproductions",
        "",
        "Each page reproduces one paper: what the paper claims, what we measure, the",
        "command that produces the numbers, the results table rendered from that",
        "command's output, and where we differ from the paper.",
        "",
    ]
    if not rows:
        out.append("No reproduction page yet.")
        return "\n".join(out) + "\n", problems
    header = ["paper", "what it implements", "command", "result file"]
    if timed:
        header.insert(3, "run time")
    out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, row in rows:
        cells = [
            f"[{row.get('paper', name)}]({name})",
            row.get("implements", ""),
            f"`{row['command']}`" if row.get("command") else "",
            _result_cell(row["result"]) if row.get("result") else "",
        ]
        if timed:
            cells.insert(3, row.get("run_time", ""))
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(out) + "\n", problems


def reproduction_pages(docs_dir: Path) -> list[str]:
    """Return the page names of ``docs_dir/reproductions`` (index excluded), sorted."""
    folder = docs_dir / REPRO_DIR
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.glob("*.md") if p.name != "index.md")


# --------------------------------------------------------------------------------
# Links to repository files outside docs/
# --------------------------------------------------------------------------------

_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]+)\]\((?P<target>[^)\s]+)\)")


def rewrite_repo_links(
    markdown: str, page: Path, docs_dir: Path, root: Path = ROOT
) -> str:
    """Turn links to existing repository files outside ``docs_dir`` into their paths.

    A page may link to ``../examples/quickstart.yaml`` (useful on GitHub); the site
    holds only docs/, so such a link becomes the text followed by the file's path
    in code, e.g. ``the config (`examples/quickstart.yaml`)``. Links to missing files
    are left as they are, so the strict build still reports them.

    Args:
        markdown: The page's Markdown.
        page: The page's source file (absolute).
        docs_dir: The site's docs directory (absolute).
        root: The repository root.
    """

    def replace(match: re.Match[str]) -> str:
        target = match.group("target")
        if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^/", target):
            return match.group(0)  # a URL, an anchor or an absolute path
        path = (page.parent / target.split("#")[0]).resolve()
        inside_docs = path == docs_dir.resolve() or docs_dir.resolve() in path.parents
        if inside_docs or not path.exists() or root.resolve() not in path.parents:
            return match.group(0)
        relative = path.relative_to(root.resolve()).as_posix()
        text = match.group("text")
        if relative in text:
            return text
        return f"{text} (`{relative}`)"

    return _LINK.sub(replace, markdown)


# --------------------------------------------------------------------------------
# MkDocs hooks
# --------------------------------------------------------------------------------


def _import_path() -> None:
    """Make the repository importable (rayfl, envs, policies) from the hook."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def expand_nav(nav: list[Any], docs_dir: Path) -> list[Any]:
    """Replace the nav's ``Reproductions`` entry by its index and every page."""
    pages = [f"{REPRO_DIR}/{name}" for name in reproduction_pages(docs_dir)]
    out = []
    for item in nav:
        if isinstance(item, dict) and list(item) == [REPRO_NAV_TITLE]:
            value = item[REPRO_NAV_TITLE]
            if value == REPRO_INDEX:
                item = {REPRO_NAV_TITLE: [REPRO_INDEX, *pages]}
        out.append(item)
    return out


def on_config(config: Any) -> Any:
    """Expand the Reproductions nav entry to the pages that exist."""
    _import_path()
    if config.nav:
        config.nav = expand_nav(config.nav, Path(config.docs_dir))
    return config


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages (configuration, API, reproductions index)."""
    from mkdocs.structure.files import File

    docs_dir = Path(config.docs_dir)
    index, problems = reproductions_index(docs_dir)
    for problem in problems:
        LOG.warning(problem)
    generated = {CONFIG_PAGE: config_reference(), REPRO_INDEX: index, **api_pages()}
    for path, content in generated.items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            LOG.warning(f"docs/{path} is generated at build time; delete the file")
            files.remove(existing)
        files.append(File.generated(config, path, content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Rewrite the page's links to repository files outside docs/ (see above)."""
    if page.file.abs_src_path is None:  # a generated page
        return markdown
    return rewrite_repo_links(
        markdown, Path(page.file.abs_src_path), Path(config.docs_dir)
    )


def main(argv: list[str] | None = None) -> int:
    """Print a generated page: ``config`` or ``reproductions``."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", choices=["config", "reproductions", "api"])
    args = parser.parse_args(argv)
    _import_path()
    if args.page == "config":
        print(config_reference())
    elif args.page == "api":
        for path, text in api_pages().items():
            print(f"<!-- {path} -->\n{text}")
    else:
        text, problems = reproductions_index(ROOT / "docs")
        print(text)
        for problem in problems:
            print(f"warning: {problem}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
