"""`Device.query_many` with several requests in flight: every answer matched to its own request
(by seq, in order) and bit-exact with the reference, refusals and bad input in their place, and a
lost answer an error, never a mismatch. On the native build (stdin/stdout pipe); the QEMU test is
tests/hil/test_pipelined_hil.py."""
from __future__ import annotations

import numpy as np
import pytest

from edgedp.device import frames, protocol as P
from edgedp.device.client import Device
from edgedp.device.errors import AnswerLost, DeviceError, ErrorCode, TransportError
from edgedp.device.protocol import Caps, MechConfig
from edgedp.mech.lattice import MICRO
from edgedp.mech.reference import ReferenceDevice


class Recording:
    """A link that records the seq of every frame written and read."""

    def __init__(self, inner):
        self.inner = inner
        self.in_flight = getattr(inner, "in_flight", 1)
        self.in_flight_bytes = getattr(inner, "in_flight_bytes", None)
        self.sent: list[int] = []
        self.got: list[int] = []
        self.ahead = 0  # the most requests sent and not yet answered
        self._rx = frames.FrameReader()

    def write(self, data: bytes) -> None:
        self.sent += [f.seq for f in frames.FrameReader().feed(data)]
        self.ahead = max(self.ahead, len(self.sent) - len(self.got))
        self.inner.write(data)

    def read(self, timeout: float) -> bytes:
        data = self.inner.read(timeout)
        self.got += [f.seq for f in self._rx.feed(data)]
        return data

    def close(self) -> None:
        self.inner.close()


def pipelined(dev: Device) -> tuple[Device, Recording]:
    rec = Recording(dev.link)
    return Device(rec, timeout=dev.timeout), rec


def test_pipelined_answers_are_bit_exact_and_in_order(posix_device, test_key: bytes) -> None:
    dev = posix_device.start()
    cfg = MechConfig(MICRO)
    dev.configure(test_key, cfg, Caps(daily=1000 * MICRO))
    seed = bytes(range(32))
    dev.test_seed(test_key, seed)
    ref = ReferenceDevice(cfg, seed)
    rng = np.random.default_rng(5)
    rows = [rng.random(int(k), dtype=np.float32) for k in rng.choice([1, 10, 100], 60)]
    pdev, rec = pipelined(dev)
    got = list(pdev.query_many(iter(rows), "full", in_flight=8))
    assert len(got) == len(rows)
    for x, r in zip(rows, got):
        assert isinstance(r, P.QueryResult)
        assert r.same_answer(ref.query(x, "full"))
    assert rec.got == rec.sent and len(set(rec.sent)) == len(rows)   # each answer to its own request
    assert rec.ahead == 8                                              # 8 requests were on the wire at once


def test_refusals_and_bad_input_keep_their_place(posix_device, test_key: bytes) -> None:
    dev = posix_device.start()
    dev.configure(test_key, MechConfig(MICRO), Caps(daily=3 * MICRO))
    dev.reset_budget(test_key)
    x = np.array([0.2, 0.8], dtype=np.float32)
    out = list(dev.query_many([x] * 12, "label", in_flight=4))
    # three answers, then the budget refusal; the rows already in flight are refused too, and
    # nothing after them is sent
    assert [type(r).__name__ for r in out[:3]] == ["QueryResult"] * 3
    assert all(isinstance(r, DeviceError) and r.error == ErrorCode.ERR_BUDGET for r in out[3:])
    assert 4 <= len(out) <= 4 + 3
    dev.reset_budget(test_key)
    seen = []
    with pytest.raises(ValueError):
        for r in dev.query_many([x, x, np.zeros((2, 2), dtype=np.float32), x], "label", in_flight=4):
            seen.append(r)
    assert len(seen) == 2 and all(isinstance(r, P.QueryResult) for r in seen)
    assert dev.budget().daily_spent == 2 * MICRO                      # the bad row and the one after: not sent


class Scripted:
    """A link that answers a burst of requests with frames of the given seqs only."""

    in_flight = 4

    def __init__(self, answer) -> None:
        self.answer = answer
        self.out = b""

    def write(self, data: bytes) -> None:
        for f in frames.FrameReader().feed(data):
            if self.answer(f.seq):
                self.out += frames.encode(P.ERROR, f.seq, bytes([ErrorCode.ERR_BUDGET, f.type]))

    def read(self, timeout: float) -> bytes:
        out, self.out = self.out, b""
        return out

    def close(self) -> None:
        pass


