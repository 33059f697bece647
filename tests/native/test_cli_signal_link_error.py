"""A link that fails after a first Ctrl-C still ends `query`, `demo`, `verify`, `audit-dp` and
`tradeoff --target` with the interrupted summary and 130: what was answered (and that the device
charged it), then the error, with every answer already paid for on stdout (under --json in the one
document). Before, the four commands other than `query` ended with the transport error's code (3)
and no summary.

The real CLI against the native device (--target posix) in this process. Its link is cut right
after the n-th charged request has gone to the device, which answers and charges it; the host
then reads nothing more (every read and write fails, as on an unplugged cable), and the SIGINT
is sent at that moment: the user's Ctrl-C during the answer in flight. The device keeps its
spend in a store file, read after the command: the spend the summary gives plus that request.
A refusal after the signal (that answer replaced by a forged ERR_BUDGET) ends `audit-dp` and
`tradeoff` the same way; it used to end them as bad input (4) with no summary."""
from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from edgedp.cli import main
from edgedp.device import frames, protocol as P
from edgedp.device.client import open_device
from edgedp.device.errors import ErrorCode, TransportError
from edgedp.device.targets.posix import PosixTarget
from edgedp.device.transport import Link, LinkWrapper
from edgedp.mech.lattice import to_epsilon

from ..helpers import TEST_EPOCH
from .test_cli_late_signal import KEY, one_error_line, outputs  # noqa: F401 - outputs is a fixture

pytestmark = pytest.mark.native
CUT = "the link was cut"
CUT_WRITE = "the link was cut (a later write)"  # e.g. verify's restore: the first error is reported


class CutAfter(LinkWrapper):
    """The device's link, cut once the ``n``-th request of type ``kind`` has been written to the
    device (which answers and charges it): from then on every read and write raises, and a SIGINT
    goes to this process at that moment."""

    def __init__(self, inner: Link, kind: int, n: int):
        super().__init__(inner)
        self.kind, self.left, self.cut = kind, n, False

    def write(self, data: bytes) -> None:
        if self.cut:
            raise TransportError(CUT_WRITE)
        self.inner.write(data)
        self.left -= sum(f.type == self.kind for f in frames.FrameReader().feed(data))
        if self.left <= 0 and not self.cut:
            self.cut = True
            os.kill(os.getpid(), signal.SIGINT)

    def read(self, timeout: float) -> bytes:
        if self.cut:
            raise TransportError(CUT)
        return self.inner.read(timeout)


