"""Issue 46's architecture rules, ratcheted: topologies and policies are plug-ins.

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

Each rule keeps a ratchet of today's offences (one line per file). A test fails
if a file's count grows or a new file appears, and also if a count shrank and
the ratchet was not lowered with it, so each ratchet stays exact until it is
empty. Its output lists the offending ``file:line``s. After a fix, run
``python tests/test_plugin_rules.py --print`` and paste the literals it prints.
Each detector also has an oracle: a small source with known violations and
allowed forms, and the exact lines it must find.
"""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Iterable
from pathlib import Path

if __name__ == "__main__":  # python tests/test_plugin_rules.py --print
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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

# ------------------------------------------------------------------ ratchets
# One line per file: today's count of offending lines. Lower them as fixes land.

#: Rule a: lines comparing against a topology name, outside the topologies' folders.
TOPOLOGY_NAME_RATCHET: dict[str, int] = {
    "envs/base.py": 1,
    "envs/d2d.py": 1,
    "envs/hierarchical.py": 1,
    "envs/multiagent.py": 1,
    "envs/rl.py": 6,
    "envs/rl_vector.py": 1,
    "policies/base.py": 1,
    "rayfl/benchmarks/env_speed.py": 2,
    "rayfl/benchmarks/policies.py": 5,
    "rayfl/benchmarks/policies_scenarios.py": 16,
    "rayfl/benchmarks/policies_tuning.py": 4,
    "rayfl/benchmarks/surrogate_fit_cli.py": 3,
    "rayfl/compare.py": 2,
    "rayfl/compare_seeds.py": 1,
    "rayfl/config/errors.py": 1,
    "rayfl/config/run.py": 10,
    "rayfl/config/semantics.py": 4,
    "rayfl/observation.py": 3,
    "rayfl/privacy/sensitivity.py": 5,
    "rayfl/rewards.py": 1,
    "rayfl/runner.py": 3,
    "rayfl/scheduler_config.py": 2,
    "rayfl/train_policy/evaluate.py": 2,
    "rayfl/train_policy/train.py": 3,
    "rayfl/warm_session.py": 1,
}

#: Rule b: imports of a topology package by rayfl/runner.py.
RUNNER_IMPORT_RATCHET: dict[str, int] = {
    "rayfl/runner.py": 6,
}

#: Rule c: uses of make_policy outside rayfl/registry.py.
MAKE_POLICY_RATCHET: dict[str, int] = {
    "envs/hierarchical.py": 1,
    "rayfl/benchmarks/env_speed.py": 1,
    "rayfl/benchmarks/policies.py": 3,
    "rayfl/compare.py": 1,
    "rayfl/d2d/selection.py": 1,
    "rayfl/hierarchy/deciders.py": 1,
    "rayfl/runner.py": 1,
    "rayfl/train_policy/evaluate.py": 2,
}

#: Rule d: lines special-casing a policy by name outside its own file.
POLICY_NAME_RATCHET: dict[str, int] = {
    "rayfl/benchmarks/policies.py": 5,
    "rayfl/compare.py": 1,
    "rayfl/config/run.py": 2,
    "rayfl/d2d/selection.py": 1,
    "rayfl/hierarchy/round.py": 1,
    "rayfl/registry.py": 1,
    "rayfl/runner.py": 1,
    "rayfl/scheduler_config.py": 1,
    "rayfl/train_policy/evaluate.py": 1,
}

#: Rule e: the top-level modules of rayfl/ while there are more than MAX_TOP_LEVEL
#: (empty once there are at most MAX_TOP_LEVEL).
TOP_LEVEL_RATCHET: set[str] = {
    "rayfl/_watchdog.py",
    "rayfl/atomic.py",
    "rayfl/checkpoint.py",
    "rayfl/cli.py",
    "rayfl/cli_info.py",
    "rayfl/cluster_address.py",
    "rayfl/compare.py",
    "rayfl/compare_progress.py",
    "rayfl/compare_seeds.py",
    "rayfl/eval_sample.py",
    "rayfl/exactsum.py",
    "rayfl/metrics.py",
    "rayfl/names.py",
    "rayfl/observation.py",
    "rayfl/output_config.py",
    "rayfl/plots.py",
    "rayfl/registry.py",
    "rayfl/resources.py",
    "rayfl/results.py",
    "rayfl/results_stream.py",
    "rayfl/rewards.py",
    "rayfl/run_status.py",
    "rayfl/runner.py",
    "rayfl/runs.py",
    "rayfl/schedule.py",
    "rayfl/scheduler_config.py",
    "rayfl/seeding.py",
    "rayfl/session.py",
    "rayfl/session_config.py",
    "rayfl/session_files.py",
    "rayfl/system.py",
    "rayfl/text_checks.py",
    "rayfl/topology.py",
    "rayfl/tracking.py",
    "rayfl/uplink.py",
    "rayfl/warm_session.py",
}

#: Rule e: "x_config.py ~ x.py" pairs (halves of one concept), as today.
HALVES_RATCHET: set[str] = {
    "rayfl/benchmarks/policies_cli.py ~ rayfl/benchmarks/policies.py",
    "rayfl/benchmarks/surrogate_fit_cli.py ~ rayfl/benchmarks/surrogate_fit.py",
    "rayfl/session_config.py ~ rayfl/session.py",
}


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


