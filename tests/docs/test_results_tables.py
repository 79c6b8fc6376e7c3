"""README.md and the reproduction pages show no typed results table.

Every markdown table there sits inside a ``<!-- table … -->`` marker of
scripts/doc_tables.py: a results table names the CSV it is rendered from (which
must exist), anything else is marked ``static="why"``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if "doc_tables" in sys.modules:
    doc_tables = sys.modules["doc_tables"]
else:
    _spec = importlib.util.spec_from_file_location(
        "doc_tables", ROOT / "scripts/doc_tables.py"
    )
    doc_tables = importlib.util.module_from_spec(_spec)
    sys.modules["doc_tables"] = doc_tables  # dataclasses resolve their module
    _spec.loader.exec_module(doc_tables)

CSV = "policy,seed,acc\na,0,0.5\na,1,0.6\na,2,0.7\n"
MARKED = (
    '<!-- table csv="r.csv" by="policy" cols="acc:accuracy:.2f" '
    'cmd="python run.py --seeds 0 1 2" -->\n'
    "| policy | seeds | accuracy |\n|---|---|---|\n| a | 3 | 0.60 ± 0.10 |\n"
    "<!-- /table -->"
)
STATIC = '<!-- table static="the paper\'s values" -->\n| claim | paper |\n|---|---|\n| acc | +87 % |\n<!-- /table -->'
TYPED = "| policy | accuracy |\n|---|---|\n| minmax | 0.873 |"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "r.csv").write_text(CSV)
    (tmp_path / "run.py").write_text("")
    return tmp_path


def test_marked_static_and_fenced_tables_pass(root: Path) -> None:
    text = f"# Page\n\n{MARKED}\n\ntext\n\n{STATIC}\n\n```\n{TYPED}\n```\n"
    assert doc_tables.table_problems(text, root) == []


def test_a_typed_table_fails_with_its_line(root: Path) -> None:
    text = f"# Page\n\n{MARKED}\n\nMeasured by hand:\n\n{TYPED}\n"
    problems = doc_tables.table_problems(text, root)
    line = text.split("\n").index("| policy | accuracy |") + 1
    assert len(problems) == 1
    assert problems[0].startswith(f"line {line}: a table outside")


def test_a_results_marker_without_its_csv_fails(root: Path) -> None:
    text = MARKED.replace("r.csv", "gone.csv")
    problems = doc_tables.table_problems(text, root)
    assert len(problems) == 1
    assert "line 1: results table without its CSV: gone.csv" in problems[0]
    assert "python run.py --seeds 0 1 2" in problems[0]  # says how to make it


def test_a_broken_marker_fails(root: Path) -> None:
    text = '<!-- table csv="r.csv" by="policy" -->\n| a |\n<!-- /table -->'
    problems = doc_tables.table_problems(text, root)
    assert problems and "lacks" in problems[0]


def test_strict_files_are_readme_and_the_reproduction_pages() -> None:
    names = [p.relative_to(ROOT).as_posix() for p in doc_tables.strict_files()]
    assert names[0] == "README.md"
    assert "docs/reproductions/h2fdp.md" in names
    assert all(n.startswith("docs/reproductions/") for n in names[1:])


@pytest.mark.parametrize(
    "page",
    [p.relative_to(ROOT).as_posix() for p in doc_tables.strict_files()],
)
def test_repo_page_has_only_marked_tables_with_their_csv(page: str) -> None:
    problems = doc_tables.table_problems((ROOT / page).read_text(encoding="utf-8"))
    assert not problems, f"{page}:\n" + "\n".join(problems)


def test_check_reports_a_typed_table_in_a_strict_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    (tmp_path / "docs/reproductions").mkdir(parents=True)
    readme = tmp_path / "README.md"
    readme.write_text(f"# rayfl\n\n{TYPED}\n")
    page = tmp_path / "docs/reproductions/x.md"
    page.write_text(f"# x\n\n{STATIC}\n")
    monkeypatch.setattr(doc_tables, "ROOT", tmp_path)
    monkeypatch.setattr(
        doc_tables, "strict_files", lambda root=tmp_path: [readme, page]
    )
    assert doc_tables.main(["--check", str(readme), str(page)]) == 1
    assert "README.md: line 3: a table outside" in capsys.readouterr().out
    readme.write_text(f"# rayfl\n\n{STATIC}\n")
    assert doc_tables.main(["--check", str(readme), str(page)]) == 0


def test_an_empty_csv_cell_is_a_dash_and_a_partly_empty_one_is_flagged(
    tmp_path: Path,
) -> None:
    (tmp_path / "run.py").write_text("")
    (tmp_path / "r.csv").write_text(
        "policy,seed,acc,bits\na,0,0.5,\na,1,0.6,\na,2,0.7,\nb,0,0.5,1\nb,1,0.6,\nb,2,0.7,3\n"
    )
    spec = doc_tables.Spec.parse(
        'csv="r.csv" by="policy" cols="acc:accuracy:.2f, bits:bits:.1f" '
        'cmd="python run.py --seeds 0 1 2"'
    )
    rows = doc_tables.render(spec, tmp_path)
    assert rows[2] == "| a | 3 | 0.60 ± 0.10 | – |"
    assert rows[3] == "| b | 3 | 0.60 ± 0.10 | n/a (non-finite) |"
