"""Account for the package's size since the one-engine issue (issue 21) was filed.

A development tool behind ``docs/dev/size_accounting.md``; stdlib and git only::

    python docs/dev/size_accounting.py             # summary
    python docs/dev/size_accounting.py --commits   # also one line per commit
    python docs/dev/size_accounting.py --csv docs/dev/size_accounting.csv

"The package" is every ``.py`` file under ``rayfl/``, ``envs/`` and ``policies/``.
It prints the raw lines (newlines) and the code lines (not blank, not a
comment-only line, not inside a docstring) at the issue's filing, at the
refactor plan and at ``HEAD``, and splits the net change since the plan by the
category of each commit (:data:`CATEGORY`, set by hand from the commit's
message and diff): ``split`` — pure, bit-identical splits made for the issue's
"no module over 500 lines, no function over 80"; ``capability`` — an item of the
issue's Build list; ``other`` — work of other issues (privacy and fidelity,
failure handling, plain words) and fixes; ``cut`` — commits whose purpose was
to delete. A commit the table does not name is counted as ``unclassified``.
"""

from __future__ import annotations

import argparse
import ast
import csv
import io
import subprocess
import sys
import tokenize
from collections import defaultdict

ROOTS = ("rayfl", "envs", "policies")
FILED = "2d5868d"  # the last commit before the issue was filed (22 Nov 2026)
PLAN = "a8be5bd"  # the refactor plan, docs/dev/engine_refactor.md (25 Nov 2026)

SPLIT, CAPABILITY, OTHER, CUT = "split", "capability", "other", "cut"


def _tagged(category: str, hashes: str) -> dict[str, str]:
    return dict.fromkeys(hashes.split(), category)


#: Commit (short hash) → category, for every commit since PLAN that touched the package.
CATEGORY: dict[str, str] = {
    **_tagged(
        SPLIT,
        "805ad2e ab2e642 da12fb9 05e4c59 0b3eec8 192e21c a4300ca 4b18422 dd154ab "
        "72b24eb 0a1f817 8a5ab7e 6d62698",
    ),
    **_tagged(
        f"{CAPABILITY}: engine",
        "57fef6f d744e10 1af2556 878e8c3 3d544ce 62290ae 23e4043 37c3f3d 4d6282d "
        "def6824 5fe8064 5ec3b65 1eeb752 c8dbbab ed9235d 90a47ff 4c11164",
    ),
    **_tagged(
        f"{CAPABILITY}: observation",
        "55e827a 76629bf eed22a1",
    ),
    **_tagged(
        f"{CAPABILITY}: policies",
        "9492f88 be4fbe7 af53622 af703d1 fbb5f1f 61b9daf be1015a 66d31cd 478a378 "
        "7b2dac6 be29ab1 cda6a74 f992183 0e9fb58 35901e8 0a0e626 59b250c 3f6ffa9 "
        "07bb53e d920764",
    ),
    **_tagged(
        f"{CAPABILITY}: envs",
        "ed62148 3a0c28d e18517e cb00d95 cb3a0f7 656b459 1094869 347a02e 203ebcf "
        "c43e75e cd92d2f 76d53b4 85d7a0a",
    ),
    **_tagged(
        f"{CAPABILITY}: rl",
        "125d8c3 98a326b b510065 3702626 58d0961 7ec4ef3 129344d",
    ),
    **_tagged(
        f"{CAPABILITY}: sections",
        "9348d95 38e1735 626af17",
    ),
    **_tagged(
        OTHER,
        "2982651 fb41996 476d4aa c727c9a 094330c c7d002f a106d99 82ffbaa 811a9da "
        "c14a1d7 307fb4a 7095faf b94f9c9 0b682d7 debe91e c4d99e6 4d2b773 840840c "
        "a5c27f0 9a842fe e738235 dd7682e b3d39f6 64ab383 bea496c",
    ),
    # session 15 (28 Nov 2026): a line-reduction pass, behaviour unchanged
    **_tagged(
        CUT,
        "7fd1632 ca3118d 1b502de 7d6c9f1 02ca028 98ac84d e57b737 876d911 80ac37f "
        "03aa724 172addd 4f247c3 5efd0fc c2f5d5d 0b1df29 b34a03f add9901 75a2dd5 "
        "1e80115 5e9d16a 6ea9be1 aea74e9 e287b4e fb7cef3 2d7c729 a4ff299 71c34e1 "
        "c63d681 0de31f6 08bd20e e1a8a8f ed7edc1 7637f3c e8a0771 fea50b6",
    ),
    **_tagged(
        CUT,
        "390627b 8f3785c b579e94 f94b3ea d5fef6b b06625b d6904b2 b4c44ad d1ec119 "
        "ed8765d c899012 c06f4c3 67dc236 090cb3f c61b300 a1ff208",
    ),
    # session 16 (28 Nov 2026)
    **_tagged(f"{CAPABILITY}: sections", "d6d9ed6"),  # rayfl never imports envs
    **_tagged(f"{CAPABILITY}: rl", "699c70a 9c7b35d"),  # controls decoded around c
    **_tagged(
        OTHER,  # mypy clean (STYLE.md rule 29); CLI fixes
        "7823429 25b9f25 80ed82d d08a939 600e42d 4f3222c 9287857 4acb706 a48cac8 52054c8 e23ed5d",
    ),
    # session 17 (28 Nov 2026)
    **_tagged(f"{CAPABILITY}: rl", "a72f13f dd71930"),  # rl.neighbor_cost (D2D)
}


