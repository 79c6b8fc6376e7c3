"""Issue 46's architecture rules: topologies and policies are plug-ins.

The rules (a-e) and what counts are in :mod:`tests.plugins.rules`, whose
detectors each test below runs over ``rayfl/``, ``envs/`` and ``policies/``:

a) no module outside a topology's folder compares against a topology name
   (the registry excepted);
b) ``rayfl/runner.py`` imports no topology package;
c) ``make_policy`` is used only in ``rayfl/registry.py`` (``build_policy`` is
   the one builder);
d) no policy is special-cased by name outside its own file;
e) ``rayfl/`` has at most 15 top-level modules, and no ``x_config.py`` or
   ``x_cli.py`` beside ``x.py``.

A test fails on any offence and lists the offending ``file:line``s. (The rules
were ratcheted while issue 46's work landed; every ratchet reached empty.)
Each detector also has an oracle: a small source with known violations and
allowed forms, and the exact lines it must find.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from tests.plugins.rules import (
    MAX_TOP_LEVEL,
    SCANNED,
    TOPOLOGY_FOLDERS,
    Finding,
    layout,
    make_policy_uses,
    measure,
    module_layout,
    policy_name_uses,
    sources,
    topology_imports,
    topology_name_uses,
)

_MEASURED: dict[str, dict[str, list[Finding]]] = {}


def _measured(rule: str) -> dict[str, list[Finding]]:
    if not _MEASURED:
        _MEASURED.update(measure())
    return _MEASURED[rule]


def _listing(
    findings: dict[str, list[Finding]], paths: Iterable[str] | None = None
) -> str:
    wanted = sorted(findings) if paths is None else sorted(paths)
    return "\n".join(
        f"  {path}:{line}: {what}"
        for path in wanted
        for line, what in findings.get(path, [])
    )


def _assert_none(rule: str, advice: str) -> None:
    findings = _measured(rule)
    assert not findings, f"rule {rule}: {advice}:\n" + _listing(findings)


# --------------------------------------------------------------------- rules
def test_it_measured():
    files = [rel for rel, _ in sources()]
    assert len(files) > 150 and {f.split("/")[0] for f in files} == set(SCANNED)
    assert any(f.startswith(TOPOLOGY_FOLDERS) for f in files)


def test_no_topology_name_outside_its_folder():
    _assert_none(
        "a",
        "compare against a topology name only in its folder; ask the plug-in "
        "(rayfl.registry.topology_of(cfg).<member>) instead",
    )


def test_runner_imports_no_topology():
    _assert_none(
        "b",
        "rayfl/runner.py must not import rayfl.star, rayfl.hierarchy or rayfl.d2d; "
        "add a hook to rayfl.topology.TopologyPlugin",
    )


def test_make_policy_only_in_the_builder():
    _assert_none(
        "c",
        "build policies with rayfl.registry.build_policy, not make_policy",
    )


def test_no_policy_special_cased_by_name():
    _assert_none(
        "d",
        "do not special-case a policy by name outside its own file; read its "
        "declaration (action_parts, topologies, uses_controls, ...) instead",
    )


def test_top_level_of_rayfl_has_at_most_15_modules():
    top, _ = layout()
    assert top and "rayfl/__init__.py" not in top  # it measured
    assert len(top) <= MAX_TOP_LEVEL, (
        f"rayfl/ has {len(top)} top-level modules (at most {MAX_TOP_LEVEL} allowed); "
        f"group them in packages by concept: {sorted(top)}"
    )


def test_no_module_is_half_of_another():
    _, halves = layout()
    assert not halves, (
        "x_config.py/x_cli.py beside x.py are halves of one concept; "
        f"make them one module or a package x/: {sorted(halves)}"
    )


# ------------------------------------------------------------------- oracles
ORACLE_TOPOLOGY = '''
"""Docstring naming "star" and "d2d" is fine."""
ERROR = "topology.kind must be 'star'"        # a message: fine
if kind == "d2d":                               # 1
    pass
if "hierarchical" != cfg.topology.kind:         # 2
    pass
ok = kind in ("star", "flat")                   # 3
ok = kind not in frozenset({"d2d"})             # 4
parts = {"star": 1, "other": 2}                 # 5
env = ENVS["star"]                              # 6
env = ENVS.get("d2d")                           # 7
match kind:
    case "hierarchical":                        # 8
        pass
    case "ring":
        pass
KINDS = ("star", "hierarchical", "d2d")         # 9
if kind == "d2d" and other == "star":           # 10 (one line)
    pass
plugin = topology_of("d2d")                     # 11 (a call argument)
check_policy(name, topology="star")             # 12 (a keyword argument)
section = {"kind": "hierarchical", "tau": 2}    # 13 (a section built here)
x = ENVS["rl"]; y = kind == "ring"; z = {"star-ish": "ring"}; f(kind, "ring")
flat_env = plugin.envs["flat"]; role = {"flat": "envs.x:Flat"}
class Ring:
    name = "star"
    topologies = frozenset({"star", "d2d"})     # 14 (not in policies/)
'''


def test_oracle_topology_names():
    tree = ast.parse(ORACLE_TOPOLOGY)
    found = topology_name_uses(tree)
    lines = ORACLE_TOPOLOGY.splitlines()
    # the number each counted line carries, in order: exactly the numbered lines
    numbers = [lines[line - 1].split("# ")[-1].split(" ")[0] for line, _ in found]
    assert numbers == [str(i) for i in range(1, 15)]
    # a policy's own declaration is allowed in policies/
    assert len(topology_name_uses(tree, declarations_allowed=True)) == 13


ORACLE_IMPORTS = """
import rayfl.star.round                          # 1
from rayfl.d2d import selection                  # 2
from rayfl import hierarchy                      # 3
from .star.plugin import Star                    # 4
from . import d2d                                # 5
import rayfl.starry, rayfl.registry
from rayfl.config import star_section
def build():
    from rayfl.hierarchy.deciders import edge    # 6
