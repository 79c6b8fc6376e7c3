"""Measure the engine's structure: import graph, cycles, sizes, observation keys.

A development tool behind ``docs/dev/engine_refactor.md`` (section 1); stdlib only
(``ast``), so it runs without grimp or import-linter::

    python docs/dev/measure_engine.py            # summary
    python docs/dev/measure_engine.py --edges    # also every cross-package edge

An edge is one ``import`` statement resolved to the deepest project module it
names (``from rayfl.compression import Payload`` → ``rayfl.compression``,
``from rayfl.wireless import channel`` → ``rayfl.wireless.channel``). Its kind is
``module`` (executed at import), ``function`` (inside a def) or ``typing`` (under
``if TYPE_CHECKING``). Cycles are strongly connected components of the module
and ``function`` edges (the imports Python really runs), with implicit
parent-package imports left out (grimp's default too).
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOTS = ("rayfl", "envs", "policies")
OBS_KEYS = (
    "channel_gain",
    "loss",
    "upload_count",
    "privacy_spent",
    "staleness",
    "data_size",
    "eligible",
    "round",
    "error_probability",
    "distance_m",
    "em_weight",
    "selected",
)


def modules(root: Path) -> dict[str, Path]:
    """Return module name → file for every .py under the three packages."""
    out = {}
    for top in ROOTS:
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def resolve(name: str, known: dict[str, Path]) -> str | None:
    """Return the deepest known module that ``name`` is or lies inside."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        parts.pop()
    return None


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, known: dict[str, Path]):
        self.module, self.is_package, self.known = module, is_package, known
        self.depth, self.typing = 0, 0
        self.edges: list[tuple[str, str, int]] = []

    def _kind(self) -> str:
        return "typing" if self.typing else "function" if self.depth else "module"

    def _add(self, target: str | None, line: int) -> None:
        edge = (target, self._kind(), line)
        if target and target != self.module and edge not in self.edges:
            self.edges.append(edge)

    def visit_FunctionDef(self, node: ast.AST) -> None:  # noqa: N802
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815

    def visit_If(self, node: ast.If) -> None:  # noqa: N802
        test = ast.unparse(node.test)
        if "TYPE_CHECKING" in test:
            self.typing += 1
            for child in node.body:
                self.visit(child)
            self.typing -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:  # noqa: N802
        for alias in node.names:
            self._add(resolve(alias.name, self.known), node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:  # noqa: N802
        base = node.module or ""
        if node.level:
            pkg = self.module.split(".")
            if not self.is_package:
                pkg = pkg[:-1]
            pkg = pkg[: len(pkg) - node.level + 1]
            base = ".".join(pkg + ([base] if base else []))
        for alias in node.names:
            full = f"{base}.{alias.name}"
            target = full if full in self.known else resolve(base, self.known)
            self._add(target, node.lineno)


def import_edges(known: dict[str, Path]) -> list[tuple[str, str, str, int]]:
    """Return (importer, imported, kind, line) for every project import."""
    out = []
    for name, path in known.items():
        visitor = _Imports(name, path.name == "__init__.py", known)
        visitor.visit(ast.parse(path.read_text(), str(path)))
        out += [(name, t, k, line) for t, k, line in visitor.edges]
    return out


def sccs(nodes: list[str], graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of size > 1."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def layer(module: str) -> str:
    """Collapse a module to its top package or rayfl sub-package (rayfl.wireless)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "rayfl" else parts[0]


def long_functions(known: dict[str, Path], limit: int = 80) -> list[tuple[int, str]]:
    """Return (lines, module::qualname) of functions longer than ``limit`` lines."""
    out = []
    for name, path in known.items():
        tree = ast.parse(path.read_text())

        def walk(node: ast.AST, prefix: str, name: str = name) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ClassDef):
                    walk(child, f"{prefix}{child.name}.")
                elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    start = min(
                        [child.lineno] + [d.lineno for d in child.decorator_list]
                    )
                    length = child.end_lineno - start + 1
                    if length > limit:
                        args = len(child.args.posonlyargs) + len(child.args.args)
                        out.append(
                            (length, f"{name}::{prefix}{child.name} ({args} pos. args)")
                        )
                    walk(child, f"{prefix}{child.name}.")

        walk(tree, "")
    return sorted(out, reverse=True)


def key_counts(root: Path, folders: tuple[str, ...]) -> dict[str, Counter[str]]:
    """Return key → Counter(folder) of quoted occurrences ("key" or 'key')."""
    out: dict[str, Counter[str]] = {k: Counter() for k in OBS_KEYS}
    for folder in folders:
        for path in (root / folder).rglob("*.py"):
            text = path.read_text()
            for key in OBS_KEYS:
                n = len(re.findall(rf"[\"']{key}[\"']", text))
                if n:
                    out[key][folder] += n
    return out


def runconfig_params(known: dict[str, Path]) -> list[str]:
    """Return functions/classes whose signature takes a whole ``RunConfig``."""
    out = []
    for name, path in known.items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                for a in args:
                    ann = ast.unparse(a.annotation) if a.annotation else ""
                    if "RunConfig" in ann or a.arg == "run_config":
                        out.append(f"{name}:{node.lineno} {node.name}({a.arg})")
            elif isinstance(node, ast.AnnAssign) and "RunConfig" in ast.unparse(
                node.annotation
            ):
                out.append(f"{name}:{node.lineno} field {ast.unparse(node.target)}")
    return out


def main() -> None:
    """Print the measurements."""
    root = Path(__file__).resolve().parents[2]
    known = modules(root)
    edges = import_edges(known)
    show_edges = "--edges" in sys.argv

    print(f"## modules: {len(known)}")
    kinds = Counter(k for *_, k, _ in edges)
    print(f"## import edges: {len(edges)} {dict(kinds)}")

    print("\n## cross-package edges (top package → top package, by kind)")
    cross = defaultdict(list)
    for a, b, kind, line in edges:
        pa, pb = a.split(".")[0], b.split(".")[0]
        if pa != pb:
            cross[(pa, pb)].append((a, b, kind, line))
    for (pa, pb), items in sorted(cross.items()):
        pairs = {(a, b) for a, b, *_ in items}
        by_kind = Counter(k for *_, k, _ in items)
        print(
            f"{pa} -> {pb}: {len(items)} statements, {len(pairs)} file pairs, {dict(by_kind)}"
        )
        if show_edges or pa == "rayfl" or pa == "policies":
            for a, b, kind, line in sorted(items):
                print(f"    {a}:{line} -> {b} [{kind}]")

    graph: dict[str, set[str]] = defaultdict(set)
    for a, b, kind, _ in edges:
        if kind != "typing":
            graph[a].add(b)
    print("\n## module cycles (module + function edges)")
    for comp in sccs(sorted(known), graph):
        print(f"  {len(comp)}: {', '.join(comp)}")
    graph_m: dict[str, set[str]] = defaultdict(set)
    for a, b, kind, _ in edges:
        if kind == "module":
            graph_m[a].add(b)
    print("## module cycles (module-level edges only)")
    for comp in sccs(sorted(known), graph_m):
        print(f"  {len(comp)}: {', '.join(comp)}")

    print("\n## layer cycles (rayfl.<sub>, envs, policies; module + function edges)")
    lgraph: dict[str, set[str]] = defaultdict(set)
    for a, b, kind, _ in edges:
        if kind != "typing" and layer(a) != layer(b):
            lgraph[layer(a)].add(layer(b))
    layers = sorted({layer(m) for m in known})
    for comp in sccs(layers, lgraph):
        print(f"  {len(comp)}: {', '.join(comp)}")
    print("## layer edges")
    for a in layers:
        if lgraph.get(a):
            print(f"  {a} -> {', '.join(sorted(lgraph[a]))}")

    print("\n## modules over 500 lines")
    for _name, path in sorted(
        known.items(), key=lambda kv: -len(kv[1].read_text().splitlines())
    ):
        n = len(path.read_text().splitlines())
        if n > 500:
            print(f"  {n:5d} {path.relative_to(root)}")

    print("\n## functions over 80 lines")
    for length, qual in long_functions(known):
        print(f"  {length:4d} {qual}")

    print('\n## observation keys quoted ("key"), by folder')
    folders = ("rayfl", "envs", "policies", "tests")
    counts = key_counts(root, folders)
    print("  key | " + " | ".join(folders) + " | total")
    for key, c in counts.items():
        print(
            f"  {key} | "
            + " | ".join(str(c[f]) for f in folders)
            + f" | {sum(c.values())}"
        )

    print("\n## signatures taking a whole RunConfig")
    for item in runconfig_params(known):
        print(f"  {item}")


if __name__ == "__main__":
    main()
