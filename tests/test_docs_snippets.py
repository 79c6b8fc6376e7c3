"""Run the code blocks of the user documentation, so no command in it fails as written.

Scope: README.md from its top to the heading ``## What a run writes`` (the two
``make`` commands and the Quick start), and every page of the documentation site's
nav that is a file under docs/ (``mkdocs.yml``'s nav, with every page of
docs/reproductions/; the pages generated at build time hold no code blocks).

How blocks run:

- ```` ```python ```` blocks: executed in order in one namespace per file, in a
  temporary working directory holding a copy of ``examples/`` and a link to
  ``scripts/`` (so runs land there), with Ray started locally on 2 CPUs (as in a
  notebook).
- ```` ```bash ```` blocks: each command (``\\``-continued lines joined) that starts
  with ``rayfl `` or ``python `` is run by bash in that directory (globs expand),
  ``rayfl`` and ``python`` being this interpreter; set-up lines (``make``, ``pip``,
  ``. .venv/bin/activate``, ``cd``, ``export``) are not run. Any other command
  needs a marker (below), so no block goes unchecked silently.
- Blocks preceded by ``<!-- snippet: check-only (why, e.g. 25 min on 2 cores) -->``:
  their ``rayfl``/``python`` commands are too long to run here, so each is checked
  by ``scripts/check_args.py``: the script exists, its argparse parser accepts the
  arguments (and for ``rayfl run/compare``, the configuration with its overrides
  is valid), and nothing else runs.
- Not run: blocks of another or no language, blocks showing output (a line
  starting with ``$ ``), and blocks preceded by ``<!-- snippet: skip (reason) -->``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

# All tests here use the shared Ray session (tests/conftest.py), which runs the
# Python blocks: the module then runs with the other Ray modules.
pytestmark = pytest.mark.usefixtures("ray_session")

ROOT = Path(__file__).resolve().parents[1]
#: (markdown file, the heading where the checked part stops; None = whole file)
README_SCOPE = ("README.md", "## What a run writes")
SKIP = re.compile(r"<!--\s*snippet:\s*skip\b.*-->")
CHECK_ONLY = re.compile(r"<!--\s*snippet:\s*check-only\s*\((?P<why>[^)]+)\)\s*-->")
#: commands the runner runs (or checks, under check-only)
RUNNABLE = ("rayfl ", "python ")
#: set-up commands shown to readers but not run by the tests
SETUP = ("make ", ". ", "source ", "pip ", "cd ", "export ")

_spec = importlib.util.spec_from_file_location(
    "docs_site", ROOT / "scripts/docs_site.py"
)
docs_site = importlib.util.module_from_spec(_spec)
sys.modules["docs_site"] = docs_site  # dataclasses resolve their module
_spec.loader.exec_module(docs_site)


@dataclass
class Block:
    """One fenced code block: language, text, first line number, why not run."""

    lang: str
    code: str
    line: int
    skip: str | None = None
    check_only: str | None = None  # the marker's reason: check, do not run


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
        skip, check_only = None, None
        if SKIP.search(previous):
            skip = previous
        elif any(b.lstrip().startswith("$ ") for b in body):
            skip = "shows output"
        elif lang not in ("python", "bash"):
            skip = f"language {lang or 'none'!r}"
        elif CHECK_ONLY.search(previous):
            check_only = CHECK_ONLY.search(previous).group("why")
        blocks.append(Block(lang, code, i + 1, skip, check_only))
        previous = ""
        i = j + 1
    return blocks


def commands(code: str) -> list[tuple[int, str]]:
    """Return a bash block's commands as (line offset from 1, text), comments dropped.

    Lines continued with a trailing backslash are joined into one command.
    """
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for offset, raw in enumerate(code.splitlines(), start=1):
        line = raw.strip()
        if not pending:
            start = offset
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line and not line.startswith("#"):
            out.append((start, line))
    if pending.strip():
        out.append((start, pending.strip()))
    return out


def nav_pages() -> list[str]:
    """Return the nav's pages that are files under docs/ (paths from the root)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = docs_site.expand_nav(config["nav"], ROOT / "docs")
    found: list[str] = []

    def walk(item: object) -> None:
        if isinstance(item, str):
            if item.endswith(".md") and (ROOT / "docs" / item).is_file():
                found.append(f"docs/{item}")
        elif isinstance(item, dict):
            for value in item.values():
                walk(value)
        elif isinstance(item, list):
            for value in item:
                walk(value)

    walk(nav)
    return found


