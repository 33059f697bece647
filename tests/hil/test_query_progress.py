"""`edgedp query`'s progress bar (issue 42.5): shown on a terminal (rows/s, ε left, ETA, on
stderr, above it every row of the table), absent under --no-progress, --json, -q and when
stdout or stderr is not a terminal. The real command on a real pty against a QEMU session."""
from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ..helpers import EDGEDP, KEY
from .test_device_session import Cli

pytestmark = pytest.mark.hil

ROWS = 300  # long enough for the bar to redraw after the first answers (it waits 0.1 s between draws)
BAR = re.compile(r"query: +\d+%\|.*\| *\d+/300 \[\d\d:\d\d<\d\d:\d\d, +[\d.]+row/s, ε left \d+\.\d{3}\]")


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cli, Path]]:
    tmp = tmp_path_factory.mktemp("progress")
    c = Cli(tmp / "state")
    c.ok("device", "start", "--fresh")
    c.ok("admin", "config", "--key-file", KEY, "--daily-cap", "100000", "--epsilon", "0.25")
    rows = tmp / "rows.npy"
    rng = np.random.default_rng(3)
    np.save(rows, rng.dirichlet(np.ones(10), ROWS))
    yield c, rows
    c("device", "stop")


def on_pty(c: Cli, *args: str, stdout_pty: bool = True, stderr_pty: bool = True) -> tuple[int, str, str]:
    """edgedp ARGS with stdout and/or stderr on a fresh 120-column pty (the rest piped): exit
    code, what reached the terminal, what reached the pipe."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    p = subprocess.Popen([str(EDGEDP), *args], env=c.env, stdin=subprocess.DEVNULL,
                         stdout=slave if stdout_pty else subprocess.PIPE,
                         stderr=slave if stderr_pty else subprocess.PIPE)
    os.close(slave)
    seen = bytearray()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer of the pty has closed it
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    piped = (p.stdout or p.stderr)
    rest = piped.read().decode() if piped else ""
    assert p.wait(timeout=60) is not None
    return p.returncode, seen.decode(errors="replace"), rest


def table_rows(text: str) -> set[int]:
    """The row numbers of the table lines (the bar's clearing is a carriage return)."""
    return {int(m.group(1)) for m in re.finditer(r"^ *(\d+) +\d+ \(0\.\d{3}\) ", text.replace("\r", "\n"), re.M)}


def test_progress_bar_on_a_terminal(session: tuple[Cli, Path]) -> None:
    c, rows = session
    code, tty, _ = on_pty(c, "query", str(rows))
    assert code == 0, tty
    assert BAR.search(tty), tty[-2000:]      # rows done of total, elapsed<ETA, rows/s and the ε left
    assert table_rows(tty) == set(range(ROWS)), tty[-2000:]   # every table line intact above the bar
    left = [float(x) for x in re.findall(r"ε left (\d+\.\d{3})\]", tty)]
    assert left == sorted(left, reverse=True) and len(set(left)) > 1   # it follows the device's answers


@pytest.mark.parametrize("how", ["--no-progress", "--json", "-q", "stdout piped", "stderr piped"])
def test_no_progress_bar(session: tuple[Cli, Path], how: str) -> None:
    c, rows = session
    args = ["-q", "query", str(rows)] if how == "-q" else ["query", str(rows), *([how] if how[0] == "-" else [])]
    code, tty, piped = on_pty(c, *args, stdout_pty=how != "stdout piped", stderr_pty=how != "stderr piped")
    assert code == 0, tty + piped
    for text in (tty, piped):
        assert "row/s" not in text and "ε left" not in text and "query:" not in text
    out = piped if how == "stdout piped" else tty
    if how == "--json":
        assert len(re.findall(r'^\{"row": \d+, "status": "ok"', out, re.M)) == ROWS
    else:
        assert table_rows(out) == set(range(ROWS))