def test_a_lost_answer_is_an_error_not_a_mismatch() -> None:
    """The lost answer's row gets AnswerLost, in its place; the answers after it, paid for, are
    still matched to their own requests."""
    dev = Device(Scripted(lambda seq: seq != 2), timeout=1)
    x = np.array([0.5], dtype=np.float32)
    got = list(dev.query_many([x] * 4, "full"))
    assert got[0].error == ErrorCode.ERR_BUDGET                       # the answer to request 1
    assert isinstance(got[1], AnswerLost) and got[1].seq == 2 and "answer to request 2 was lost" in str(got[1])
    assert isinstance(got[1], TransportError)
    assert [g.error for g in (got[2], got[3])] == [ErrorCode.ERR_BUDGET] * 2  # 3 and 4: not dropped


class Buffered(Recording):
    """A Recording with a device buffer of ``budget`` bytes: records the most request bytes that
    were ever on the wire unanswered."""

    def __init__(self, inner, budget: int) -> None:
        super().__init__(inner)
        self.in_flight_bytes = budget
        self.sizes: dict[int, int] = {}
        self.bytes_ahead = 0

    def write(self, data: bytes) -> None:
        for f in frames.FrameReader().feed(data):
            self.sizes[f.seq] = len(frames.encode(f.type, f.seq, f.body))
        super().write(data)
        self.bytes_ahead = max(self.bytes_ahead, sum(self.sizes[s] for s in self.sent[len(self.got):]))


def test_requests_ahead_stay_within_the_links_bytes(posix_device, test_key: bytes) -> None:
    """A board buffers bytes, not requests (INFO's rx_buffer): large rows go fewer at a
    time, small ones up to in_flight, and a row larger than the budget still goes alone."""
    dev = posix_device.start()
    dev.configure(test_key, MechConfig(MICRO), Caps(daily=1000 * MICRO))
    dev.reset_budget(test_key)
    big = len(frames.encode(P.QUERY, 1, P.pack_vector(np.zeros(300, dtype=np.float32), P.Mode(P.MODE_FULL))))
    rng = np.random.default_rng(8)
    rows = [rng.random(int(k), dtype=np.float32) for k in [300] * 6 + [3] * 12 + [1000] + [300] * 3]
    link = Buffered(dev.link, 3 * big)
    got = list(Device(link, timeout=dev.timeout).query_many(rows, "full", in_flight=8))
    assert len(got) == len(rows) and all(isinstance(r, P.QueryResult) for r in got)
    assert link.got == link.sent
    assert link.bytes_ahead == max(3 * big, link.sizes[link.sent[18]])  # k = 1000 alone: 4,000+ bytes
    assert link.ahead == 8                                             # the small rows: in_flight at once


def test_a_row_held_for_the_byte_budget_is_not_sent_after_a_stop(posix_device, test_key: bytes) -> None:
    """A row taken from the rows but held back by the link's byte budget is dropped once the
    caller's stop says so (the CLI's StopRequest after Ctrl-C or a refusal): never charged."""
    from edgedp.cli.output import StopRequest
    dev = posix_device.start()
    dev.configure(test_key, MechConfig(MICRO), Caps(daily=1000 * MICRO))
    dev.reset_budget(test_key)
    rng = np.random.default_rng(9)
    rows = [rng.random(900, dtype=np.float32) for _ in range(6)]  # about 3.6 KB each: one fits 4 KiB
    link = Buffered(dev.link, 4096)
    stop = StopRequest()
    got = []
    for r in Device(link, timeout=dev.timeout).query_many(rows, "full", stop=stop.__bool__):
        got.append(r)
        stop.stop("enough")  # what QueryRun does on Ctrl-C or a refusal
    assert len(got) == 1 and link.sent == link.got and len(link.sent) == 1
    assert dev.budget().daily_spent == MICRO                          # the held row was never charged


def test_a_link_that_goes_silent_reports_every_request_on_the_wire() -> None:
    """No answer at all (a dead link): each request already sent (and charged) gets its
    AnswerLost row before the TransportError, so the CLI saves a row for every paid request."""
    dev = Device(Scripted(lambda seq: False), timeout=0.3)
    x = np.array([0.5], dtype=np.float32)
    it = dev.query_many([x] * 4, "full")
    got = [next(it) for _ in range(4)]
    assert [g.seq for g in got] == [1, 2, 3, 4] and all(isinstance(g, AnswerLost) for g in got)
    with pytest.raises(TransportError, match="no response"):
        next(it)
