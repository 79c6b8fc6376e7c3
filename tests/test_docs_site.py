"""The documentation site: generated references, reproductions index, strict build.

scripts/docs_site.py generates the configuration reference from the pydantic models,
the API pages and the reproductions index at every ``mkdocs build``; these tests
check the generators against the models themselves, and build the whole site with
``--strict`` (warnings are errors) as CI does through ``make test``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from rayfl.config import RunConfig

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str):
    """Import scripts/<name>.py (the scripts folder is not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / f"scripts/{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their module
    spec.loader.exec_module(module)
    return module


docs_site = _script("docs_site")
config_reference = _script("config_reference")


def _models(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def _all_fields(
    model: type[BaseModel], prefix: str = ""
) -> list[tuple[str, str, object, type]]:
    """(dotted path, field name, FieldInfo, owning model) of every field, recursively."""
    out = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        out.append((path, name, info, model))
        for sub in _models(info.annotation):
            out += _all_fields(sub, f"{path}.")
    return out


FIELDS = _all_fields(RunConfig)


@pytest.fixture(scope="module")
def reference() -> str:
    return config_reference.config_reference()


def _cells(line: str) -> list[str]:
    """Split a Markdown table row as Python-Markdown does: not on ``\\|`` nor in code."""
    cells, current, in_code, i = [], "", False, 0
    while i < len(line):
        char = line[i]
        if char == "\\" and line[i + 1 : i + 2] == "|" and not in_code:
            current += "|"
            i += 2
            continue
        if char == "`":
            in_code = not in_code
        if char == "|" and not in_code:
            cells.append(current.strip())
            current = ""
        else:
            current += char
        i += 1
    return cells[1:]


def _rows(markdown: str) -> dict[str, list[list[str]]]:
    """Table rows of the reference by their field path (a path may repeat across kinds)."""
    rows: dict[str, list[list[str]]] = {}
    for line in markdown.splitlines():
        if line.startswith("| `"):
            cells = _cells(line)
            assert len(cells) == 5, line
            rows.setdefault(cells[0].strip("`"), []).append(cells)
    return rows


def test_every_field_has_a_description():
    """Leaf fields carry description=; sections and kinds are described by their model."""
    missing = []
    for path, name, info, model in FIELDS:
        sections = _models(info.annotation)
        if info.description:
            continue
        if sections and all(s.__doc__ and s.__doc__.strip() for s in sections):
            continue  # a section: its model's docstring describes it
        is_tag = name == "kind" and typing.get_origin(info.annotation) is typing.Literal
        if is_tag and model.__doc__ and model.__doc__.strip():
            continue  # a union's tag: its variant's docstring describes it
        missing.append(f"{path} ({model.__name__})")
    assert not missing, "fields without a description:\n" + "\n".join(missing)


def test_reference_lists_every_field_with_its_description(reference):
    rows = _rows(reference)
    absent = []
    for path, _, info, _ in FIELDS:
        if path not in rows:
            absent.append(f"{path}: no row")
            continue
        if info.description:
            wanted = " ".join(info.description.split())
            if not any(wanted == r[4] for r in rows[path]):
                absent.append(f"{path}: description missing")
    assert not absent, "\n".join(absent)
    assert len(rows) >= 150  # the whole tree, not a sample


def _default_value(path: str) -> object:
    node: object = RunConfig().model_dump(mode="json")
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(path)
        node = node[part]
    return node


def test_reference_defaults_are_the_models_defaults(reference):
    """Each rendered default, read back as YAML, equals the default config's value."""
    checked = 0
    for path, cells in _rows(reference).items():
        try:
            expected = _default_value(path)
        except KeyError:
            continue  # a field of a non-default kind (e.g. algorithm.mu)
        if isinstance(expected, dict) and expected and cells[0][2] == "see below":
            continue  # a section
        assert all(row[2].startswith("`") for row in cells), (path, cells)
        values = [yaml.safe_load(row[2].strip("`")) for row in cells]
        if len(cells) == 1:
            assert values[0] == expected, (path, cells[0][2], expected)
        else:  # one row per kind of a union: the default kind's row has it
            assert expected in values, (path, values, expected)
        checked += 1
    assert checked >= 60


def test_reference_allowed_values_and_kinds(reference):
    rows = _rows(reference)
    partition = rows["data.partition"][0]
    assert partition[1] == "`str`" and partition[2] == "`iid`"
    assert all(f"`{v}`" in partition[3] for v in ("iid", "dirichlet", "shards"))
    from policies import POLICIES

    policy = rows["scheduler.policy"][0][3]
    assert all(f"`{name}`" in policy for name in POLICIES)
    assert rows["ray.max_actor_restarts"][0][3] == "≥ -1"
    assert rows["model.hidden"][0][1:4] == ["`list[int]`", "`[100]`", "length ≤ 64"]
    assert rows["scheduler.clients_per_round"][0][1:4] == [
        "`int | null`",
        "`null`",
        "≥ 1",
    ]
    # every algorithm kind has its heading; fedprox's own field is under it
    from rayfl.algorithms.config import algorithm_names

    for kind in algorithm_names():
        assert f"### `kind: {kind}`" in reference, kind
    fedprox = reference.split("### `kind: fedprox`")[1].split("### ")[0]
    assert "`algorithm.mu`" in fedprox


def test_api_pages_list_the_public_objects():
    from policies import POLICIES

    pages = docs_site.api_pages()
    assert set(pages) == set(docs_site.API_PAGES.values())
    rayfl_page = pages["reference/api/rayfl.md"]
    assert (
        "::: rayfl.runner.run" in rayfl_page
        and "::: rayfl.config.run.load_config" in rayfl_page
    )
    for entry in POLICIES.values():
        assert f"::: {entry.replace(':', '.')}" in pages["reference/api/policies.md"]
    assert "::: envs.star.scheduling.WirelessFLEnv" in pages["reference/api/envs.md"]


PAGE_FULL = """---
paper: "A paper title (arXiv:2304.04164)"
implements: sparse DP-SGD with Lyapunov scheduling
command: python examples/reproduce_sparse_dp.py --seeds 0 1 2
result: docs/dp_ditto/u_shape.csv
run_time: 40 min
---
# A paper

text
"""

PAGE_TABLES = """# Second paper

<!-- table csv="docs/wpfl/t20_3seeds.csv" by="policy" cols="accuracy:acc:.3f" cmd="python examples/reproduce_wpfl.py --t0 20" -->
| policy | acc |
<!-- /table -->
"""


def test_reproductions_index_from_front_matter_and_tables(tmp_path):
    folder = tmp_path / "reproductions"
    folder.mkdir()
    (folder / "b_tables.md").write_text(PAGE_TABLES)
    (folder / "a_full.md").write_text(PAGE_FULL)
    index, problems = docs_site.reproductions_index(tmp_path)
    rows = [line for line in index.splitlines() if line.startswith("| [")]
    assert len(rows) == 2
    assert rows[0].startswith(
        "| [A paper title (arXiv:2304.04164)](a_full.md) | sparse DP-SGD"
    )
    assert "`python examples/reproduce_sparse_dp.py --seeds 0 1 2`" in rows[0]
    assert "| 40 min |" in rows[0]
    assert "[`dp_ditto/u_shape.csv`](../dp_ditto/u_shape.csv)" in rows[0]
    # the second page: paper from its title, command and result from its first table
    assert rows[1].startswith("| [Second paper](b_tables.md) |  |")
    assert "`python examples/reproduce_wpfl.py --t0 20`" in rows[1]
    assert "(../wpfl/t20_3seeds.csv)" in rows[1]
    assert problems == [
        "docs/reproductions/b_tables.md: no `implements` for the reproductions index; "
        "add `implements: ...` to the page's front matter (see docs/dev/README.md)"
    ]
    empty, none = docs_site.reproductions_index(tmp_path / "nowhere")
    assert "No reproduction page yet." in empty and none == []


def test_nav_lists_every_reproduction_page(tmp_path):
    (tmp_path / "reproductions").mkdir()
    for name in ("wpfl.md", "h2fdp.md", "index.md"):
        (tmp_path / "reproductions" / name).write_text("# x\n")
    nav = [{"Home": "index.md"}, {"Reproductions": "reproductions/index.md"}]
    assert docs_site.expand_nav(nav, tmp_path) == [
        {"Home": "index.md"},
        {
            "Reproductions": [
                "reproductions/index.md",
                "reproductions/h2fdp.md",
                "reproductions/wpfl.md",
            ]
        },
    ]
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert {"Reproductions": "reproductions/index.md"} in config["nav"]


def test_site_builds_strictly_and_offline(tmp_path):
    """``mkdocs build --strict``: zero warnings, generated pages, no external assets."""
    pytest.importorskip(
        "mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'"
    )
    pytest.importorskip("material", reason="the docs extra is not installed")
    pytest.importorskip(
        "mkdocstrings_handlers.python", reason="the docs extra is not installed"
    )
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), env.get("PYTHONPATH")) if p
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-4000:]
    config_page = (site / "reference/configuration/index.html").read_text()
    assert "data.num_clients" in config_page and "algorithm.mu" in config_page
    assert (
        "RoundRobinPolicy" in (site / "reference/api/policies/index.html").read_text()
    )
    assert "load_config" in (site / "reference/api/rayfl/index.html").read_text()
    assert (site / "reproductions/index.html").is_file()
    external = []
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        external += re.findall(
            r'<(?:script|link|img)\b[^>]*\b(?:src|href)="(?:https?:)?//[^"]+"', text
        )
        external += re.findall(r"fonts\.(?:googleapis|gstatic)\.com", text)
    assert not external, external[:5]


