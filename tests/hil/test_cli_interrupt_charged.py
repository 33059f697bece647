"""Ctrl-C and SIGTERM during the other commands that make charged queries: `demo`, `verify`,
`audit-dp` and `tradeoff --target` (the device check), through the real CLI against a QEMU
session.

Each must finish the answer in flight, say what it did and the ε it spent (which the device's
own spend, read after the command, confirms), and exit 130 (SIGINT) or 143 (SIGTERM), with no
traceback. The session's mechanism configuration must be what it was before `verify`."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from ..helpers import EDGEDP, KEY
from .test_device_session import Cli

pytestmark = pytest.mark.hil
EPS = 0.25


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    c = Cli(tmp_path_factory.mktemp("interrupt-charged") / "state")
    c.ok("device", "start", "--fresh")
    yield c
    c("device", "stop")


@pytest.fixture(autouse=True)
def configured(session: Cli) -> None:
    """ε = EPS and a cap no test reaches (demo leaves its own configuration behind)."""
    session.ok("admin", "config", "--key-file", KEY, "--daily-cap", "100000", "--epsilon", str(EPS))


def spent(c: Cli) -> float:
    return c.json("budget")["daily_spent"]


class Run:
    """edgedp args in a child process, its stdout and stderr read as they come."""

    def __init__(self, c: Cli, args: list[str]):
        self.p = subprocess.Popen([str(EDGEDP), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env={**c.env, "PYTHONUNBUFFERED": "1"})
        self.out, self.err = bytearray(), bytearray()
        self.readers = [threading.Thread(target=self._read, args=(f, buf), daemon=True)
                        for f, buf in ((self.p.stdout, self.out), (self.p.stderr, self.err))]
        for t in self.readers:
            t.start()

    @staticmethod
    def _read(f, buf: bytearray) -> None:
        while chunk := os.read(f.fileno(), 4096):
            buf += chunk

    def signal_when(self, ready: Callable[["Run"], bool], signum: int) -> tuple[int, str, str]:
        deadline = time.monotonic() + 90
        while not ready(self):
            assert self.p.poll() is None, (self.p.returncode, self.out.decode(), self.err.decode())
            assert time.monotonic() < deadline, self.err.decode()
            time.sleep(0.02)
        self.p.send_signal(signum)
        rc = self.p.wait(timeout=60)
        for t in self.readers:
            t.join(10)
        return rc, self.out.decode(), self.err.decode()


def progress_at_least(desc: str, n: int) -> Callable[[Run], bool]:
    """tqdm's bar on stderr (``desc: ... k/N``) has reached n."""
    pat = re.compile(re.escape(desc) + r":[^\r\n]*?(\d+)/\d+")
    return lambda r: any(int(m) >= n for m in pat.findall(r.err.decode(errors="replace")))


def check_ended(rc: int, err: str, signum: int) -> str:
    assert rc == (130 if signum == signal.SIGINT else 143), err
    assert "Traceback" not in err
    line = [ln for ln in err.splitlines() if "interrupted after" in ln]
    assert len(line) == 1, err
    return line[0]


def test_demo_sigint_stops_after_the_answer_in_flight(session: Cli) -> None:
    """demo resets the day's spend first: after it, the device's spend is what demo says it spent."""
    run = Run(session, ["demo", "--rows", "64", "--daily-cap", "64", "--images", "599"])
    # a few private rows out (the table lines end with the budget left)
    rc, out, err = run.signal_when(lambda r: len(re.findall(rb"\n +\d+ +\d+ \|", r.out)) >= 3, signal.SIGINT)
    line = check_ended(rc, err, signal.SIGINT)
    m = re.search(r"(?:(\d+) of 64 queries|(\d+) of 599 images) \(spent ([\d.]+) epsilon", line)
    assert m, line
    assert spent(session) == pytest.approx(float(m.group(3)), abs=0.006)
    if m.group(1):  # stopped in the table: every answered row printed, then the budget line
        assert len(re.findall(r"\n +\d+ +\d+ \|", out)) == int(m.group(1))
        assert "budget: " in out and "on-device model" not in out
        assert float(m.group(3)) == pytest.approx(int(m.group(1)) * 1.0, abs=0.006)  # demo's ε = 1 a query
    else:
        assert float(m.group(3)) == pytest.approx(int(m.group(2)) * 1.0, abs=0.006)


def test_verify_sigterm_reports_the_spend_and_restores_the_configuration(session: Cli) -> None:
    before_cfg = session.json("budget")
    before = before_cfg["daily_spent"]
    run = Run(session, ["verify", "-n", "5000"])
    rc, out, err = run.signal_when(progress_at_least("bit-exact queries", 20), signal.SIGTERM)
    line = check_ended(rc, err, signal.SIGTERM)
    m = re.search(r"after (\d+) of 5000 queries \((\d+) mismatches; spent ([\d.e+-]+) epsilon", line)
    assert m, line
    assert 20 <= int(m.group(1)) < 5000 and int(m.group(2)) == 0
    assert f"queries        {m.group(1)}" in out and "verdict" not in out
    after = session.json("budget")
    assert after["daily_spent"] - before == pytest.approx(float(m.group(3)), rel=1e-5)
    assert (after["epsilon_per_query"], after["range"], after["sensitivity"], after["daily_cap"]) == \
        (before_cfg["epsilon_per_query"], before_cfg["range"], before_cfg["sensitivity"], before_cfg["daily_cap"])


def test_audit_dp_sigint_says_how_many_answers_were_charged(session: Cli) -> None:
    """audit-dp resets the day's spend first (prepare_device): after it, the device's spend is
    the answers it says were charged, at the session's ε."""
    run = Run(session, ["audit-dp", "--key", KEY, "--trials", "2000"])
    rc, out, err = run.signal_when(progress_at_least("device answers", 20), signal.SIGINT)
    line = check_ended(rc, err, signal.SIGINT)
    m = re.search(r"after (\d+) of (\d+) device answers \(spent ([\d.e+-]+) epsilon\); no bound", line)
    assert m, line
    n = int(m.group(1))
    assert 20 <= n < int(m.group(2))
    assert float(m.group(3)) == pytest.approx(n * EPS)
    assert spent(session) == pytest.approx(n * EPS)
    assert "bound" not in out


def test_tradeoff_device_check_sigint(session: Cli, tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    np.savez(tmp_path / "out.npz", probs=rng.dirichlet(np.ones(10), size=3000), labels=rng.integers(0, 10, 3000))
    before = spent(session)
    run = Run(session, ["tradeoff", "--data", str(tmp_path / "out.npz"), "--quick", "--modes", "label",
                        "--epsilons", "1", "--target", "session", "--target-queries", "3000", "--key-file", KEY])
    rc, out, err = run.signal_when(progress_at_least("device queries", 20), signal.SIGINT)
    line = check_ended(rc, err, signal.SIGINT)
    m = re.search(r"after (\d+) of the device check's queries \(spent ([\d.e+-]+) epsilon\)", line)
    assert m, line
    n = int(m.group(1))
    assert 20 <= n < 3000
    assert float(m.group(2)) == pytest.approx(n * EPS)
    assert spent(session) - before == pytest.approx(n * EPS)
    # the trade-off table is printed, then what the check did, from the authenticated STATE
    assert "accuracy" in out and f"interrupted after {n} of 3000 queries" in out
    assert "authenticated STATE" in out
