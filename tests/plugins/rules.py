"""The detectors of issue 46's architecture rules (tests/test_plugin_rules.py).

Scanned: every module of ``rayfl/``, ``envs/`` and ``policies/`` (parsed with
:mod:`ast`; docstrings, comments and strings that are not compared never count).
A finding is one source line; a line counts once per rule.

Rules:

a) **No topology name outside its folder.** A line counts if it compares against
   a topology name (``"flat"``, ``"star"``, ``"hierarchical"``, ``"d2d"``): the
   name on either side of ``==``/``!=``/``is``, or inside a literal tuple, list,
   set or ``frozenset(...)`` right of ``in``/``not in``; a dict literal keyed by
   one or holding one (``{"kind": "d2d"}``: a topology's section built outside
   its folder); a subscript by one (``ENVS["star"]``); a call given one as an argument
   (``ENVS.get("star")``, ``topology_of("star")``, ``check_policy(name,
   topology="star")``, a scenario ``Scenario("x", "d2d", ...)``); a ``match``
   case on one; or a literal collection naming two or more topologies (a list
   of "the topologies", which a fifth one would not be in). ``"flat"`` is also
   the plug-in's env role (``envs["flat"]``): as a key, a dict value or a call
   argument it does not count (:data:`ALSO_OTHER_WORDS`). Exempt: the
   topologies' folders (``rayfl/star/``, ``rayfl/hierarchy/``, ``rayfl/d2d/``,
   ``envs/star/``, ``envs/hierarchy/``, ``envs/d2d/``), ``rayfl/registry.py``, and
   a class's own ``topologies = frozenset({...})`` declaration in ``policies/``.
   ``name = "star"`` in a plug-in class is no comparison, so never counts.
b) **``rayfl/runner.py`` imports no topology**: no ``import``/``from ... import``
   (module level or inside a function, relative or absolute) of ``rayfl.star``,
   ``rayfl.hierarchy`` or ``rayfl.d2d`` or a module of theirs.
c) **One builder**: no use of ``make_policy`` (a call, or a reference that could
   be called later) outside ``rayfl/registry.py``; the builder is ``build_policy``.
d) **No policy special-cased by name outside its own file.** A line counts if it
   compares (as in a, or a ``match`` case) against a registered policy name
   (``rayfl.registry.POLICIES``), or holds a literal collection (tuple, list, set,
   dict keys) of two or more policy names: a name list such as
   ``BUILTIN_POLICIES``. False positives: ``"all"``, ``"random"``, ``"uniform"``
   and ``"data_weighted"`` (:data:`ORDINARY_WORDS`) are also values of other
   fields (``data.pool``, the D2D ``target``, ``algorithm.aggregation``,
   ``rayfl bench all``), so a comparison against one of them counts only when
   the other side names a policy: its source matches :data:`POLICY_WORDS`
   (``cfg.scheduler.policy``, ``policy``, ``rule``), or it is a variable its
   function assigned or looped from such an expression (``name =
   cfg.scheduler.policy``; ``for name in POLICIES``); and a collection of those
   words only counts when assigned to such a name (``PARTICIPANT_RULES``). Every
   other policy name (``"learned"``, ``"channel_threshold"``, ...) counts in any
   comparison. Exempt: ``policies/<file>.py`` for the names registered from
   that file, the registry's ``POLICIES`` table, and a config field's default
   (``Field(default_factory=lambda: [...])``: a list of baselines is data).
   Comparing with ``registry.LEARNED_POLICY`` is no literal and does not count;
   ``str.startswith("learned")`` is not seen.
e) **Packages by concept**: the top level of ``rayfl/`` has at most
   :data:`MAX_TOP_LEVEL` modules besides ``__init__.py``, and no folder of
   ``rayfl/`` holds ``x_config.py`` or ``x_cli.py`` beside ``x.py`` (or a package
   ``x/``): two halves of one concept.

The ratchets of today's offences, and the tests, are in
tests/test_plugin_rules.py.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("rayfl", "envs", "policies")
TOPOLOGY_NAMES = frozenset({"flat", "star", "hierarchical", "d2d"})
#: Topology names that are also other words: "flat" is the plug-in's env role
#: (``topology_of(cfg).envs["flat"]``) and the flattened RL ids, so it counts
#: only where it is compared with (``topology.kind == "flat"``) or listed with
#: another topology, not as a key, a dict value or a call argument (rule a).
ALSO_OTHER_WORDS = frozenset({"flat"})
TOPOLOGY_FOLDERS = (
    "rayfl/star/",
    "rayfl/hierarchy/",
    "rayfl/d2d/",
    "envs/star/",
    "envs/hierarchy/",
    "envs/d2d/",
)
REGISTRY = "rayfl/registry.py"
RUNNER = "rayfl/runner.py"
TOPOLOGY_PACKAGES = ("rayfl.star", "rayfl.hierarchy", "rayfl.d2d")
#: Policy names that are also ordinary values of other fields (rule d).
ORDINARY_WORDS = frozenset({"all", "random", "uniform", "data_weighted"})
#: What names a policy in an expression or a variable (rule d).
POLICY_WORDS = re.compile(r"polic|sched|rule", re.IGNORECASE)
MAX_TOP_LEVEL = 15
HALF_SUFFIXES = ("_config", "_cli")


# ----------------------------------------------------------------- detectors
Finding = tuple[int, str]  # (line, what was found)


def _strings(node: ast.AST | None) -> list[str]:
    """The string constants of a literal: the constant itself, or a tuple, list,
    set or ``set(...)``/``frozenset(...)``/``tuple(...)`` call of literals."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [e.value for e in node.elts if _constant(e) is not None]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"set", "frozenset", "tuple", "list"}
        and len(node.args) == 1
    ):
        return _strings(node.args[0])
    return []


