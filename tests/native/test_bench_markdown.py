"""`edgedp bench --markdown docs/benchmarks.md` regenerates the document's tables in place: a quick
run on the native build, into a copy of the document, replaces the generated sections it measured
(each marker naming the run's commit and the command), keeps the prose and the sections it did not
measure, and every table it writes is well formed."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from edgedp.bench import report

from ..helpers import ROOT, run_cli

DOC = ROOT / "docs" / "benchmarks.md"


def prose(text: str) -> str:
    """The document without its generated sections' bodies (the markers' lines kept, their stamps not)."""
    return re.sub(r"(<!-- BEGIN edgedp bench [a-z0-9-]+) \|.*?-->.*?(<!-- END)", r"\1 -->\n\2", text, flags=re.S)


def test_a_quick_run_regenerates_the_documents_tables_in_place(tmp_path: Path) -> None:
    doc, png = tmp_path / "benchmarks.md", tmp_path / "b.png"
    shutil.copy(DOC, doc)
    before = report.parse(DOC.read_text())
    args = ["bench", "--target", "posix", "--quick", "--k", "1", "--k", "10", "--epsilon", "1", "--no-trace",
            "--no-footprint", "--no-deadline", "--plot", str(png), "--markdown", str(doc)]
    r = run_cli(*args, "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    text = doc.read_text()
    after = report.parse(text)
    assert list(after) == list(before)  # the same sections, in the same order
    measured = {"targets", "grid"}      # what a run without trace, footprint and extras produces
    for name in measured:
        s = after[name]
        assert (s.commit, s.date, s.command) == (res["commit"], res["date"][:10], "edgedp " + " ".join(args))
        report.tables(s.body)  # well formed: every row as wide as its header, a |---| line
    grid = report.tables(after["grid"].body)
    assert len(grid) == 3
    for t in grid:
        assert [row[:2] for row in t[1:]] == [["1", "1"], ["10", "1"]]
    # the native build's ticks are nanoseconds and there is no trace: no target can be judged
    assert res["targets"] == {} and after["targets"].body == "No target evaluated in this run."
    for name in set(before) - measured:  # not measured here: kept as they were, and said so
        assert after[name] == before[name]
    assert "keeps its sections" in r.stderr
    assert prose(text) == prose(DOC.read_text())


def test_markdown_into_a_new_file_holds_the_sections_alone(tmp_path: Path) -> None:
    md = tmp_path / "b.md"
    r = run_cli("bench", "--target", "posix", "--quick", "--k", "10", "--epsilon", "10", "--no-trace", "--no-footprint",
                "--no-deadline", "--plot", str(tmp_path / "b.png"), "--markdown", str(md), "--json")
    assert r.returncode == 0, r.stderr
    sections = report.parse(md.read_text())
    assert list(sections) == ["targets", "grid"]
    assert md.read_text() == "\n\n".join(s.text() for s in sections.values()) + "\n"