def scopes() -> list[tuple[str, str | None]]:
    """Return the checked files and where each stops (README first)."""
    return [README_SCOPE, *((page, None) for page in nav_pages())]


def _scoped_blocks() -> list[tuple[str, list[Block]]]:
    out = []
    for name, stop in scopes():
        text = (ROOT / name).read_text(encoding="utf-8")
        if stop is not None:
            assert stop in text.splitlines(), f"{name}: heading {stop!r} is gone"
        out.append((name, extract_blocks(text, stop)))
    return out


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working directory with examples/, scripts/, and `rayfl`/`python` on PATH."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (tmp_path / "scripts").symlink_to(ROOT / "scripts")
    bindir = tmp_path / ".bin"
    bindir.mkdir()
    for name, target in (
        ("rayfl", f'"{sys.executable}" -m rayfl.cli'),
        ("python", f'"{sys.executable}"'),
    ):
        shim = bindir / name
        shim.write_text(f'#!/bin/sh\nexec {target} "$@"\n')
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
            "<!-- snippet: check-only (25 min on 2 cores) -->",
            "```bash",
            "python examples/long.py --seeds 0 1",
            "```",
            "## Stop here",
            "```bash",
            "rayfl never",
            "```",
        ]
    )
    blocks = extract_blocks(text, stop="## Stop here")
    assert [b.lang for b in blocks] == ["bash", "python", "", "yaml", "python", "bash"]
    assert blocks[0].skip is None and blocks[0].code == "make demo\nrayfl run a.yaml"
    assert blocks[0].line == 2 and blocks[0].check_only is None
    assert "needs a cluster" in blocks[1].skip
    assert blocks[2].skip == "shows output"
    assert blocks[3].skip == "language 'yaml'"
    assert blocks[4].skip is None and blocks[4].code == "x = 1"
    assert blocks[5].skip is None and blocks[5].check_only == "25 min on 2 cores"
    assert len(extract_blocks(text)) == 7
    # a check-only marker without its reason is not a marker: the block would run
    bare = extract_blocks("<!-- snippet: check-only -->\n```bash\nrayfl x\n```")
    assert bare[0].check_only is None


def test_commands_join_continuations_and_drop_comments():
    code = "# set-up\nrayfl run a.yaml \\\n  rounds=2   # short\n\npython b.py --x 1\n"
    assert commands(code) == [
        (2, "rayfl run a.yaml rounds=2   # short"),
        (5, "python b.py --x 1"),
    ]


def test_scope_is_the_readme_quick_start_and_the_nav_pages():
    names = [name for name, _ in scopes()]
    assert names[0] == "README.md"
    assert "docs/index.md" in names and "docs/getting_started.md" in names
    assert "docs/cluster.md" in names
    for page in docs_site.reproduction_pages(ROOT / "docs"):
        assert f"docs/reproductions/{page}" in names
    blocks = dict(_scoped_blocks())
    for name in ("README.md", "docs/getting_started.md"):
        run = [b for b in blocks[name] if b.skip is None]
        assert any(b.lang == "python" and "rayfl.run(" in b.code for b in run), name
        lines = [c for b in run if b.lang == "bash" for _, c in commands(b.code)]
        assert any(c.startswith("rayfl run ") for c in lines), name
    readme = [
        c for b in blocks["README.md"] if b.lang == "bash" for _, c in commands(b.code)
    ]
    assert any(c.startswith("make demo") for c in readme)  # listed, never run


def test_every_bash_command_is_run_checked_or_set_up():
    """A bash block's other commands need a skip marker: nothing goes unchecked."""
    unmarked = []
    for name, blocks in _scoped_blocks():
        for block in blocks:
            if block.skip is not None or block.lang != "bash":
                continue
            for offset, command in commands(block.code):
                if not command.startswith(RUNNABLE + SETUP):
                    unmarked.append(f"{name}:{block.line + offset}: {command}")
    assert not unmarked, (
        "commands the tests neither run nor check; run them through `rayfl`/`python`, "
        "or mark the block <!-- snippet: skip (reason) --> or "
        "<!-- snippet: check-only (run time) -->:\n" + "\n".join(unmarked)
    )