def _constant(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _compared(node: ast.Compare) -> Iterator[tuple[str, ast.AST]]:
    """(string, the other operand) for every string a comparison tests against."""
    operands = [node.left, *node.comparators]
    for op, left, right in zip(node.ops, operands[:-1], operands[1:], strict=True):
        for mine, other in ((left, right), (right, left)):
            if (value := _constant(mine)) is not None:
                yield value, other
        if isinstance(op, ast.In | ast.NotIn) and _constant(right) is None:
            for value in _strings(right):
                yield value, left


def _lookups(node: ast.AST) -> Iterator[str]:
    """Strings a subscript keys by, a dict literal holds (keys and values), or a
    call is passed."""
    if isinstance(node, ast.Subscript):
        yield from filter(None, [_constant(node.slice)])
    elif isinstance(node, ast.Call):
        arguments = [*node.args, *(k.value for k in node.keywords)]
        yield from filter(None, map(_constant, arguments))
    elif isinstance(node, ast.Dict):
        yield from filter(None, map(_constant, [*node.keys, *node.values]))


def _match_values(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.match_case):
        for pattern in ast.walk(node.pattern):
            if isinstance(pattern, ast.MatchValue):
                yield from filter(None, [_constant(pattern.value)])


def _collection(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return _strings(node)
    return []


def _declarations(tree: ast.AST) -> set[int]:
    """ids of the values of class-level ``topologies = ...`` assignments."""
    found: set[int] = set()
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        for stmt in cls.body:
            targets = (
                stmt.targets
                if isinstance(stmt, ast.Assign)
                else [stmt.target]
                if isinstance(stmt, ast.AnnAssign)
                else []
            )
            if any(isinstance(t, ast.Name) and t.id == "topologies" for t in targets):
                found.update(id(n) for n in ast.walk(stmt.value))
    return found


def _dedupe(findings: Iterable[Finding]) -> list[Finding]:
    seen: dict[int, str] = {}
    for line, what in findings:
        seen.setdefault(line, what)
    return sorted(seen.items())


def topology_name_uses(
    tree: ast.AST, *, declarations_allowed: bool = False
) -> list[Finding]:
    """Rule a: lines of ``tree`` that compare against or key by a topology name.

    Args:
        tree: A parsed module.
        declarations_allowed: Skip a class's ``topologies = ...`` (policies/).
    """
    skip = _declarations(tree) if declarations_allowed else set()
    found: list[Finding] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        names: list[str] = []
        if isinstance(node, ast.Compare):
            names = [value for value, _ in _compared(node)]
        elif isinstance(node, ast.match_case):
            names = list(_match_values(node))
        else:
            names = [n for n in _lookups(node) if n not in ALSO_OTHER_WORDS]
            listed = set(_collection(node)) & TOPOLOGY_NAMES
            if len(listed) >= 2:
                names += sorted(listed)
        hits = [n for n in names if n in TOPOLOGY_NAMES]
        if hits:
            line = getattr(node, "lineno", None) or node.pattern.lineno  # type: ignore[attr-defined]
            found.append((line, f"{type(node).__name__} {hits[0]!r}"))
    return _dedupe(found)


def topology_imports(tree: ast.AST, module: str = "rayfl.runner") -> list[Finding]:
    """Rule b: imports of rayfl.star/hierarchy/d2d (or a module of theirs) in ``tree``."""
    package = module.rpartition(".")[0]
    found: list[Finding] = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            if any(
                target == p or target.startswith(p + ".") for p in TOPOLOGY_PACKAGES
            ):
                found.append((node.lineno, target))
                break
    return _dedupe(found)


def make_policy_uses(tree: ast.AST) -> list[Finding]:
    """Rule c: every use (call or reference, not an import) of ``make_policy``."""
    found = [
        (node.lineno, "make_policy")
        for node in ast.walk(tree)
        if (isinstance(node, ast.Name) and node.id == "make_policy")
        or (isinstance(node, ast.Attribute) and node.attr == "make_policy")
    ]
    return _dedupe(found)


_SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function (or module), not those of functions inside it."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))


def _policy_variables(scope: ast.AST) -> set[str]:
    """Names a function (or module) assigns or loops from a policy expression."""
    names: set[str] = set()

    def bind(target: ast.AST, value: ast.AST) -> None:
        if POLICY_WORDS.search(ast.unparse(value)):
            names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))

    if not isinstance(scope, ast.Module):
        names.update(
            a.arg
            for a in ast.walk(scope.args)
            if isinstance(a, ast.arg) and POLICY_WORDS.search(a.arg)
        )
    for node in _own_nodes(scope):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                bind(target, node.value)
        elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
            bind(node.target, node.value)
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            bind(node.target, node.iter)
    return names


