"""The learned scheduler's user guide stays short and links its research log.

docs/learned_scheduler.md is the user guide (train, score, read the benchmark,
today's results); the history of attempts lives in
docs/dev/learned_scheduler_log.md. These tests keep it that way: the guide is
at most 400 lines, holds the attempts table rendered from its CSV, and links
the log, whose anchors it names exist.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "doc_tables", ROOT / "scripts/doc_tables.py"
)
doc_tables = importlib.util.module_from_spec(_spec)
sys.modules["doc_tables"] = doc_tables  # dataclasses resolve their module
_spec.loader.exec_module(doc_tables)

GUIDE = ROOT / "docs/learned_scheduler.md"
LOG = ROOT / "docs/dev/learned_scheduler_log.md"
ATTEMPTS = '<!-- table csv="docs/rl/rl_result/attempts.csv"'
MAX_LINES = 400


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc gives a heading (its default slugify)."""
    text = heading.replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(text: str) -> set[str]:
    """Anchors of the markdown headings of ``text`` (outside fenced code)."""
    anchors, fenced = set(), False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.+)", line)):
            anchors.add(_slug(m.group(1)))
    return anchors


def test_slug_matches_the_toc_anchors_other_pages_use():
    assert _slug("The hierarchy at the tuned step size (1.0)") == (
        "the-hierarchy-at-the-tuned-step-size-10"
    )
    assert _slug("The first scenario: `star-small`") == "the-first-scenario-star-small"


def test_guide_is_short_and_links_the_log():
    text = GUIDE.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_LINES, (
        f"{GUIDE.name} has {len(text.splitlines())} lines; the user guide keeps "
        f"at most {MAX_LINES}: move details to {LOG.relative_to(ROOT)}"
    )
    assert "](dev/learned_scheduler_log.md)" in text


def test_guide_and_log_hold_the_attempts_table_from_its_csv():
    for page in (GUIDE, LOG):
        text = page.read_text(encoding="utf-8")
        assert any(line.startswith(ATTEMPTS) for line in text.splitlines()), page
        rendered, tables = doc_tables.process(text)
        assert tables >= 1 and rendered == text, f"{page}: a table differs from its CSV"


def test_every_link_into_the_log_names_an_existing_anchor():
    anchors = _anchors(LOG.read_text(encoding="utf-8"))
    assert "the-star-at-the-tuned-learning-rate" in anchors
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    missing = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for anchor in re.findall(r"learned_scheduler_log\.md#([\w-]+)", text):
            if anchor not in anchors:
                missing.append(f"{page.relative_to(ROOT)}: #{anchor}")
    assert not missing, "links to headings the log does not have:\n" + "\n".join(
        missing
    )


def test_links_into_the_guide_name_its_anchors():
    anchors = _anchors(GUIDE.read_text(encoding="utf-8"))
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    missing = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for anchor in re.findall(r"(?<!_)learned_scheduler\.md#([\w-]+)", text):
            if anchor not in anchors:
                missing.append(f"{page.relative_to(ROOT)}: #{anchor}")
    assert not missing, "links to headings the guide does not have:\n" + "\n".join(
        missing
    )
