"""`edgedp bench --peers N` refuses at once, in one line, when a peer is missing (before the long run)."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from edgedp.bench import peers
from edgedp.cli import main


def test_missing_peer_is_one_line_error_before_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from edgedp.bench import run as bench_run

    def missing(download: bool = True):
        raise peers.PeerError("emlearn is not installed (pip install 'edgedp[peers]')")

    def not_reached(*a, **k):
        raise AssertionError("the bench ran")

    monkeypatch.setattr(peers, "sources", missing)
    monkeypatch.setattr(bench_run, "run", not_reached)
    r = CliRunner().invoke(main, ["bench", "--target", "qemu", "--peers", "2"])
    assert r.exit_code == 1
    assert r.stderr == "edgedp: error: emlearn is not installed (pip install 'edgedp[peers]')\n"



def test_bench_refuses_an_unwritable_markdown_file_before_the_run(tmp_path) -> None:
    from click.testing import CliRunner
    from edgedp.cli import main
    r = CliRunner().invoke(main, ["bench", "--target", "posix", "--markdown", str(tmp_path / "no" / "b.md")])
    assert r.exit_code != 0 and "folder" in r.output and "does not exist" in r.output, r.output