_ORDER = [SPLIT, *sorted(set(CATEGORY.values()) - {SPLIT, OTHER, CUT}), OTHER, CUT]
_ORDER.append("unclassified")


def git(*args: str) -> str:
    """Return git's standard output."""
    return subprocess.run(
        ["git", *args], capture_output=True, text=True, check=True
    ).stdout


def docstring_lines(tree: ast.AST) -> set[int]:
    """Return the line numbers inside module, class and function docstrings."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        if isinstance(node, kinds) and node.body:
            first = node.body[0]
            value = getattr(first, "value", None)
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def size(rev: str) -> tuple[int, int]:
    """Return (raw lines, code lines) of the package at ``rev``."""
    raw = code = 0
    for path in git("ls-tree", "-r", "--name-only", rev, *ROOTS).split():
        if not path.endswith(".py"):
            continue
        src = git("show", f"{rev}:{path}")
        raw += src.count("\n")
        doc = docstring_lines(ast.parse(src))
        lines = src.splitlines()
        comments = {
            tok.start[0]
            for tok in tokenize.generate_tokens(io.StringIO(src).readline)
            if tok.type == tokenize.COMMENT
            and lines[tok.start[0] - 1].lstrip().startswith("#")
        }
        code += sum(
            1
            for i, line in enumerate(lines, 1)
            if line.strip() and i not in doc and i not in comments
        )
    return raw, code


def commits(since: str) -> list[tuple[str, int, int, str]]:
    """Return (hash, added, deleted, subject) of each commit since ``since``."""
    out = git(
        "log",
        "--no-merges",
        "--reverse",
        "--format=@%h %s",
        "--numstat",
        f"{since}..HEAD",
        "--",
        *ROOTS,
    )
    rows: list[list] = []
    for line in out.splitlines():
        if line.startswith("@"):
            sha, _, subject = line[1:].partition(" ")
            rows.append([sha, 0, 0, subject])
        elif line.strip() and line.split("\t")[-1].endswith(".py"):
            added, deleted, _ = line.split("\t")
            rows[-1][1] += int(added)
            rows[-1][2] += int(deleted)
    return [tuple(r) for r in rows]


def main(argv: list[str] | None = None) -> int:
    """Print the accounting; with ``--csv``, also write one row per commit."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", action="store_true", help="one line per commit")
    parser.add_argument("--csv", help="write the per-commit rows here")
    args = parser.parse_args(argv)
    for name, rev in (("filed", FILED), ("plan", PLAN), ("HEAD", "HEAD")):
        raw, code = size(rev)
        print(
            f"{name:6} {git('rev-parse', '--short', rev).strip():8} raw {raw:6} code {code:6}"
        )
    rows = commits(PLAN)
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for sha, added, deleted, subject in rows:
        kind = CATEGORY.get(sha[:7], "unclassified")
        totals[kind][0] += added
        totals[kind][1] += deleted
        totals[kind][2] += 1
        if args.commits:
            print(f"  {added - deleted:+6} {kind:12} {sha} {subject[:90]}")
    print("since the plan, by category (added, deleted, net, commits):")
    for kind in sorted(totals, key=_ORDER.index):
        a, d, n = totals[kind]
        print(f"  {kind:24} +{a:6} -{d:6} {a - d:+6} {n:4}")
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(
                ["commit", "category", "added", "deleted", "net", "subject"]
            )
            for sha, added, deleted, subject in rows:
                kind = CATEGORY.get(sha[:7], "unclassified")
                writer.writerow([sha, kind, added, deleted, added - deleted, subject])
    return 1 if totals.get("unclassified") else 0


if __name__ == "__main__":
    sys.exit(main())
