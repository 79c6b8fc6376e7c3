#!/usr/bin/env python3
"""Render the results tables of the docs from their CSV files (and check them).

Every results table in README.md and docs/ is written by this script from a CSV
that a named command produced; a table is never typed by hand. A table is marked
by one HTML comment line before it and a closing comment after it:

    <!-- table csv="docs/wpfl/t20_3seeds.csv" by="policy" where="t0=20"
         cols="accuracy:PL accuracy:.3f, max_test_loss:max PL test loss:.3f"
         cmd="python examples/reproduce_wpfl.py --t0 20 --seeds 0 1 2" -->
    | policy | seeds | PL accuracy | max PL test loss |
    |---|---|---|---|
    | minmax | 3 | 0.873 ± 0.023 | 0.638 ± 0.056 |
    <!-- /table -->

(the opening comment must stay on one line). Attributes:

| attribute | meaning | default |
|---|---|---|
| ``csv`` | the CSV, relative to the repository root | required |
| ``cmd`` | the command that writes the CSV (shown to readers; its script must exist) | required |
| ``by`` | comma-separated columns that name a row of the table | required |
| ``cols`` | ``column:header:format`` items; each cell is mean ± std over seeds | required |
| ``where`` | ``column=value`` filters, comma-separated (compared as text) | none |
| ``order`` | ``|``-separated row keys (``by`` values joined by ``/``) in display order | first appearance |
| ``seed`` | the column holding the seed | ``seed`` |
| ``min_seeds`` | seeds each row needs (fewer is an error) | 3 |

The std is the sample standard deviation (ddof = 1) over seeds. Tables that hold no
measured number (a config reference, the paper's own values) are marked
``<!-- table static="why" -->`` so the checker knows they are not results.

README.md and the reproduction pages (docs/reproductions/*.md) are strict: every
markdown table there must sit inside a marker, and every results marker must name
a CSV that exists (``table_problems``). ``--check`` reports both.

Usage:
    python scripts/doc_tables.py --check          # exit 1 if a table differs from its CSV
    python scripts/doc_tables.py --write          # re-render every marked table in place
    python scripts/doc_tables.py --write docs/reproductions/wpfl.md
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import shlex
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPEN = re.compile(r"^<!--\s*table\s+(?P<attrs>.*?)\s*-->\s*$")
CLOSE = "<!-- /table -->"
ATTR = re.compile(r'(\w+)="([^"]*)"')


class TableError(ValueError):
    """A marked table whose marker or CSV is wrong."""


@dataclass(frozen=True)
class Spec:
    """One parsed table marker."""

    csv: str
    cmd: str
    by: tuple[str, ...]
    cols: tuple[tuple[str, str, str], ...]
    where: tuple[tuple[str, str], ...] = ()
    order: tuple[str, ...] = ()
    seed: str = "seed"
    min_seeds: int = 3

    @classmethod
    def parse(cls, attrs: str) -> Spec | None:
        """Return the spec of a marker's attributes, or None for a static table."""
        values = dict(ATTR.findall(attrs))
        if "static" in values:
            if not values["static"].strip():
                raise TableError('a static table needs a reason: static="why"')
            return None
        missing = [k for k in ("csv", "cmd", "by", "cols") if not values.get(k)]
        if missing:
            raise TableError(f"table marker lacks {', '.join(missing)}: {attrs}")
        cols = []
        for item in values["cols"].split(","):
            parts = [p.strip() for p in item.split(":")]
            if len(parts) != 3:
                raise TableError(
                    f"cols item must be column:header:format, got {item!r}"
                )
            cols.append((parts[0], parts[1], parts[2]))
        where = []
        for item in filter(
            None, (w.strip() for w in values.get("where", "").split(","))
        ):
            key, _, value = item.partition("=")
            where.append((key.strip(), value.strip()))
        return cls(
            csv=values["csv"],
            cmd=values["cmd"],
            by=tuple(b.strip() for b in values["by"].split(",")),
            cols=tuple(cols),
            where=tuple(where),
            order=tuple(
                o.strip() for o in values.get("order", "").split("|") if o.strip()
            ),
            seed=values.get("seed", "seed"),
            min_seeds=int(values.get("min_seeds", "3")),
        )


def _cell(values: list[float], fmt: str) -> str:
    finite = [v for v in values if math.isfinite(v)]
    if all(math.isnan(v) for v in values):  # a quantity this row does not have
        return "–"
    if len(finite) != len(values):
        return "n/a (non-finite)"
    mean = statistics.fmean(finite)
    if len(finite) < 2:
        return format(mean, fmt)
    return f"{format(mean, fmt)} ± {format(statistics.stdev(finite), fmt)}"


