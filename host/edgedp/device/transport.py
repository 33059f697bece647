"""Byte links to a device: any pyserial URL, or a child process's stdin/stdout."""
from __future__ import annotations

import contextlib
import os
import select
import socket
import subprocess
import time
from typing import Protocol

import serial
from serial.urlhandler import protocol_socket

from .errors import TransportError


BOARD_IN_FLIGHT = 8
"""Requests a client keeps ahead of their answers on a board whose INFO reports a receive buffer
(rx_buffer > 0; within its bytes): enough that the next request is always waiting when an answer leaves (the release window
itself does not overlap the previous answer's polled transmission: about 0.86x the 115,200-baud
wire limit, docs/benchmarks.md §7)."""


class Link(Protocol):
    """A byte link. ``in_flight`` (optional, default 1): requests a client may send ahead of their
    answers without loss, so more than 1 only where the link or the device holds the bytes until
    the device reads them; ``in_flight_bytes`` (optional, default None = no limit): how many bytes
    those requests may take together (what the device's buffer holds)."""

    def write(self, data: bytes) -> None: ...
    def read(self, timeout: float) -> bytes: ...
    def close(self) -> None: ...


class LinkWrapper:
    """Base of a link over another (``inner``): what the inner link knows of the device's
    buffering (``in_flight``, ``in_flight_bytes``, learning them from INFO's rx_buffer as a board link does)
    is the wrapper's, and write, read and close pass through to it unless a subclass changes them."""

    def __init__(self, inner: Link):
        self.inner = inner

    def write(self, data: bytes) -> None:
        self.inner.write(data)

    def read(self, timeout: float) -> bytes:
        return self.inner.read(timeout)

    def close(self) -> None:
        self.inner.close()

    @property
    def in_flight(self) -> int:
        return getattr(self.inner, "in_flight", 1)

    @property
    def in_flight_bytes(self) -> int | None:
        return getattr(self.inner, "in_flight_bytes", None)

    @property
    def board_pending(self) -> bool:
        return getattr(self.inner, "board_pending", False)

    def learn_rx_buffer(self, rx_buffer: int) -> None:
        self.inner.learn_rx_buffer(rx_buffer)  # type: ignore[attr-defined]  # only asked when board_pending


class _SocketPort(protocol_socket.Serial):
    """pyserial's ``socket://`` port without the 0.3 s its close() sleeps "in case of quick
    reconnects": every CLI command on QEMU or a session paid it (a quarter of a 200-row
    ``edgedp query``, docs/history/benchmarks-2026.md §10). A reconnect needs no pause here: QEMU's chardev
    keeps its socket listening, so the kernel holds a new connection until QEMU takes it, and
    SerialLink retries a refused connect (a server not listening yet) until its
    ``connect_timeout``. Reads and writes are pyserial's."""

    is_open: bool
    _socket: socket.socket | None

    def close(self) -> None:
        if self.is_open and self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self._socket.close()
            self._socket = None
        self.is_open = False


def _open_port(url: str, baudrate: int) -> serial.SerialBase:
    if url.lower().startswith("socket://"):
        return _SocketPort(url, baudrate=baudrate, timeout=0.05)
    return serial.serial_for_url(url, baudrate=baudrate, timeout=0.05)


class SerialLink:
    """A pyserial URL: /dev/ttyACM0, socket://host:port, rfc2217://host:port, loop://.

    ``in_flight``: QEMU's USART model holds its chardev until the firmware reads the data
    register, so its console socket takes several (QEMU_IN_FLIGHT: targets/qemu.py, session.py).
    None (a board at a URL): 1 until ``learn_rx_buffer`` is told the bytes the device buffers
    while it computes (``connect`` asks INFO once: its rx_buffer), then BOARD_IN_FLIGHT requests
    within those bytes, or 1 for 0 (a polled UART loses what arrives meanwhile).

    INFO is not authenticated: a lying peer (or a man in the middle) can make the host pipeline
    to a device that drops the bytes. The worst it gets is lost requests, answered as invalid
    frames or not at all, which a man in the middle can cause anyway by dropping bytes; the
    client never pairs an answer with the wrong request (seq, client.py) and nothing
    security-relevant follows from this setting."""

    def __init__(self, url: str, baudrate: int = 115200, connect_timeout: float = 10.0,
                 in_flight: int | None = 1):
        self.in_flight = 1 if in_flight is None else in_flight
        self.in_flight_bytes: int | None = None
        self.board_pending = in_flight is None
        deadline = time.monotonic() + connect_timeout
        while True:
            try:
                self._port = _open_port(url, baudrate)
                break
            except (serial.SerialException, OSError) as exc:
                if time.monotonic() > deadline:
                    raise TransportError(f"cannot open {url}: {exc}") from None
                time.sleep(0.05)
        self.url = url

    def write(self, data: bytes) -> None:
        try:
            self._port.write(data)
        except (serial.SerialException, OSError) as exc:
            raise TransportError(f"write to {self.url} failed: {exc}") from None

    def read(self, timeout: float) -> bytes:
        """What arrives within timeout: once a byte has come, everything up to the end of a frame
        (a 0x00) that follows within the timeout, in one call (QEMU sends each byte of a frame
        on its own)."""
        end = time.monotonic() + max(timeout, 0.0)
        try:
            self._port.timeout = max(timeout, 0.0)
            first = self._port.read(1)
            if not first:
                return b""
            self._port.timeout = 0
            data = first + self._port.read(65536)
            while 0 not in data:
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._port.timeout = left
                more = self._port.read(1)
                if not more:
                    break
                self._port.timeout = 0
                data += more + self._port.read(65536)
            return data
        except (serial.SerialException, OSError) as exc:
            raise TransportError(f"read from {self.url} failed: {exc}") from None

    def learn_rx_buffer(self, rx_buffer: int) -> None:
        """Set in_flight and in_flight_bytes from INFO's rx_buffer (see the class): 0, one request
        at a time."""
        if rx_buffer > 0:
            self.in_flight, self.in_flight_bytes = BOARD_IN_FLIGHT, rx_buffer
        self.board_pending = False

    def close(self) -> None:
        self._port.close()


class ProcessLink:
    """The native host build (build/posix/edgedp) speaking the protocol on its stdin/stdout (a pipe
    holds what the device has not read yet: requests may be pipelined)."""

    in_flight = 8

    def __init__(self, argv: list[str], env: dict[str, str] | None = None):
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         env={**os.environ, **(env or {})},
                                         process_group=0)  # out of the terminal's Ctrl-C, as for QEMU
        except OSError as exc:
            raise TransportError(f"cannot start {argv[0]}: {exc}") from None

    def write(self, data: bytes) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise TransportError(f"device process exited with {self.proc.poll()}") from None

    def read(self, timeout: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], max(timeout, 0.0))
        if not ready:
            return b""
        data = os.read(fd, 65536)
        if not data:
            raise TransportError(f"device process exited with {self.proc.wait()}")
        return data

    def close(self) -> None:
        if self.proc.stdin:
            try:
                self.proc.stdin.close()
            except OSError:  # the process died with bytes still buffered for it
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
