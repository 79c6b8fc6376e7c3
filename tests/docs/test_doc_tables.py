"""scripts/doc_tables.py: results tables are rendered from CSVs, never typed."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "doc_tables", ROOT / "scripts/doc_tables.py"
)
doc_tables = importlib.util.module_from_spec(_spec)
sys.modules["doc_tables"] = doc_tables  # dataclasses resolve their module
_spec.loader.exec_module(doc_tables)

CSV = """policy,t0,seed,acc,loss
minmax,20,0,0.90,0.60
minmax,20,1,0.80,0.70
minmax,20,2,0.85,0.65
rr,20,0,0.70,0.90
rr,20,1,0.72,0.80
rr,20,2,0.74,1.00
rr,10,0,0.10,9.00
"""
MARK = (
    '<!-- table csv="r.csv" by="policy" where="t0=20" order="rr|minmax" '
    'cols="acc:accuracy:.3f, loss:max loss:.2f" cmd="python run.py --seeds 0 1 2" -->'
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "r.csv").write_text(CSV)
    (tmp_path / "run.py").write_text("")
    return tmp_path


def test_render_is_mean_and_sample_std_over_seeds(root: Path) -> None:
    text, count = doc_tables.process(f"intro\n{MARK}\nold\n<!-- /table -->\nend", root)
    assert count == 1
    lines = text.split("\n")
    assert lines[0] == "intro" and lines[-1] == "end"
    rr = next(line for line in lines if line.startswith("| rr "))
    mean, std = (
        statistics.fmean([0.70, 0.72, 0.74]),
        statistics.stdev([0.70, 0.72, 0.74]),
    )
    assert rr == f"| rr | 3 | {mean:.3f} ± {std:.3f} | 0.90 ± 0.10 |"
    # order= puts rr first; the t0=10 row is filtered out
    assert lines.index(rr) < next(
        i for i, s in enumerate(lines) if s.startswith("| minmax")
    )
    assert "9.00" not in text


def test_a_row_name_with_a_slash_stays_one_cell(root: Path) -> None:
    (root / "p.csv").write_text(
        "policy,seed,acc\n"
        + "".join(f"learned:checkpoint=a/b,{s},0.5\n" for s in range(3))
    )
    mark = (
        '<!-- table csv="p.csv" by="policy" cols="acc:acc:.1f" cmd="python run.py" -->'
    )
    text, _ = doc_tables.process(f"{mark}\n<!-- /table -->", root)
    assert "| learned:checkpoint=a/b | 3 | 0.5 ± 0.0 |" in text.split("\n")


def test_process_is_idempotent_and_detects_a_hand_edit(root: Path) -> None:
    text, _ = doc_tables.process(f"{MARK}\n<!-- /table -->", root)
    again, _ = doc_tables.process(text, root)
    assert again == text
    edited = text.replace("0.720", "0.750")
    assert edited != text
    assert doc_tables.process(edited, root)[0] == text


def test_too_few_seeds_missing_csv_and_missing_script_are_errors(root: Path) -> None:
    few = MARK.replace('where="t0=20"', 'where="t0=10"').replace(
        ' order="rr|minmax"', ""
    )
    with pytest.raises(doc_tables.TableError, match="1 seed"):
        doc_tables.process(f"{few}\n<!-- /table -->", root)
    with pytest.raises(doc_tables.TableError, match="no such CSV"):
        doc_tables.process(f"{MARK.replace('r.csv', 'x.csv')}\n<!-- /table -->", root)
    with pytest.raises(doc_tables.TableError, match="does not exist"):
        doc_tables.process(
            f"{MARK.replace('run.py', 'gone.py')}\n<!-- /table -->", root
        )
    with pytest.raises(doc_tables.TableError, match="has no"):
        doc_tables.process(MARK, root)


def test_static_tables_are_kept_and_need_a_reason(root: Path) -> None:
    static = '<!-- table static="the paper\'s values" -->\n| a |\n|---|\n| 1 |\n<!-- /table -->'
    assert doc_tables.process(static, root)[0] == static
    with pytest.raises(doc_tables.TableError, match="reason"):
        doc_tables.process('<!-- table static="" -->\n<!-- /table -->', root)


def test_unmarked_tables_are_found_outside_markers_and_code() -> None:
    text = "\n".join(
        [
            "| a |",
            "|---|",
            "",
            MARK,
            "| b |",
            "<!-- /table -->",
            "```",
            "| c |",
            "```",
            "x",
            "| d |",
        ]
    )
    assert doc_tables.unmarked_result_tables(text) == [1, 11]


def test_every_marked_table_in_the_repo_matches_its_csv() -> None:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for path in files:
        text = path.read_text()
        new, _ = doc_tables.process(text)
        assert new == text, f"{path}: run python scripts/doc_tables.py --write"