def test_links_to_repository_files_become_paths(tmp_path):
    docs = tmp_path / "docs"
    (docs / "reproductions").mkdir(parents=True)
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples/run.py").write_text("")
    (docs / "cluster.md").write_text("")
    page = docs / "reproductions/x.md"
    text = (
        "See [the script](../../examples/run.py), [`examples/run.py`](../../examples/run.py), "
        "[cluster](../cluster.md#top), [gone](../../examples/gone.py), "
        "[web](https://ray.io), ![plot](../../examples/run.py)"
    )
    out = docs_site.rewrite_repo_links(text, page, docs, root=tmp_path)
    assert out == (
        "See the script (`examples/run.py`), `examples/run.py`, "
        "[cluster](../cluster.md#top), [gone](../../examples/gone.py), "
        "[web](https://ray.io), ![plot](../../examples/run.py)"
    )


def test_docstrings_are_adapted_for_rendering():
    spec = importlib.util.spec_from_file_location(
        "griffe_example_section", ROOT / "scripts/griffe_example_section.py"
    )
    pytest.importorskip("griffe", reason="the docs extra is not installed")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    doc = "Load a run (:class:`RunLog`, :func:`~rayfl.run`).\n\n    Example:\n        >>> 1\n        1\n"
    assert module.adapt(doc) == (
        "Load a run (`RunLog`, `rayfl.run`).\n\n    Examples:\n        >>> 1\n        1\n"
    )
    assert module.adapt("An Example: inline") == "An Example: inline"