def _check_only_commands() -> list[tuple[str, str]]:
    out = []
    for name, blocks in _scoped_blocks():
        for block in blocks:
            if block.skip is None and block.check_only is not None:
                for offset, command in commands(block.code):
                    if command.startswith(RUNNABLE):
                        out.append((f"{name}:{block.line + offset}", command))
    return out


def _check_args(commands_: list[str], cwd: Path = ROOT) -> list[dict[str, object]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), env.get("PYTHONPATH")) if p
    )
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts/check_args.py"), "--json", *commands_],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    results = [
        json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")
    ]
    assert len(results) == len(commands_), proc.stderr[-2000:]
    return results


def test_check_only_commands_parse():
    """Commands too long to run: their script exists and accepts the arguments."""
    todo = _check_only_commands()
    if not todo:
        pytest.skip("no check-only block in the docs yet")
    results = _check_args([c for _, c in todo])
    failed = [
        f"{where}: {c}\n  {r['message']}"
        for (where, c), r in zip(todo, results, strict=True)
        if not r["ok"]
    ]
    assert not failed, "\n".join(failed)


def test_check_args_stops_after_parsing(tmp_path):
    """The checker accepts good arguments, rejects bad ones, and never runs the work."""
    done = tmp_path / "ran.txt"
    script = tmp_path / "experiment.py"
    script.write_text(
        "import argparse, pathlib\n"
        "def main():\n"
        "    p = argparse.ArgumentParser()\n"
        "    sub = p.add_subparsers(dest='cmd', required=True)\n"
        "    s = sub.add_parser('go')\n"
        "    s.add_argument('--seeds', nargs='+', type=int, required=True)\n"
        "    args = p.parse_args()\n"
        f"    pathlib.Path({str(done)!r}).write_text('the experiment ran')\n"
        "if __name__ == '__main__':\n"
        "    main()\n"
    )
    plain = tmp_path / "no_parser.py"
    plain.write_text(f"import pathlib\npathlib.Path({str(done)!r}).write_text('ran')\n")
    results = _check_args(
        [
            f"python {script} go --seeds 0 1 2",
            f"python {script} go --seeds zero",
            f"python {script} stop",
            f"python {script} --help",
            f"python {tmp_path}/missing.py --x",
            f"python {plain}",
            "rayfl run examples/quickstart.yaml rounds=2",
            "rayfl run examples/quickstart.yaml scheduler.policy=bestchannel",
            "rayfl runn examples/quickstart.yaml",
            "make demo",
        ]
    )
    ok = [r["ok"] for r in results]
    assert ok == [True, False, False, True, False, False, True, False, False, False]
    assert "invalid int value: 'zero'" in results[1]["message"]
    assert "invalid choice: 'stop'" in results[2]["message"]
    assert "not found" in results[4]["message"]
    assert "no argparse parser" in results[5]["message"]
    assert "did you mean 'best_channel'" in results[7]["message"]
    assert not done.exists(), "the checked script ran past its argument parsing"


def test_every_example_script_is_checkable():
    """Every examples/*.py parses its arguments with argparse behind a main guard."""
    scripts = sorted(
        p.relative_to(ROOT).as_posix() for p in (ROOT / "examples").glob("*.py")
    )
    assert scripts
    results = _check_args([f"python {s} --help" for s in scripts])
    bad = [
        f"{s}: {r['message']}"
        for s, r in zip(scripts, results, strict=True)
        if not r["ok"]
    ]
    assert not bad, "\n".join(bad)


def test_python_blocks_run(workdir):
    """The blocks run in the shared 2-CPU Ray session, as in a notebook."""
    import ray

    _, _ = workdir
    assert ray.is_initialized()
    ran = 0
    for name, blocks in _scoped_blocks():
        namespace: dict[str, object] = {"__name__": f"snippets:{name}"}
        for block in blocks:
            if (
                block.skip is None
                and block.check_only is None
                and block.lang == "python"
            ):
                code = compile(block.code, f"{name}:{block.line}", "exec")
                exec(code, namespace)  # noqa: S102 - the documented snippet
                ran += 1
    assert ran >= 2


@pytest.mark.slow
def test_bash_commands_run(workdir):
    cwd, env = workdir
    ran = 0
    for name, blocks in _scoped_blocks():
        for block in blocks:
            if (
                block.skip is not None
                or block.check_only is not None
                or block.lang != "bash"
            ):
                continue
            for offset, line in commands(block.code):
                if not line.startswith(RUNNABLE):
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
