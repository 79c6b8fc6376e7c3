#!/usr/bin/env python3
"""Check that documented commands parse their arguments, without running them.

A command of the docs too long to run in the tests (a paper's reproduction) is
still checked: its script must exist and its ``argparse`` parser must accept the
arguments as written. Each command runs in this process up to its first complete
``parse_args`` (or ``parse_known_args``) and stops there, before any work, so a
typo in an option name fails while the experiment itself never starts.

Commands understood (as a shell would run them from the repository root; ``*``
patterns and ``$VARS`` are expanded):

- ``python path/to/script.py ARGS`` (the script runs as ``__main__``);
- ``python -m package.module ARGS``;
- ``rayfl ARGS`` (the ``rayfl`` command, ``rayfl.cli``); for a command taking a
  config file and overrides (``rayfl run``, ``rayfl compare``...), the resulting
  configuration is validated too.

A script that never builds an ``argparse`` parser cannot be checked without running
it, so it is refused without being run. ``--help`` counts as accepted.

Usage:
    python scripts/check_args.py "python examples/reproduce_wpfl.py --t0 20 --seeds 0 1 2"
    python scripts/check_args.py --json "rayfl run examples/quickstart.yaml rounds=2" ...

Exit status 0 if every command's arguments parse, 1 otherwise (each failure is
printed with the parser's message).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import io
import json
import os
import runpy
import shlex
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class _Parsed(BaseException):
    """Raised once a command's arguments parsed: stops it before any work.

    A BaseException, so a script's own ``except Exception`` cannot swallow it.
    """

    def __init__(self, namespace: argparse.Namespace | None) -> None:
        super().__init__("arguments parsed")
        self.namespace = namespace


@dataclass
class Check:
    """The outcome of checking one command."""

    command: str
    ok: bool
    message: str


@contextlib.contextmanager
def _stop_after_parse():
    """Patch argparse so the outermost completed parse raises :class:`_Parsed`."""
    parser_cls = argparse.ArgumentParser
    originals = {n: getattr(parser_cls, n) for n in ("parse_args", "parse_known_args")}
    depth = [0]

    def wrap(name: str) -> Any:
        original = originals[name]

        def patched(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            try:
                result = original(self, *args, **kwargs)
            finally:
                depth[0] -= 1
            if depth[0] == 0:  # not a subcommand's parser inside the main one
                raise _Parsed(result[0] if isinstance(result, tuple) else result)
            return result

        return patched

    for name in originals:
        setattr(parser_cls, name, wrap(name))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(parser_cls, name, original)


def split_command(command: str) -> list[str]:
    """Split a shell command line into words, expanding ``$VARS`` and globs."""
    words = []
    for word in shlex.split(command, comments=True):
        word = os.path.expandvars(word)
        matches = sorted(glob.glob(word)) if any(c in word for c in "*?[") else []
        words += matches or [word]
    return words


def _target(words: list[str]) -> tuple[str, str, list[str]]:
    """Return (``"path"`` or ``"module"``, the script or module, its arguments)."""
    if words and words[0] == "rayfl":
        return "module", "rayfl.cli", words[1:]
    if words and Path(words[0]).name.startswith("python"):
        rest = words[1:]
        if rest[:1] == ["-m"] and len(rest) >= 2:
            return "module", rest[1], rest[2:]
        if rest and not rest[0].startswith("-"):
            return "path", rest[0], rest[1:]
    raise ValueError(
        "not a checkable command: expected `python SCRIPT ARGS`, "
        "`python -m MODULE ARGS` or `rayfl ARGS`"
    )


def _uses_argparse(kind: str, target: str) -> bool:
    if kind == "path":
        source = Path(target).read_text(encoding="utf-8")
    else:
        import importlib.util

        spec = importlib.util.find_spec(target)
        if spec is None or spec.origin is None:
            raise ValueError(f"module {target} not found")
        source = Path(spec.origin).read_text(encoding="utf-8")
    return "argparse" in source or "ArgumentParser" in source


def check(command: str) -> Check:
    """Check that ``command``'s script exists and its parser accepts its arguments."""
    try:
        kind, target, args = _target(split_command(command))
    except ValueError as e:
        return Check(command, False, str(e))
    if kind == "path" and not Path(target).is_file():
        return Check(command, False, f"script not found: {target}")
    try:
        if not _uses_argparse(kind, target):
            return Check(
                command,
                False,
                f"{target} has no argparse parser: cannot check it without running it",
            )
    except ValueError as e:
        return Check(command, False, str(e))
    argv0 = target if kind == "path" else target.replace(".", "/") + ".py"
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    stderr, stdout = io.StringIO(), io.StringIO()
    sys.argv = [argv0, *args]
    if kind == "path":
        sys.path.insert(0, str(Path(target).resolve().parent))
    try:
        with (
            _stop_after_parse(),
            contextlib.redirect_stderr(stderr),
            contextlib.redirect_stdout(stdout),
        ):
            if kind == "path":
                runpy.run_path(target, run_name="__main__")
            else:
                runpy.run_module(target, run_name="__main__", alter_sys=True)
    except _Parsed as parsed:
        return _check_config(command, target, parsed.namespace)
    except SystemExit as e:
        if e.code in (0, None):  # --help, --version
            return Check(command, True, "exited 0 while parsing (--help)")
        return Check(
            command, False, stderr.getvalue().strip() or f"exit status {e.code}"
        )
    except Exception as e:  # noqa: BLE001 - reported, with its type
        return Check(command, False, f"failed before its arguments parsed: {e!r}")
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return Check(command, False, "finished without parsing arguments with argparse")


def _check_config(command: str, target: str, namespace: Any) -> Check:
    """For ``rayfl run/compare CONFIG OVERRIDES``, also validate the configuration."""
    config = getattr(namespace, "config", None)
    overrides = getattr(namespace, "overrides", None)
    if target != "rayfl.cli" or not config or overrides is None:
        return Check(command, True, "arguments parse")
    from rayfl.config import ConfigError, load_config

    try:
        load_config(config, overrides)
    except ConfigError as e:
        return Check(
            command, False, f"arguments parse, but the configuration is invalid: {e}"
        )
    return Check(command, True, "arguments parse; configuration valid")


def main(argv: list[str] | None = None) -> int:
    """Check each command given; print the failures (or JSON lines with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commands", nargs="+", help="command lines, one per argument")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON line per command"
    )
    options = parser.parse_args(argv)
    results = [check(c) for c in options.commands]
    for result in results:
        if options.json:
            print(json.dumps(asdict(result)))
        elif not result.ok:
            print(f"{result.command}\n  {result.message}", file=sys.stderr)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