def render(spec: Spec, root: Path = ROOT) -> list[str]:
    """Return the markdown lines of ``spec``'s table, from its CSV."""
    path = root / spec.csv
    if not path.is_file():
        raise TableError(f"{spec.csv}: no such CSV (re-run: {spec.cmd})")
    script = next(
        (w for w in shlex.split(spec.cmd) if w.endswith((".py", ".sh"))), None
    )
    if script is not None and not (root / script).is_file():
        raise TableError(f"cmd names {script}, which does not exist")
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    needed = {
        *spec.by,
        spec.seed,
        *(c for c, _, _ in spec.cols),
        *(k for k, _ in spec.where),
    }
    absent = sorted(needed - set(rows[0] if rows else ()))
    if absent:
        raise TableError(f"{spec.csv} has no column(s) {', '.join(absent)}")
    rows = [r for r in rows if all(r[k] == v for k, v in spec.where)]
    groups: dict[str, list[dict[str, str]]] = {}
    names: dict[str, list[str]] = {}  # key -> its `by` values (a value may hold "/")
    for r in rows:
        key = "/".join(r[b] for b in spec.by)
        groups.setdefault(key, []).append(r)
        names.setdefault(key, [r[b] for b in spec.by])
    if not groups:
        raise TableError(f"{spec.csv}: no row matches where={dict(spec.where)}")
    keys = list(spec.order) if spec.order else list(groups)
    unknown = [k for k in keys if k not in groups]
    if unknown:
        raise TableError(f"{spec.csv}: order names rows with no data: {unknown}")
    header = [*spec.by, "seeds", *(h for _, h, _ in spec.cols)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key in keys:
        members = groups[key]
        seeds = {r[spec.seed] for r in members}
        if len(seeds) < spec.min_seeds:
            raise TableError(
                f"{spec.csv}: row {key!r} has {len(seeds)} seed(s), the table needs "
                f">= {spec.min_seeds} (re-run: {spec.cmd})"
            )
        if len(seeds) != len(members):
            raise TableError(f"{spec.csv}: row {key!r} repeats a seed")
        cells = [
            _cell([float(r[c] or "nan") for r in members], fmt)
            for c, _, fmt in spec.cols
        ]
        lines.append("| " + " | ".join([*names[key], str(len(seeds)), *cells]) + " |")
    return lines


def process(text: str, root: Path = ROOT) -> tuple[str, int]:
    """Return (text with every marked table re-rendered, number of tables)."""
    lines = text.split("\n")
    out: list[str] = []
    count = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        match = OPEN.match(line.strip())
        i += 1
        if not match:
            continue
        try:
            end = lines.index(CLOSE, i)
        except ValueError:
            raise TableError(f"table marker at line {i} has no {CLOSE}") from None
        spec = Spec.parse(match["attrs"])
        out.extend(lines[i:end] if spec is None else render(spec, root))
        out.append(CLOSE)
        count += 1
        i = end + 1
    return "\n".join(out), count


def unmarked_result_tables(text: str) -> list[int]:
    """Return the first line (1-based) of every markdown table outside a marker.

    A table is a run of lines starting with ``|``; one inside ``<!-- table … -->``
    … ``<!-- /table -->`` (results or static) is marked. Tables in code blocks are
    skipped.
    """
    found, inside, fence, previous = [], False, False, ""
    for n, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = not fence
        elif not fence and OPEN.match(stripped):
            inside = True
        elif stripped == CLOSE:
            inside = False
        elif (
            not fence
            and not inside
            and stripped.startswith("|")
            and not previous.startswith("|")
        ):
            found.append(n)
        previous = "" if fence else stripped
    return found


def table_problems(text: str, root: Path = ROOT) -> list[str]:
    """Return the table problems of a strict page (README.md, a reproduction page).

    A problem is a markdown table outside a ``<!-- table … -->`` marker (a typed
    table: results must be rendered from a CSV, anything else marked ``static``),
    a marker that does not parse, or a results marker whose CSV does not exist.

    Args:
        text: The page's Markdown.
        root: The repository root the markers' ``csv`` paths are relative to.

    Returns:
        One line per problem, starting with its 1-based line number; empty if none.
    """
    problems = [
        f"line {n}: a table outside a <!-- table ... --> marker (render results "
        'from a CSV, or mark a reference table <!-- table static="why" -->)'
        for n in unmarked_result_tables(text)
    ]
    fence = False
    for n, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = not fence
        match = None if fence else OPEN.match(stripped)
        if not match:
            continue
        try:
            spec = Spec.parse(match["attrs"])
        except (TableError, ValueError) as e:
            problems.append(f"line {n}: {e}")
            continue
        if spec is not None and not (root / spec.csv).is_file():
            problems.append(
                f"line {n}: results table without its CSV: {spec.csv} does not "
                f"exist (re-run: {spec.cmd})"
            )
    return sorted(problems, key=lambda s: int(s.split(":")[0].split()[1]))


def strict_files(root: Path = ROOT) -> list[Path]:
    """Return the pages whose tables must all be marked: README + reproductions."""
    return [root / "README.md", *sorted((root / "docs/reproductions").glob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    """Check or write the marked tables of the given files (default: README + docs)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args(argv)
    files = args.files or [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    stale = []
    for path in files:
        text = path.read_text()
        try:
            new, count = process(text)
        except TableError as e:
            print(f"{path}: {e}", file=sys.stderr)
            return 2
        if count and new != text:
            if args.write:
                path.write_text(new)
                print(f"wrote {count} table(s) in {path}")
            else:
                stale.append(str(path))
    for name in stale:
        print(
            f"{name}: a table differs from its CSV (python scripts/doc_tables.py --write)"
        )
    strict = {p.resolve() for p in strict_files()}
    unmarked = 0
    for path in files:
        if path.resolve() in strict:
            for problem in table_problems(path.read_text()):
                print(f"{path}: {problem}")
                unmarked += 1
    return 1 if stale or unmarked else 0


if __name__ == "__main__":
    sys.exit(main())
