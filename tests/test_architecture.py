"""The import contract of docs/dev/engine_refactor.md §2.1, enforced.

Four import-linter contracts live in ``pyproject.toml`` (``[tool.importlinter]``):
rayfl never imports envs or policies; envs over policies over rayfl; the layers
inside rayfl; no cycles between siblings. Each has an ``ignore_imports`` list of
today's violations. The list is a ratchet: every entry must still be needed
(removing it alone breaks its contract), so an import the refactor deletes must
leave the list in the same commit. Three rules import-linter cannot state are
checked here with grimp and a source scan.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import grimp
import pytest
from importlinter import api, cli
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.layers import LayersContract

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rayfl", "envs", "policies")

#: Imports by ``rayfl.*.config`` modules outside the allowed set, as today
#: (a ratchet like ``ignore_imports``: each must still exist).
CONFIG_IMPORT_EXCEPTIONS = {
    # the D2D section checks algorithm names against the algorithm registry
    ("rayfl.d2d.config", "rayfl.algorithms.registry"),
    # D2D mobility (issue 48) checks its fields with the wireless section's
    # rules (same names); the module imports nothing of rayfl
    ("rayfl.d2d.config", "rayfl.wireless.config_rules"),
    # data.root, rl.init_from and output.dir are checked as paths (control
    # characters, file-system limits) by the stdlib-only rayfl.text_checks
    ("rayfl.data.config", "rayfl.text_checks"),
    ("rayfl.rl.config", "rayfl.text_checks"),
    ("rayfl.rundir.config", "rayfl.text_checks"),
    # ray.address is checked by the same module
    ("rayfl.cluster.config", "rayfl.text_checks"),
    # the wireless section's cross-field rules, kept beside it for the size
    # rule; the module imports nothing of rayfl
    ("rayfl.wireless.config", "rayfl.wireless.config_rules"),
}

#: Files that load modules by a computed name besides rayfl/registry.py and
#: rayfl/rundir/checkpoint.py, as today (each must still do so).
DYNAMIC_IMPORT_EXCEPTIONS = {
    "rayfl/__init__.py",  # lazy re-exports of rayfl's own modules
    "rayfl/actors/__init__.py",  # lazy: the data holder's process imports no torch
    "rayfl/privacy/__init__.py",  # lazy: config validation imports no scipy
    "rayfl/hierarchy/__init__.py",  # lazy re-exports of rayfl.hierarchy modules
    "rayfl/star/__init__.py",  # lazy: the star's plug-in loads without torch
    "rayfl/config/__init__.py",  # lazy: a section importing a config module imports no other section
    "rayfl/cli/__init__.py",  # `rayfl bench NAME` loads rayfl.benchmarks.NAME
    "rayfl/algorithms/registry.py",  # algorithm kinds by "module:Class"
}
DYNAMIC_IMPORT_HOMES = {"rayfl/registry.py", "rayfl/rundir/checkpoint.py"}


@pytest.fixture(scope="module")
def graph():
    found = grimp.build_graph(*PACKAGES, cache_dir=None)
    for name in PACKAGES:  # the worktree's packages, not an installed copy
        assert Path(__import__(name).__file__).resolve().is_relative_to(ROOT)
    return found


@pytest.fixture(scope="module")
def contracts():
    config = api.read_configuration(str(ROOT / "pyproject.toml"))
    assert config["session_options"]["root_packages"] == list(PACKAGES)
    return config["contracts_options"], config["session_options"]


def _check(contract_options, session_options, graph):
    types = {
        "forbidden": ForbiddenContract,
        "layers": LayersContract,
        "acyclic_siblings": AcyclicSiblingsContract,
    }
    contract = types[contract_options["type"]](
        name=contract_options["name"],
        session_options=session_options,
        contract_options=contract_options,
    )
    return contract.check(copy.deepcopy(graph), verbose=False)


def test_contracts_are_the_planned_four(contracts):
    options, _ = contracts
    assert [c["id"] for c in options] == [
        "engine-alone",
        "top",
        "rayfl-layers",
        "acyclic",
    ]


def test_no_contract_has_exceptions(contracts):
    # issue 21: rayfl never imports envs or policies (they are reached by name
    # through rayfl.registry), and the layers hold without a listed exception
    options, _ = contracts
    excepted = {
        c["id"]: c["ignore_imports"] for c in options if c.get("ignore_imports")
    }
    assert not excepted, f"ignore_imports must stay empty: {excepted}"


def test_lint_imports_passes():
    # what a developer runs: `lint-imports` from the repository root
    assert (
        cli.lint_imports(str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True) == 0
    )


def test_every_contract_is_kept(contracts, graph):
    options, session = contracts
    broken = [c["name"] for c in options if not _check(c, session, graph).kept]
    assert not broken, (
        f"broken import contracts: {broken}; run `lint-imports` for the chains"
    )


def test_every_ignored_import_is_still_needed(contracts, graph):
    # The ratchet: an entry whose removal keeps the contract is stale and must go.
    options, session = contracts
    stale = []
    for contract in options:
        entries = list(contract.get("ignore_imports", ()))
        for entry in entries:
            trimmed = {**contract, "ignore_imports": [e for e in entries if e != entry]}
            if _check(trimmed, session, graph).kept:
                stale.append(f"{contract['id']}: {entry}")
    assert not stale, (
        "ignore_imports entries no longer needed (delete them from pyproject.toml): "
        f"{stale}"
    )


def test_policies_reach_rayfl_only_through_observation_and_registry(graph):
    allowed = {"rayfl.observation", "rayfl.registry"}
    bad = sorted(
        (importer, imported)
        for importer in graph.find_descendants("policies") | {"policies"}
        for imported in graph.find_modules_directly_imported_by(importer)
        if imported.split(".")[0] == "rayfl" and imported not in allowed
    )
    assert not bad, f"policies may import only {sorted(allowed)} from rayfl: {bad}"


def test_config_sections_import_only_names_and_other_sections(graph):
    sections = {m for m in graph.find_descendants("rayfl") if m.endswith(".config")} - {
        "rayfl.config"
    }
    assert {"rayfl.wireless.config", "rayfl.hierarchy.config"} <= sections
    found = {
        (section, imported)
        for section in sections
        for imported in graph.find_modules_directly_imported_by(section)
        if imported.split(".")[0] in PACKAGES
        and imported != "rayfl.names"
        and not imported.endswith(".config")
    }
    new = sorted(found - CONFIG_IMPORT_EXCEPTIONS)
    assert not new, f"config sections may import only rayfl.names and *.config: {new}"
    gone = sorted(CONFIG_IMPORT_EXCEPTIONS - found)
    assert not gone, f"delete these fixed entries from CONFIG_IMPORT_EXCEPTIONS: {gone}"


def test_dynamic_imports_only_in_the_registry_and_the_checkpoint_loader():
    pattern = re.compile(r"\bimport_module\b|\b__import__\s*\(")
    users = {
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if pattern.search(path.read_text(encoding="utf-8"))
    }
    new = sorted(users - DYNAMIC_IMPORT_HOMES - DYNAMIC_IMPORT_EXCEPTIONS)
    assert not new, (
        "modules are loaded by name only in rayfl/registry.py and "
        f"rayfl/rundir/checkpoint.py; also found in {new}"
    )
    gone = sorted(DYNAMIC_IMPORT_EXCEPTIONS - users)
    assert not gone, (
        f"delete these fixed entries from DYNAMIC_IMPORT_EXCEPTIONS: {gone}"
    )


#: Issue 21's size rule: no module of the packages over 500 lines, no function
#: (or method) over 80.
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 80
#: Modules allowed past MAX_MODULE_LINES to stay one concept (issue 46): path →
#: (limit, the one-line reason).
RAISED_LIMITS: dict[str, tuple[int, str]] = {
    "rayfl/registry.py": (
        600,
        "the one registry of policies and topologies: names, checks, the builder",
    ),
}
#: Folders outside the packages held to the same rule: the example scripts
#: (with their shared modules in examples/_support) and the repository scripts.
SCRIPT_FOLDERS = ("examples", "scripts")


def _sizes(
    folders: tuple[str, ...] = PACKAGES,
) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    import ast

    modules, functions = [], []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text()
            name = str(path.relative_to(ROOT))
            modules.append((name, text.count("\n")))
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = node.end_lineno - node.lineno + 1
                    functions.append((f"{name}::{node.name}", length))
    return modules, functions


def _assert_sizes_kept(modules, functions) -> None:
    long_modules = [
        (m, n)
        for m, n in modules
        if n > RAISED_LIMITS.get(m, (MAX_MODULE_LINES, ""))[0]
    ]
    long_functions = [(f, n) for f, n in functions if n > MAX_FUNCTION_LINES]
    assert not long_modules, f"modules over {MAX_MODULE_LINES} lines: {long_modules}"
    assert not long_functions, (
        f"functions over {MAX_FUNCTION_LINES} lines: {long_functions}"
    )


def test_no_module_over_500_lines_and_no_function_over_80():
    modules, functions = _sizes()
    assert len(modules) > 100 and max(n for _, n in functions) > 40  # it measured
    _assert_sizes_kept(modules, functions)


def test_examples_and_scripts_keep_the_size_rule():
    modules, functions = _sizes(SCRIPT_FOLDERS)
    # it measured: every folder, the scripts and examples/_support's modules
    assert {Path(m).parts[0] for m, _ in modules} == set(SCRIPT_FOLDERS)
    assert len(modules) > 15 and max(n for _, n in functions) > 40
    _assert_sizes_kept(modules, functions)
