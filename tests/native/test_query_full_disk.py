"""`query --out` on a full disk (issue 39 item 18): the file holds whole lines only, and the
error says how many answers were charged, how many were written and where the rest are.

The real CLI against the native device (--target posix), writing to a real 16 KiB tmpfs (mounting
it needs root: skipped otherwise, never passed)."""
from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ..helpers import run_cli


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_a_full_disk_leaves_whole_lines_and_counts_the_answers(small_disk: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.random.default_rng(1).dirichlet(np.ones(10), size=150))
    out = small_disk / "a.jsonl"
    r = run_cli("query", "--json", "--out", str(out), str(tmp_path / "x.npy"), "--target", "posix")
    assert r.returncode == 4, r.stderr
    text = out.read_bytes()
    assert text.endswith(b"\n"), text[-80:]  # the old host left half a line at the end
    lines = [json.loads(x) for x in text.decode().splitlines()]  # every line whole
    stdout = [json.loads(x) for x in r.stdout.splitlines()]
    answered = [x for x in stdout if x.get("status") == "ok"]
    written = len(lines)
    assert 0 < written < len(answered) and lines == stdout[:written]
    err = r.stderr.splitlines()[-1]
    assert stdout[-1]["error"] == "ERR_INPUT" and err.startswith("edgedp: error: cannot write"), r.stderr
    assert "Traceback" not in r.stderr and "(No space left on device): stopped before the next query; " \
        f"{len(answered)} answers were charged and {written} written to {out} (whole lines only); " \
        f"the other {len(answered) - written} are on stdout" in err, r.stderr