def ratchet_changes(
    counts: dict[str, int], ratchet: dict[str, int]
) -> tuple[list[str], list[str]]:
    """(files whose count grew or that are new, files whose count shrank)."""
    grown = sorted(p for p, n in counts.items() if n > ratchet.get(p, 0))
    shrunk = sorted(p for p, n in ratchet.items() if counts.get(p, 0) < n)
    return grown, shrunk


def _assert_ratchet(rule: str, ratchet: dict[str, int], advice: str) -> None:
    findings = _measured(rule)
    counts = {path: len(found) for path, found in findings.items()}
    print(f"rule {rule}: {sum(counts.values())} lines in {len(counts)} files")
    print(_listing(findings))
    grown, shrunk = ratchet_changes(counts, ratchet)
    assert not grown, (
        f"rule {rule}: {advice}; new offending lines in "
        + ", ".join(f"{p} ({ratchet.get(p, 0)} -> {counts[p]})" for p in grown)
        + ":\n"
        + _listing(findings, grown)
    )
    assert not shrunk, (
        f"rule {rule}: fewer offending lines than the ratchet; lower it "
        "(python tests/test_plugin_rules.py --print): "
        + ", ".join(f"{p!r}: {ratchet[p]} -> {counts.get(p, 0)}" for p in shrunk)
    )


# --------------------------------------------------------------------- rules
def test_it_measured():
    files = [rel for rel, _ in sources()]
    assert len(files) > 150 and {f.split("/")[0] for f in files} == set(SCANNED)
    assert any(f.startswith(TOPOLOGY_FOLDERS) for f in files)


def test_no_topology_name_outside_its_folder():
    _assert_ratchet(
        "a",
        TOPOLOGY_NAME_RATCHET,
        "compare against a topology name only in its folder; ask the plug-in "
        "(rayfl.registry.topology_of(cfg).<member>) instead",
    )


def test_runner_imports_no_topology():
    _assert_ratchet(
        "b",
        RUNNER_IMPORT_RATCHET,
        "rayfl/runner.py must not import rayfl.star, rayfl.hierarchy or rayfl.d2d; "
        "add a hook to rayfl.topology.TopologyPlugin",
    )


def test_make_policy_only_in_the_builder():
    _assert_ratchet(
        "c",
        MAKE_POLICY_RATCHET,
        "build policies with rayfl.registry.build_policy, not make_policy",
    )


def test_no_policy_special_cased_by_name():
    _assert_ratchet(
        "d",
        POLICY_NAME_RATCHET,
        "do not special-case a policy by name outside its own file; read its "
        "declaration (action_parts, topologies, uses_controls, ...) instead",
    )


def test_top_level_of_rayfl_has_at_most_15_modules():
    top, _ = layout()
    assert top and "rayfl/__init__.py" not in top  # it measured
    if len(top) <= MAX_TOP_LEVEL:
        assert not TOP_LEVEL_RATCHET, (
            f"rayfl/ has {len(top)} top-level modules (<= {MAX_TOP_LEVEL}): "
            "empty TOP_LEVEL_RATCHET"
        )
        return
    new = sorted(top - TOP_LEVEL_RATCHET)
    assert not new, (
        f"rayfl/ has {len(top)} top-level modules (at most {MAX_TOP_LEVEL} allowed); "
        f"put these in a package by concept: {new}"
    )
    gone = sorted(TOP_LEVEL_RATCHET - top)
    assert not gone, f"delete these from TOP_LEVEL_RATCHET (moved or removed): {gone}"


def test_no_module_is_half_of_another():
    _, halves = layout()
    new = sorted(halves - HALVES_RATCHET)
    assert not new, (
        "x_config.py/x_cli.py beside x.py are halves of one concept; "
        f"make them one module or a package x/: {new}"
    )
    gone = sorted(HALVES_RATCHET - halves)
    assert not gone, f"delete these from HALVES_RATCHET (fixed): {gone}"


# ------------------------------------------------------------------- oracles
def test_oracle_ratchet():
    ratchet = {"a.py": 2, "b.py": 1}
    assert ratchet_changes({"a.py": 2, "b.py": 1}, ratchet) == ([], [])
    assert ratchet_changes({"a.py": 3, "b.py": 1, "c.py": 1}, ratchet) == (
        ["a.py", "c.py"],
        [],
    )
    assert ratchet_changes({"a.py": 1}, ratchet) == ([], ["a.py", "b.py"])


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


# ---------------------------------------------------------------- --print
def _print_ratchets() -> None:
    """Print today's ratchets as the literals to paste above."""
    rules = measure()
    top, halves = layout()
    names = {
        "a": "TOPOLOGY_NAME_RATCHET",
        "b": "RUNNER_IMPORT_RATCHET",
        "c": "MAKE_POLICY_RATCHET",
        "d": "POLICY_NAME_RATCHET",
    }
    for rule, name in names.items():
        print(f"{name}: dict[str, int] = {{")
        for path, found in sorted(rules[rule].items()):
            print(f"    {json.dumps(path)}: {len(found)},")
        print("}\n")
    for name, values in (
        ("TOP_LEVEL_RATCHET", top if len(top) > MAX_TOP_LEVEL else set()),
        ("HALVES_RATCHET", halves),
    ):
        print(f"{name}: set[str] = {{")
        for value in sorted(values):
            print(f"    {json.dumps(value)},")
        print("}\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["--print"]:
        sys.exit("usage: python tests/test_plugin_rules.py --print")
    _print_ratchets()
