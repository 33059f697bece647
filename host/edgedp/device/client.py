"""The device API: one request, one response, errors as exceptions.

    with open_device("qemu") as dev:
        print(dev.info())
        r = dev.query(probs, Mode.parse("label"))
"""
from __future__ import annotations

import contextlib
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..mech.modes import Mode
from . import frames, protocol as P
from .errors import DeviceError, ErrorCode, TransportError
from .targets import Target, start_target
from .transport import Link


def load_key(path: str | Path) -> bytes:
    """A device key file: 64 hex digits (32 bytes)."""
    try:
        key = bytes.fromhex(Path(path).read_text().strip())
    except (OSError, ValueError) as exc:
        raise TransportError(f"cannot read key file {path}: {exc}") from None
    if len(key) != 32:
        raise TransportError(f"key file {path} must hold 32 bytes as 64 hex digits")
    return key


class Device:
    """Protocol client over any Link."""

    def __init__(self, link: Link, timeout: float = 10.0, target: Target | None = None):
        self.link = link
        self.timeout = timeout
        self.target = target
        self._reader = frames.FrameReader()
        self._seq = 0
        self._pending: list[frames.Frame] = []

    # ---- transport ----------------------------------------------------------
    def next_seq(self) -> int:
        self._seq = (self._seq + 1) & 0xFFFF
        return self._seq

    def send_raw(self, data: bytes) -> None:
        self.link.write(data)

    def receive(self, timeout: float | None = None) -> frames.Frame:
        """Next frame from the device (skipping undecodable chunks)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not self._pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TransportError(f"no response from the device within {self.timeout:.0f} s")
            self._pending += self._reader.feed(self.link.read(min(left, 0.5)))
        return self._pending.pop(0)

    def request(self, type_: int, body: bytes = b"", timeout: float | None = None) -> bytes:
        """Send a frame, wait for the response with the same seq, return its body."""
        seq = self.next_seq()
        self.link.write(frames.encode(type_, seq, body))
        return self.response(seq, type_, timeout)

    def response(self, seq: int, type_: int, timeout: float | None = None) -> bytes:
        while True:
            f = self.receive(timeout)
            if f.seq != seq:
                continue  # a stale answer (e.g. to garbage sent earlier)
            if f.type == P.ERROR:
                raise DeviceError(ErrorCode(f.body[0]), f.body[1])
            if f.type != type_ | P.RESPONSE:
                raise TransportError(f"unexpected response type 0x{f.type:02x} to 0x{type_:02x}")
            return f.body

    def sync(self, timeout: float | None = None) -> None:
        """Resynchronise: flush any half-received frame with 0x00 and PING until one answers.

        Bytes sent while a device boots are dropped by its UART, so this retries."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            self.link.write(b"\x00")
            try:
                self.ping(b"sync", timeout=0.5)
                return
            except TransportError:
                if time.monotonic() > deadline:
                    raise TransportError("the device does not answer PING (is it running this firmware?)") from None

    # ---- commands -----------------------------------------------------------
    def ping(self, data: bytes = b"", timeout: float | None = None) -> bytes:
        return self.request(P.PING, data, timeout)

    def info(self) -> P.Info:
        return P.Info.parse(self.request(P.INFO))

    def budget(self) -> P.Budget:
        return P.Budget.parse(self.request(P.BUDGET))

    def query(self, x: np.ndarray, mode: Mode | str = "full") -> P.QueryResult:
        mode = Mode.parse(mode) if isinstance(mode, str) else mode
        body = self.request(P.QUERY, P.pack_vector(x, mode))
        return P.parse_query(body, mode)

    def local(self, x: np.ndarray) -> tuple[int, int]:
        """Run the on-device local path (test builds): (label, crc32 of the raw lattice vector)."""
        label, crc = struct.unpack("<HI", self.request(P.LOCAL, P.pack_vector(x, Mode(0))))
        return label, crc

    def sample(self, epsilon: float, sensitivity: float, k: int, count: int,
               m: int | None = None) -> tuple[int, int, np.ndarray]:
        """Raw noise samples (test builds): (m, J, int64 lattice noise)."""
        body = struct.pack("<IfHHb", round(epsilon * 1e6), sensitivity, k, count,
                           P.M_AUTO if m is None else m)
        r = self.request(P.SAMPLE, body)
        m_dev, J, n = struct.unpack_from("<bBH", r)
        return m_dev, J, np.frombuffer(r, dtype="<i4", count=n, offset=4).astype(np.int64)

    def naive(self, x: np.ndarray, scale: float) -> tuple[int, np.ndarray]:
        """The naive rand()+logf baseline on the device (test builds): (ticks, outputs)."""
        r = self.request(P.NAIVE, struct.pack("<f", scale) + P.pack_vector(x, Mode(0)))
        ticks, k = struct.unpack_from("<IH", r)
        return ticks, np.frombuffer(r, dtype="<f4", count=k, offset=6)

    # ---- authenticated administration ---------------------------------------
    def admin_frame(self, type_: int, payload: bytes, key: bytes, counter: int | None = None) -> tuple[int, bytes]:
        """(seq, wire bytes) of an authenticated command; counter defaults to stored + 1."""
        if counter is None:
            counter = self.budget().auth_counter + 1
        seq = self.next_seq()
        return seq, frames.encode(type_, seq, P.admin_body(type_, counter, payload, key))

    def admin(self, type_: int, payload: bytes, key: bytes, counter: int | None = None) -> int:
        seq, wire = self.admin_frame(type_, payload, key, counter)
        self.link.write(wire)
        (accepted,) = struct.unpack("<Q", self.response(seq, type_))
        return accepted

    def configure(self, key: bytes, epsilon: float, daily_cap: float, lifetime_cap: float | None = None,
                  lo: float = 0.0, hi: float = 1.0, sensitivity: float = 2.0, m: int | None = None) -> int:
        return self.admin(P.CONFIG, P.config_payload(epsilon, daily_cap, lifetime_cap, lo, hi, sensitivity, m), key)

    def set_time(self, key: bytes, unix_seconds: int) -> int:
        return self.admin(P.SET_TIME, struct.pack("<Q", unix_seconds), key)

    def reset_budget(self, key: bytes) -> int:
        return self.admin(P.RESET_BUDGET, b"", key)

    def test_seed(self, key: bytes, seed: bytes) -> int:
        if len(seed) != 32:
            raise ValueError("a test seed is 32 bytes")
        return self.admin(P.TEST_SEED, seed, key)


@contextlib.contextmanager
def open_device(target: str | None = None, timeout: float = 10.0) -> Iterator[Device]:
    """Start or connect to a target and yield a synchronised Device; stops it afterwards."""
    t = start_target(target)
    try:
        dev = Device(t.link(), timeout=timeout, target=t)
        dev.sync()
        yield dev
    finally:
        t.close()
