"""SerialLink over socket:// (QEMU's and a session's console): a closed link really closes its
connection, closing does not sleep (pyserial's own close sleeps 0.3 s, which every CLI command
paid), and a reconnect straight after a close is served."""
from __future__ import annotations

import socket
import threading
import time

import pytest
from serial.urlhandler import protocol_socket

from edgedp.device.transport import SerialLink


class _EchoServer:
    """A loopback server that, like QEMU's chardev, serves one connection at a time: it echoes
    each read back with a 0x00 frame end and records, per connection, whether it ended in EOF."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.ended_with_eof: list[bool] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5.0)
                try:
                    while data := conn.recv(4096):
                        conn.sendall(data + b"\x00")
                    self.ended_with_eof.append(True)
                except OSError:
                    self.ended_with_eof.append(False)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server():
    s = _EchoServer()
    yield s
    s.close()


def test_close_ends_the_connection_and_a_reconnect_is_served_at_once(server, monkeypatch) -> None:
    def no_sleep(_seconds: float) -> None:
        raise AssertionError("closing a socket:// link slept")

    for i in range(20):
        link = SerialLink(f"socket://127.0.0.1:{server.port}", connect_timeout=2.0)
        payload = f"request {i}".encode()
        link.write(payload)
        assert link.read(2.0) == payload + b"\x00"
        with monkeypatch.context() as m:  # time.sleep is global: patched for the closes only
            m.setattr(protocol_socket.time, "sleep", no_sleep)
            link.close()
            link.close()  # a second close is harmless
    deadline = time.monotonic() + 5.0
    while len(server.ended_with_eof) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.ended_with_eof == [True] * 20


def test_other_urls_keep_pyserials_port() -> None:
    link = SerialLink("loop://")
    try:
        assert not isinstance(link._port, protocol_socket.Serial)
        link.write(b"x\x00")
        assert link.read(1.0) == b"x\x00"
    finally:
        link.close()