"""


def test_oracle_runner_imports():
    found = topology_imports(ast.parse(ORACLE_IMPORTS))
    assert [line for line, _ in found] == [2, 3, 4, 5, 6, 10]
    assert found[0][1] == "rayfl.star.round"
    # relative imports resolve from the module's package
    assert topology_imports(ast.parse("from ..d2d import x"), "rayfl.engine.build")


ORACLE_MAKE_POLICY = """
from rayfl.registry import make_policy, build_policy
p = make_policy("random", env)                   # 1
q = registry.make_policy("random", env)          # 2
factory = make_policy                            # 3
r = build_policy("random", env)
"make_policy(" in text
"""


def test_oracle_make_policy():
    found = make_policy_uses(ast.parse(ORACLE_MAKE_POLICY))
    assert [line for line, _ in found] == [3, 4, 5]


ORACLE_POLICY_NAMES = """
POLICIES = {"all": "a:A", "uniform": "u:U", "learned": "l:L"}
if cfg.scheduler.policy == "uniform":            # 1 (names a policy)
    pass
if label == "learned":                           # 2 (a distinctive name)
    pass
if config.pool == "all" or split == "all":       # not a policy
    pass
RULES = ("all", "uniform")                       # 3 (a name list)
WORDS = ("all", "uniform", "data_weighted")      # ordinary words only
aggregation: Literal["uniform", "data_weighted"] = Field("uniform")
baselines: list[str] = Field(default_factory=lambda: ["learned", "channel_threshold"])
def preflight(cfg):
    name = cfg.scheduler.policy
    if name == "all":                            # 4 (assigned from a policy)
        return
    for name2 in POLICIES:
        if name2 in ("all",):                    # 5 (looped over the policies)
            continue
def other(args):
    if args.name == "all":                       # a benchmark name
        return
    if args.name == "channel_threshold":         # 6
        return
    aggregation = "uniform"
    return aggregation != "uniform" or LEARNED_POLICY == name
match cfg.scheduler.policy:
    case "channel_threshold":                    # 7
        pass
    case "all":                                  # (a match on an ordinary word)
        pass
"""


def test_oracle_policy_names():
    tree = ast.parse(ORACLE_POLICY_NAMES)
    names = ("all", "uniform", "learned", "channel_threshold", "data_weighted")
    found = policy_name_uses(tree, names)
    lines = ORACLE_POLICY_NAMES.splitlines()
    numbers = [lines[line - 1].split("# ")[-1].split(" ")[0] for line, _ in found]
    assert numbers == [str(i) for i in range(1, 8)]
    # in the policy's own file its names are free
    own = policy_name_uses(tree, names, own=("learned", "channel_threshold"))
    assert len(own) == 4


def test_oracle_module_layout():
    paths = [
        "rayfl/__init__.py",
        "rayfl/session.py",
        "rayfl/session_config.py",
        "rayfl/cli.py",
        "rayfl/cli_info.py",
        "rayfl/bench_cli.py",
        "rayfl/bench/__init__.py",
        "rayfl/star/config.py",
        "rayfl/star/round.py",
        "rayfl/star/round_cli.py",
        "rayfl/output_config.py",
    ]
    top, halves = module_layout(paths)
    assert top == {
        "rayfl/session.py",
        "rayfl/session_config.py",
        "rayfl/cli.py",
        "rayfl/cli_info.py",
        "rayfl/bench_cli.py",
        "rayfl/output_config.py",
    }
    assert halves == {
        "rayfl/session_config.py ~ rayfl/session.py",
        "rayfl/bench_cli.py ~ rayfl/bench",
        "rayfl/star/round_cli.py ~ rayfl/star/round.py",
    }
