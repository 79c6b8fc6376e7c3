#!/usr/bin/env python3
"""Generate the documentation site's derived pages, as an MkDocs hook and a script.

MkDocs loads this file as a hook (``hooks:`` in ``mkdocs.yml``). At each build it
adds, as generated pages that are never written to ``docs/`` (so they cannot go
stale):

- ``reference/configuration.md``: every field of :class:`rayfl.config.RunConfig`,
  section by section (field, type, default, allowed values, description), read from
  the pydantic models by scripts/config_reference.py.
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

import importlib.util
import logging
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
LOG = logging.getLogger("mkdocs.hooks.docs_site")  # counted by --strict


def _sibling(name: str) -> ModuleType:
    """Import ``scripts/<name>.py`` (MkDocs loads this hook by its path, not as a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).parent / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their module
    spec.loader.exec_module(module)
    return module


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
    vector_entries = [
        str(gymnasium.spec(i).vector_entry_point).replace(":", ".")
        for i in env_ids
        if gymnasium.spec(i).vector_entry_point
    ]
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
            + ". The engine's envs share one lifecycle, `envs.base.FLEnv`; the "
            "`-Flat-` ids wrap them for any RL library (`envs.flat.FlatFLEnv`), and "
            "`envs.multiagent` has PettingZoo parallel envs. "
            "`gym.make_vec(id, E)` of `WirelessFL-v0`, `HierarchicalFL-v0` and "
            "`D2DNeighbor-v0` gives their vector envs, which step E emulated runs "
            "in lockstep over shared hosts; `envs.sb3.sb3_lanes` hands the star's "
            "lanes to Stable-Baselines3.",
            [
                *env_entries,
                "envs.base.FLEnv",
                "envs.flat.FlatFLEnv",
                *vector_entries,
                "envs.sb3",
                "envs.wrappers",
            ],
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
    cell = _sibling("config_reference").table_cell
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
        out.append("| " + " | ".join(cell(c) for c in cells) + " |")
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
    reference = _sibling("config_reference").config_reference()
    generated = {CONFIG_PAGE: reference, REPRO_INDEX: index, **api_pages()}
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
        print(_sibling("config_reference").config_reference())
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
