"""What a newcomer reads says what a choice is, in plain words.

The configuration reference (generated from the pydantic field descriptions and
section docstrings by scripts/config_reference.py) and the help of the ``rayfl``
command must not use internal shorthand: the papers' spec numbers ("seed 000"),
ambiguity labels ("[A18]", "[AMBIG-5]"), issue or work-session numbers, spec
section references or "the bar". Papers are named by title or arXiv id instead.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Internal shorthand that must not reach a user.
JARGON = re.compile(
    r"seed[ _]?0\d\d|\[A\d+\]|AMBIG|\bissue \d|\bsession[- ]\d|\bspecs?\b|"
    r"\bthe bar\b|§",
    re.IGNORECASE,
)


def _config_reference():
    name = "config_reference"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, ROOT / "scripts/config_reference.py"
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its dataclasses resolve their module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _texts(section):
    """(where, text) of every section doc and field description, depth first."""
    if section.doc:
        yield f"section {section.path or '<top>'} ({section.title})", section.doc
    for field in section.fields:
        yield f"field {field.path}", field.description
    for child in section.children:
        yield from _texts(child)


def _jargon(texts) -> list[str]:
    return [
        f"{where}: {JARGON.search(text).group(0)!r} in {text[:120]!r}"
        for where, text in texts
        if JARGON.search(text)
    ]


def _reference_texts() -> list[tuple[str, str]]:
    tree = _config_reference().config_sections()
    return list(_texts(tree))


def test_the_pattern_catches_the_shorthand():
    for bad in (
        "seed 000",
        "seed_002 §5.3",
        "[A18]",
        "[AMBIG-5]",
        "issue 11",
        "the session-2 surrogate",
        "spec A4",
        "clears the bar",
    ):
        assert JARGON.search(bad), bad
    for fine in (
        "the WPFL paper (Zhao et al., arXiv:2506.02422)",
        "Seed of every random draw",
        "a locally started Ray session",
        "Table II values",
        "the run seed",
    ):
        assert not JARGON.search(fine), fine


def test_config_reference_is_in_plain_words():
    texts = _reference_texts()
    assert len(texts) > 150  # every section was walked
    walked = " ".join(where for where, _ in texts)
    assert "field topology.em_mode" in walked  # the D2D section
    assert "field rl.surrogate_recency" in walked
    assert _jargon(texts) == []


def _cli_help() -> list[tuple[str, str]]:
    from rayfl.cli import build_parser

    parser = build_parser()
    out = [("rayfl --help", parser.format_help())]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append((f"rayfl {name} --help", sub.format_help()))
            for choice in action._choices_actions:
                out.append((f"rayfl --help: {choice.dest}", choice.help or ""))
    # `rayfl bench NAME --help` shows the first line of each benchmark's docstring
    from rayfl.benchmarks import BENCHMARKS

    for name, module in BENCHMARKS.items():
        path = ROOT / module.replace(".", "/")  # a package or a module
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        out.append((f"rayfl bench {name} --help", doc.splitlines()[0] if doc else ""))
    return out


def test_cli_help_is_in_plain_words():
    texts = _cli_help()
    assert any("tune-ditto" in text for _, text in texts)
    assert _jargon(texts) == []
