"""docs/benchmarks.md holds the figures of one `edgedp bench` run: every generated section is there,
stamped with the same commit and the same command (which wrote them into this document), and its
tables are well formed. The markers themselves: a section left open or named twice is an error."""
from __future__ import annotations

import pytest

from edgedp.bench import report

from ..helpers import ROOT

DOC = ROOT / "docs" / "benchmarks.md"


def test_the_documents_tables_come_from_one_run() -> None:
    sections = report.parse(DOC.read_text())
    assert list(sections) == list(report.ORDER)
    stamps = {(s.commit, s.date, s.command) for s in sections.values()}
    assert len(stamps) == 1, stamps
    commit, _, command = stamps.pop()
    assert commit != "unknown" and not commit.endswith("+dirty")
    assert command.startswith("edgedp bench ") and "--markdown docs/benchmarks.md" in command
    prose = " ".join(DOC.read_text().replace("\\\n", " ").replace(".venv/bin/edgedp", "edgedp").split())
    assert command in prose  # the document shows the command that wrote its tables
    for s in sections.values():
        assert report.tables(s.body), s.name


@pytest.mark.parametrize("text, error", [
    ("<!-- BEGIN edgedp bench grid | commit abc | 2026-12-07 | `edgedp bench` -->\n| a |\n|---|\n",
     "has no"),
    ("<!-- END edgedp bench grid -->\n", "closes no section"),
    ("<!-- BEGIN edgedp bench grid | commit abc | 2026-12-07 | `edgedp bench` -->\n"
     "<!-- END edgedp bench grid -->\n" * 2, "appears twice"),
])
def test_a_broken_marker_is_an_error(text: str, error: str) -> None:
    with pytest.raises(report.ReportError, match=error):
        report.parse(text)


def test_a_table_must_be_well_formed() -> None:
    with pytest.raises(report.ReportError, match="differ in width"):
        report.tables("| a | b |\n|---|---|\n| 1 |\n")
    with pytest.raises(report.ReportError, match="without its"):
        report.tables("| a | b |\n| 1 | 2 |\n")
    assert report.tables("text\n\n| a | b |\n|---|---|\n| 1 | 2 |\n") == [[["a", "b"], ["1", "2"]]]
