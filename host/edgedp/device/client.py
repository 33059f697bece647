"""The device API: one request, one response, errors as exceptions.

    with open_device("qemu") as dev:
        print(dev.info())
        r = dev.query(probs, Mode.parse("label"))
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from .. import schema as S
from ..mech.modes import MODE_FULL, Mode
from ..paths import test_key_path
from . import frames, protocol as P
from .errors import DeviceError, ErrorCode, TransportError
from .targets import Target, start_target
from .transport import Link


def load_key(path: str | Path | None = None) -> bytes:
    """A device key file: 64 hex digits (32 bytes); default: the public key of test images."""
    path = test_key_path() if path is None else path
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
        """One external answer for one 1-D vector (charged to the budget); DeviceError if refused.

        Raises ValueError before sending for a 2-D array (use ``query_many``), complex
        values or more than 1024 classes."""
        mode = Mode.parse(mode) if isinstance(mode, str) else mode
        return P.parse_query(self.request(P.QUERY, P.pack_vector(x, mode)), mode)

    def infer(self, x: np.ndarray, mode: Mode | str = "full") -> tuple[P.QueryResult, int]:
        """Model inputs in, the private release of the model's output out (charged like QUERY):
        (answer, ticks of the inference; 0 in production builds)."""
        mode = Mode.parse(mode) if isinstance(mode, str) else mode
        return P.parse_infer(self.request(P.INFER, P.pack_vector(x, mode)), mode)

    def infer_many(self, rows: Iterable[np.ndarray], mode: Mode | str = "full"
                   ) -> Iterator[P.QueryResult | DeviceError]:
        """``query_many`` for INFER: one private answer (or the refusal) per row of model inputs."""
        mode = Mode.parse(mode) if isinstance(mode, str) else mode
        for x in rows:
            try:
                yield self.infer(x, mode)[0]
            except DeviceError as exc:
                yield exc
                if exc.error == ErrorCode.ERR_BUDGET:
                    return

    def infer_local(self, x: np.ndarray) -> tuple[int, int]:
        """The model's local path (test builds): (argmax of the raw output, crc32 of its float32 bytes)."""
        _, label, crc = S.INFER_LOCAL_BODY_FMT.unpack(self.request(P.INFER_LOCAL, P.pack_vector(x, Mode(MODE_FULL))))
        return label, crc

    def query_many(self, rows: Iterable[np.ndarray], mode: Mode | str = "full"
                   ) -> Iterator[P.QueryResult | DeviceError]:
        """Stream rows (a 2-D array, or any iterable of vectors such as a generator) through QUERY.

        Yields one item per row, in order: its QueryResult, or the DeviceError that refused it
        (the stream goes on). After ERR_BUDGET it stops: the device refuses every further external
        answer until its day rolls over. Bad input raises ValueError before its row is sent."""
        mode = Mode.parse(mode) if isinstance(mode, str) else mode
        for x in rows:
            try:
                yield self.query(x, mode)
            except DeviceError as exc:
                yield exc
                if exc.error == ErrorCode.ERR_BUDGET:
                    return

    def local(self, x: np.ndarray) -> P.LocalAnswer:
        """Run the on-device local path (test builds): label and CRC-32 of the raw lattice vector."""
        return P.LocalAnswer.parse(self.request(P.LOCAL, P.pack_vector(x, Mode(MODE_FULL))))

    def sample(self, req: P.SampleRequest) -> P.SampleAnswer:
        """Raw noise samples (test builds), at most ``P.MAX_SAMPLES`` per request."""
        return P.SampleAnswer.parse(self.request(P.SAMPLE, req.pack()))

    def naive(self, x: np.ndarray, scale: float) -> P.NaiveAnswer:
        """The naive rand()+logf baseline on the device (test builds)."""
        return P.NaiveAnswer.parse(self.request(P.NAIVE, P.naive_request(x, scale)))

    # ---- authenticated administration ---------------------------------------
    def challenge(self, key: bytes) -> P.Challenge:
        """The device's current nonce and admin counter, checked against key (the answer is tagged,
        so a man in the middle cannot make us sign a counter of its choosing)."""
        ch = P.Challenge.parse(self.request(P.CHALLENGE))
        if not ch.authentic(key):
            # The device does not hold this key (or the answer was forged): it would refuse
            # anything signed with it, so report what it would answer.
            raise DeviceError(ErrorCode.ERR_AUTH, P.CHALLENGE)
        return ch

    def admin_frame(self, type_: int, payload: bytes, key: bytes, counter: int | None = None) -> tuple[int, bytes]:
        """(seq, wire bytes) of an authenticated command for the device's current nonce;
        counter defaults to the challenged counter + 1. The frame is valid once, until the
        device's next admin frame."""
        ch = self.challenge(key)
        seq = self.next_seq()
        return seq, frames.encode(type_, seq, P.admin_body(type_, ch.nonce, ch.counter + 1 if counter is None
                                                           else counter, payload, key))

    def admin(self, type_: int, payload: bytes, key: bytes, counter: int | None = None) -> int:
        """Send an authenticated command; returns the counter the device accepted it with."""
        seq, wire = self.admin_frame(type_, payload, key, counter)
        self.link.write(wire)
        return P.parse_ack(self.response(seq, type_))

    def configure(self, key: bytes, cfg: P.MechConfig, caps: P.Caps, counter: int | None = None) -> int:
        return self.admin(P.CONFIG, P.config_payload(cfg, caps), key, counter)

    def set_time(self, key: bytes, unix_seconds: int) -> int:
        return self.admin(P.SET_TIME, S.SET_TIME_PAYLOAD_FMT.pack(unix_seconds), key)

    def reset_budget(self, key: bytes) -> int:
        return self.admin(P.RESET_BUDGET, b"", key)

    def test_seed(self, key: bytes, seed: bytes) -> int:
        if len(seed) != P.SEED_BYTES:
            raise ValueError(f"a test seed is {P.SEED_BYTES} bytes")
        return self.admin(P.TEST_SEED, seed, key)


def connect(target: Target, timeout: float = 10.0, sync_timeout: float | None = None,
            link: Link | None = None) -> Device:
    """A synchronised Device on a started target (through ``link``, default the target's own).

    Retries PING for ``sync_timeout`` (default ``timeout``) while the firmware boots; the
    caller stops the target (also when this raises)."""
    dev = Device(link or target.link(), timeout=timeout, target=target)
    dev.sync(sync_timeout)
    return dev


@contextlib.contextmanager
def open_device(target: str | None = None, timeout: float = 10.0) -> Iterator[Device]:
    """Start or connect to a target and yield a synchronised Device; stops it afterwards."""
    t = start_target(target)
    try:
        yield connect(t, timeout)
    finally:
        t.close()
