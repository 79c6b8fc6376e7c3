"""Run the code blocks of the user documentation, so no command in it fails as written.

Scope, for now: README.md from its top to the heading ``## What a run writes``,
i.e. the two ``make`` commands and the Quick start (Python and shell). The rest of
the README and the pages under docs/ join when they are rewritten as user
documentation: add them to ``SCOPES`` (a file and the heading it stops at, None =
the whole file).

How blocks run:

- ```` ```python ```` blocks: executed in order in one namespace per file, in a
  temporary working directory holding a copy of ``examples/`` (so runs land
  there), with Ray started locally on 2 CPUs (as in a notebook).
- ```` ```bash ```` blocks: each line that starts with ``rayfl `` is run by bash in
  that directory (globs expand), ``rayfl`` being this interpreter's
  ``python -m rayfl.cli``; other lines (``make``, ``pip``...) are not run.
- Not run: blocks of another or no language, blocks showing output (a line
  starting with ``$ ``), and blocks preceded by ``<!-- snippet: skip (reason) -->``.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: (markdown file, the heading where the checked part stops; None = whole file)
SCOPES = [("README.md", "## What a run writes")]
SKIP = re.compile(r"<!--\s*snippet:\s*skip\b.*-->")


@dataclass
class Block:
    """One fenced code block: language, text, first line number, why not run."""

    lang: str
    code: str
    line: int
    skip: str | None = None


def extract_blocks(text: str, stop: str | None = None) -> list[Block]:
    """Return the fenced code blocks of markdown ``text`` up to the ``stop`` heading."""
    blocks: list[Block] = []
    lines = text.splitlines()
    previous = ""  # last non-blank line before the current position
    i = 0
    while i < len(lines):
        line = lines[i]
        if stop is not None and line.strip() == stop:
            break
        fence = re.match(r"^(\s*)(```+|~~~+)\s*([\w+-]*)", line)
        if not fence:
            if line.strip():
                previous = line.strip()
            i += 1
            continue
        marker, lang = fence.group(2), fence.group(3).lower()
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(marker):
            body.append(lines[j])
            j += 1
        code = "\n".join(body)
        skip = None
        if SKIP.search(previous):
            skip = previous
        elif any(b.lstrip().startswith("$ ") for b in body):
            skip = "shows output"
        elif lang not in ("python", "bash"):
            skip = f"language {lang or 'none'!r}"
        blocks.append(Block(lang, code, i + 1, skip))
        previous = ""
        i = j + 1
    return blocks


def _scoped_blocks() -> list[tuple[str, list[Block]]]:
    out = []
    for name, stop in SCOPES:
        text = (ROOT / name).read_text(encoding="utf-8")
        if stop is not None:
            assert stop in text.splitlines(), f"{name}: heading {stop!r} is gone"
        out.append((name, extract_blocks(text, stop)))
    return out


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working directory with examples/ and a `rayfl` on PATH (this interpreter)."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    bindir = tmp_path / ".bin"
    bindir.mkdir()
    shim = bindir / "rayfl"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m rayfl.cli "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    monkeypatch.chdir(tmp_path)
    env = dict(os.environ)
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), env.get("PYTHONPATH")) if p
    )
    return tmp_path, env


def test_extract_blocks_languages_skips_and_scope():
    text = "\n".join(
        [
            "# Title",
            "```bash",
            "make demo",
            "rayfl run a.yaml",
            "```",
            "<!-- snippet: skip (needs a cluster) -->",
            "",
            "```python",
            "import ray",
            "```",
            "```",
            "$ rayfl run x",
            "output",
            "```",
            "```yaml",
            "rounds: 3",
            "```",
            "```python",
            "x = 1",
            "```",
            "## Stop here",
            "```bash",
            "rayfl never",
            "```",
        ]
    )
    blocks = extract_blocks(text, stop="## Stop here")
    assert [b.lang for b in blocks] == ["bash", "python", "", "yaml", "python"]
    assert blocks[0].skip is None and blocks[0].code == "make demo\nrayfl run a.yaml"
    assert blocks[0].line == 2
    assert "needs a cluster" in blocks[1].skip
    assert blocks[2].skip == "shows output"
    assert blocks[3].skip == "language 'yaml'"
    assert blocks[4].skip is None and blocks[4].code == "x = 1"
    assert len(extract_blocks(text)) == 6


def test_scope_has_the_quick_start_blocks():
    ((name, blocks),) = _scoped_blocks()
    run = [b for b in blocks if b.skip is None]
    assert any(b.lang == "python" and "rayfl.run(" in b.code for b in run), name
    commands = [line for b in run if b.lang == "bash" for line in b.code.splitlines()]
    assert any(c.startswith("rayfl run ") for c in commands)
    assert any(c.startswith("make demo") for c in commands)  # listed, never run


def test_python_blocks_run(workdir):
    import ray

    _, _ = workdir
    started = not ray.is_initialized()
    if started:
        ray.init(
            address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR"
        )
    try:
        for name, blocks in _scoped_blocks():
            namespace: dict[str, object] = {"__name__": f"snippets:{name}"}
            for block in blocks:
                if block.skip is None and block.lang == "python":
                    code = compile(block.code, f"{name}:{block.line}", "exec")
                    exec(code, namespace)  # noqa: S102 - the documented snippet
    finally:
        if started:
            ray.shutdown()


@pytest.mark.slow
def test_bash_rayfl_lines_run(workdir):
    cwd, env = workdir
    ran = 0
    for name, blocks in _scoped_blocks():
        for block in blocks:
            if block.skip is not None or block.lang != "bash":
                continue
            for offset, line in enumerate(block.code.splitlines(), start=1):
                if not line.startswith("rayfl "):
                    continue
                proc = subprocess.run(
                    ["bash", "-c", line],
                    cwd=cwd,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                where = f"{name}:{block.line + offset}: {line}"
                assert proc.returncode == 0, f"{where}\n{proc.stderr[-2000:]}"
                ran += 1
    assert ran >= 1