def _names_a_policy(operand: ast.AST, variables: set[str]) -> bool:
    if isinstance(operand, ast.Name) and operand.id in variables:
        return True
    return bool(POLICY_WORDS.search(ast.unparse(operand)))


def _assigned(tree: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """(target text, value) of every assignment."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            yield from ((ast.unparse(t), node.value) for t in node.targets)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            yield ast.unparse(node.target), node.value


def _field_defaults(tree: ast.AST) -> Iterator[ast.AST]:
    """The default values of ``Field(...)`` calls (a config field's data)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("Field"):
            yield from node.args[:1]
            yield from (
                k.value
                for k in node.keywords
                if k.arg in {"default", "default_factory"}
            )


def _policy_hit(
    node: ast.AST, names: frozenset[str], variables: set[str], named_lists: set[int]
) -> str | None:
    """The policy name ``node`` special-cases, or None."""
    if isinstance(node, ast.Compare):
        for value, other in _compared(node):
            if value in names and (
                value not in ORDINARY_WORDS or _names_a_policy(other, variables)
            ):
                return value
        return None
    if isinstance(node, ast.match_case):
        return next(
            (v for v in _match_values(node) if v in names - ORDINARY_WORDS), None
        )
    keys = _collection(node)
    if isinstance(node, ast.Dict):
        keys += [k for k in map(_constant, node.keys) if k]
    listed = set(keys) & names
    if len(listed) >= 2 and (listed - ORDINARY_WORDS or id(node) in named_lists):
        return sorted(listed)[0]
    return None


def policy_name_uses(
    tree: ast.AST, policies: Iterable[str], *, own: Iterable[str] = ()
) -> list[Finding]:
    """Rule d: lines of ``tree`` that special-case a policy by name.

    Args:
        tree: A parsed module.
        policies: The registered policy names.
        own: Names registered from this very file (exempt).
    """
    names = frozenset(policies) - frozenset(own)
    skip = {  # the registry's own table, and config fields' default values
        id(n)
        for value in [v for t, v in _assigned(tree) if t == "POLICIES"]
        + list(_field_defaults(tree))
        for n in ast.walk(value)
    }
    named_lists = {id(v) for t, v in _assigned(tree) if POLICY_WORDS.search(t)}
    found: list[Finding] = []

    def visit(node: ast.AST, variables: set[str]) -> None:
        if id(node) in skip:
            return
        if isinstance(node, _SCOPES):
            variables = variables | _policy_variables(node)
        hit = _policy_hit(node, names, variables, named_lists)
        if hit is not None:
            line = getattr(node, "lineno", None) or node.pattern.lineno  # type: ignore[attr-defined]
            found.append((line, repr(hit)))
        for child in ast.iter_child_nodes(node):
            visit(child, variables)

    visit(tree, set())
    return _dedupe(found)


def module_layout(paths: Iterable[str]) -> tuple[set[str], set[str]]:
    """Rule e: (the top-level modules of rayfl/, the "half ~ whole" pairs).

    Args:
        paths: Posix paths relative to the repository, e.g. ``rayfl/cli.py``
            (a package ``x/`` is seen through its ``x/__init__.py``).
    """
    paths = set(paths)
    top = {
        p
        for p in paths
        if p.count("/") == 1 and p.startswith("rayfl/") and p != "rayfl/__init__.py"
    }
    halves = set()
    for path in paths:
        folder, _, file = path.rpartition("/")
        stem = file.removesuffix(".py")
        for suffix in HALF_SUFFIXES:
            whole = stem.removesuffix(suffix)
            if whole == stem or not whole:
                continue
            for other in (f"{folder}/{whole}.py", f"{folder}/{whole}/__init__.py"):
                if other in paths:
                    halves.add(f"{path} ~ {other.removesuffix('/__init__.py')}")
    return top, halves


# ------------------------------------------------------------------ measuring
def sources() -> Iterator[tuple[str, ast.AST]]:
    for package in SCANNED:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            yield rel, ast.parse(path.read_text(encoding="utf-8"), filename=rel)


def _own_policies(policies: dict[str, str]) -> dict[str, set[str]]:
    owners: dict[str, set[str]] = {}
    for name, entry in policies.items():
        module = entry.partition(":")[0]
        owners.setdefault(module.replace(".", "/") + ".py", set()).add(name)
    return owners


def measure() -> dict[str, dict[str, list[Finding]]]:
    """Every rule's findings by file: rule → {path: [(line, what), ...]}."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from rayfl.registry import POLICIES

    owners = _own_policies(POLICIES)
    rules: dict[str, dict[str, list[Finding]]] = {k: {} for k in "abcd"}
    for rel, tree in sources():
        per_rule = {
            "a": []
            if rel == REGISTRY or rel.startswith(TOPOLOGY_FOLDERS)
            else topology_name_uses(
                tree, declarations_allowed=rel.startswith("policies/")
            ),
            "b": topology_imports(tree) if rel == RUNNER else [],
            "c": [] if rel == REGISTRY else make_policy_uses(tree),
            "d": policy_name_uses(tree, POLICIES, own=owners.get(rel, ())),
        }
        for rule, findings in per_rule.items():
            if findings:
                rules[rule][rel] = findings
    return rules


def layout() -> tuple[set[str], set[str]]:
    paths = (p.relative_to(ROOT).as_posix() for p in (ROOT / "rayfl").rglob("*.py"))
    return module_layout(paths)
