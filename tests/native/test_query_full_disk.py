"""`query --out` on a full disk (issue 39 item 18): the file holds whole lines (or, for .npy, a
complete array of whole rows) only, and the error says how many answers were charged, how many were written and where the rest are.

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


def test_a_full_disk_leaves_a_complete_npy_of_the_rows_written(small_disk: Path, tmp_path: Path) -> None:
    """The .npy output on the same 16 KiB disk: the file is exactly the header and the rows its
    header counts (never part of a row after them), those rows are the first answers on stdout,
    and the error counts them as for JSONL."""
    np.save(tmp_path / "x.npy", np.random.default_rng(2).dirichlet(np.ones(10), size=300))
    out = small_disk / "a.npy"
    r = run_cli("query", "--json", "--out", str(out), str(tmp_path / "x.npy"), "--target", "posix")
    assert r.returncode == 4, r.stderr
    saved = np.load(out)
    with open(out, "rb") as f:
        np.lib.format.read_magic(f)
        np.lib.format.read_array_header_1_0(f)
        header = f.tell()
    assert out.stat().st_size == header + saved.nbytes, (out.stat().st_size, header, saved.shape)
    stdout = [json.loads(x) for x in r.stdout.splitlines()]
    answered = [x for x in stdout if x.get("status") == "ok"]
    assert 0 < len(saved) < len(answered) and saved.shape[1:] == (10,)
    assert np.array_equal(saved, [x["output"]["values"] for x in answered[:len(saved)]])
    err = r.stderr.splitlines()[-1]
    assert "Traceback" not in r.stderr and "(No space left on device): stopped before the next query; " \
        f"{len(answered)} answers were charged and {len(saved)} written to {out} (a complete array of those " \
        f"rows); the other {len(answered) - len(saved)} are on stdout" in err, r.stderr
