"""-q and -v after the command (issue 39 item 18): `edgedp query rows.npy -v` is `edgedp -v query
rows.npy` (the old host refused -v there as an unknown option); a command's own -q (train's
sampling rate) keeps its meaning. The real CLI against the native device."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..helpers import one_line_error, run_cli


def test_verbosity_flags_after_the_command(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.full((2, 3), 0.3))
    r = run_cli("query", str(tmp_path / "x.npy"), "--target", "posix", "-v")
    assert r.returncode == 0, r.stderr
    assert "device: posix, test build" in r.stderr and "rows in" in r.stderr, r.stderr
    r = run_cli("query", str(tmp_path / "x.npy"), "--target", "posix", "--quiet")
    assert r.returncode == 0 and r.stderr == "", r.stderr  # the test-image note is gone too
    one_line_error(run_cli("budget", "--target", "posix", "-v", "-q"), "-v and -q contradict each other")
    one_line_error(run_cli("train", "-q", "7"), "the sampling rate must be at most 1, not 7")  # train's own -q