@pytest.fixture
def device_store(native_builds: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The native device keeps its state in a store file (on the posix port's frozen clock)."""
    monkeypatch.setenv("EDP_STORE_FILE", str(tmp_path / "store.bin"))
    monkeypatch.setenv("EDP_POSIX_TIME", str(TEST_EPOCH))
    yield tmp_path / "store.bin"


class RefusedAfter(LinkWrapper):
    """A man in the middle: once the ``n``-th request of type ``kind`` has been written to the
    device (which answers and charges it), a SIGINT goes to this process and the device's answer
    to that request is replaced by a forged ERR_BUDGET refusal; the link goes on working."""

    def __init__(self, inner: Link, kind: int, n: int):
        super().__init__(inner)
        self.kind, self.left, self.cut = kind, n, False
        self.seq: int | None = None
        self.reader = frames.FrameReader()

    def write(self, data: bytes) -> None:
        self.inner.write(data)
        for f in frames.FrameReader().feed(data):
            if f.type == self.kind and not self.cut:
                self.left -= 1
                if self.left == 0:
                    self.cut, self.seq = True, f.seq
                    os.kill(os.getpid(), signal.SIGINT)

    def read(self, timeout: float) -> bytes:
        data = self.inner.read(timeout)
        if self.seq is None:
            return data
        for f in self.reader.feed(data):  # held back until the answer to seq is whole (one request in flight)
            if f.seq == self.seq:
                self.seq = None
                return frames.encode(P.ERROR, f.seq, bytes([ErrorCode.ERR_BUDGET, self.kind]))
        return b""


def run_cut(monkeypatch: pytest.MonkeyPatch, kind: int, n: int, args: list[str],
            wrapper: type[CutAfter] | type[RefusedAfter] = CutAfter) -> tuple[Result, float]:
    """``edgedp args`` with the target's link cut after the n-th request of ``kind`` (or, with
    ``wrapper=RefusedAfter``, that request's answer replaced by a refusal); the result, and the ε
    the device charged during the command (its lifetime spend, read after it)."""
    before = lifetime_spent()
    real = PosixTarget.link
    cuts: list[CutAfter | RefusedAfter] = []

    def cut_link(self: PosixTarget) -> Link:
        cuts.append(wrapper(real(self), kind, n))
        return cuts[-1]
    with monkeypatch.context() as m:
        m.setattr(PosixTarget, "link", cut_link)
        r = CliRunner().invoke(main, [*args, "--target", "posix"])
    assert len(cuts) == 1 and cuts[0].cut, (r.stdout, r.stderr)
    return r, lifetime_spent() - before


def lifetime_spent() -> float:
    with open_device("posix") as dev:
        return to_epsilon(dev.budget().lifetime_spent)


def summary(r: Result) -> str:
    assert r.exit_code == 130, (r.exit_code, r.stdout, r.stderr)
    line = one_error_line(r.stderr)
    assert line.endswith(f"; then: {CUT} (an answer lost with the link may have been charged)"), line
    return line


def test_demo(device_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut on the 3rd query: two rows answered and shown, the device charged them and the third."""
    r, charged = run_cut(monkeypatch, P.QUERY, 3, ["demo", "--rows", "6", "--images", "0"])
    line = summary(r)
    assert "interrupted after 2 of 6 queries (the device charged 2 epsilon for them); then: " in line, line
    assert len(re.findall(r"\n +\d+ +\d+ \|", r.stdout)) == 2, r.stdout
    assert charged == pytest.approx(3.0)


def test_demo_images(device_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut on the 3rd image (INFER): the queries and two images answered, their private labels
    counted, the device charged them and the third."""
    r, charged = run_cut(monkeypatch, P.INFER, 3, ["demo", "--rows", "2", "--images", "10"])
    line = summary(r)
    m = re.search(r"interrupted after the queries and 2 of 10 images \(private labels correct on (\d); the device "
                  r"charged 2 epsilon for the images\); then: ", line)
    assert m, line
    shown = re.findall(r"image \d: true (\d), private label (\d)", r.stdout)
    assert len(shown) == 2 and int(m.group(1)) == sum(a == b for a, b in shown), r.stdout
    assert charged == pytest.approx(2.0 + 3.0)  # the two queries, then the images


@pytest.mark.parametrize("as_json", [False, True])
def test_verify(device_store: Path, monkeypatch: pytest.MonkeyPatch, as_json: bool) -> None:
    """Cut on the 5th query: 4 compared (shown, or the one partial document), their ε counted here
    (STATE can no longer be read), and the configuration could not be restored: said so, with the
    first error (the answer's read), not the restore's (a write)."""
    r, charged = run_cut(monkeypatch, P.QUERY, 5, ["verify", "-n", "16", "--samples", "1000", "--key-file", KEY,
                                                   "--no-progress", *(["--json"] if as_json else [])])
    line = summary(r)
    m = re.search(r"interrupted after 4 of 16 queries \(0 mismatches; spent ([\d.e+-]+) epsilon, the answers' ε as "
                  r"configured, counted here\); the mechanism configuration was not restored \(edgedp admin config\); "
                  r"no verdict; then: ", line)
    assert m, line
    if as_json:
        d = json.loads(r.stdout)
        assert (d["queries"], d["mismatches"], d["complete"]) == (4, 0, False), d
        assert d["epsilon_spent"] == pytest.approx(float(m.group(1))), d
    else:
        assert r.stdout == "queries        4\nmismatches     0\n", r.stdout
    # the first queries run at verify's default ε = 1: the 5th too, charged on the device
    assert float(m.group(1)) == pytest.approx(4.0) and charged == pytest.approx(5.0)


@pytest.mark.parametrize("as_json", [False, True])
def test_audit_dp(device_store: Path, monkeypatch: pytest.MonkeyPatch, as_json: bool) -> None:
    r, charged = run_cut(monkeypatch, P.QUERY, 6, ["audit-dp", "--key", KEY, "--trials", "8", "--epsilon", "0.5",
                                                   "--no-progress", *(["--json"] if as_json else [])])
    line = summary(r)
    assert re.search(r"interrupted after 5 of \d+ device answers \(spent 2.5 epsilon\); no bound; then: ", line), line
    if as_json:
        d = json.loads(r.stdout)
        assert (d["answers"], d["epsilon_spent"], d["complete"]) == (5, 2.5, False), d
    else:
        assert "bound" not in r.stdout, r.stdout
    assert charged == pytest.approx(3.0)


@pytest.mark.parametrize("as_json", [False, True])
def test_tradeoff(device_store: Path, outputs: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
                  as_json: bool) -> None:
    """Cut on the 4th query of the device check: the trade-off table and the check's 3 charged
    queries (no test), then the error."""
    r, charged = run_cut(monkeypatch, P.QUERY, 4, ["tradeoff", "--data", str(outputs), "--quick", "--modes", "label",
                                                   "--epsilons", "1", "--target-queries", "10", "--key-file", KEY,
                                                   "--no-progress", *(["--json"] if as_json else [])])
    line = summary(r)
    assert "interrupted after 3 of the device check's queries (spent 3 epsilon); then: " in line, line
    if as_json:
        doc = json.loads(r.stdout)
        d = doc["device_check"]
        assert doc["rows"] and (d["queries"], d["epsilon_spent"], d["interrupted"]) == (3, 3.0, True), d
    else:
        assert "accuracy" in r.stdout and "device: interrupted after 3 of 10 queries (ε = 1 each; configuration " \
            "from the authenticated STATE): no test" in r.stdout, r.stdout
    assert charged == pytest.approx(4.0)


def test_query(device_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """query, whose summary the others now share: 8 rows go out at once, then one per answer; cut
    on the 10th row, every answer that came is a JSON line and in --out, and every other row
    sent is a lost answer (ERR_LOST) the device charged."""
    rows = np.random.default_rng(5).dirichlet(np.ones(10), size=12)
    np.save(tmp_path / "rows.npy", rows)
    out = tmp_path / "a.jsonl"
    r, charged = run_cut(monkeypatch, P.QUERY, 10, ["query", str(tmp_path / "rows.npy"), "--mode", "label", "--json",
                                                    "--out", str(out)])
    line = summary(r)
    m = re.search(r"interrupted after 10 of 12 rows \((\d+) answered\); (\d+) answers saved in ", line)
    assert m, line
    answered = int(m.group(1))
    lines = [json.loads(s) for s in r.stdout.splitlines()]
    status = [d["status"] for d in lines[:-1]]
    assert status == ["ok"] * answered + ["ERR_LOST"] * (10 - answered) and answered >= 2, status
    assert lines[-1]["exit_code"] == 130 and int(m.group(2)) == answered
    assert [json.loads(s)["status"] for s in out.read_text().splitlines()] == status
    assert charged == pytest.approx(10.0)  # (query runs the device's ε, 1)


@pytest.mark.parametrize("as_json", [False, True])
def test_audit_dp_refused_after_a_signal(device_store: Path, monkeypatch: pytest.MonkeyPatch, as_json: bool) -> None:
    """The 6th answer, charged, replaced by a (forged) refusal while the Ctrl-C is pending: the 5
    answers before it are still summarised, with the refusal as the cause, and 130 (it used to end
    as bad input, 4, with no summary)."""
    r, charged = run_cut(monkeypatch, P.QUERY, 6, ["audit-dp", "--key", KEY, "--trials", "8", "--epsilon", "0.5",
                                                   "--no-progress", *(["--json"] if as_json else [])], RefusedAfter)
    assert r.exit_code == 130, (r.exit_code, r.stdout, r.stderr)
    line = one_error_line(r.stderr)
    assert re.search(r"interrupted after 5 of \d+ device answers \(spent 2.5 epsilon\); no bound; then: "
                     r"the device refused answer 6 of 8: ERR_BUDGET", line), line  # (8 per trial group)
    if as_json:
        d = json.loads(r.stdout)
        assert (d["answers"], d["epsilon_spent"], d["complete"]) == (5, 2.5, False), d
    assert charged == pytest.approx(3.0)


def test_tradeoff_refused_after_a_signal(device_store: Path, outputs: Path,  # noqa: F811
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The device check's 4th answer replaced by a refusal after the Ctrl-C: the table and the 3
    charged queries, then the refusal, and 130."""
    r, charged = run_cut(monkeypatch, P.QUERY, 4, ["tradeoff", "--data", str(outputs), "--quick", "--modes", "label",
                                                   "--epsilons", "1", "--target-queries", "10", "--key-file", KEY,
                                                   "--no-progress"], RefusedAfter)
    assert r.exit_code == 130, (r.exit_code, r.stdout, r.stderr)
    line = one_error_line(r.stderr)
    assert "interrupted after 3 of the device check's queries (spent 3 epsilon); then: device refused a query " \
        "after 3: ERR_BUDGET" in line, line
    assert "accuracy" in r.stdout and charged == pytest.approx(4.0), r.stdout
