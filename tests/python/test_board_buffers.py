"""How many requests a host pipelines to a board: the receive buffer its port reports in INFO
(rx_buffer, version 2), checked against the firmware's ring, and what a board link learns from it."""
from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import pytest

from edgedp import schema as S
from edgedp.device import frames, protocol as P
from edgedp.device.client import connect
from edgedp.device.errors import ErrorCode
from edgedp.device.transport import BOARD_IN_FLIGHT, SerialLink
from edgedp.mech.modes import MODE_FULL, Mode

ROOT = Path(__file__).resolve().parents[2]


def _define(path: Path, name: str) -> str:
    m = re.search(rf"#define {name} (\S+)", path.read_text())
    assert m, f"{name} not in {path}"
    return m.group(1)


def info_v2(rx_buffer: int, board: bytes = b"stm32f4") -> bytes:
    """An INFO version 2 answer of a test image without a model, with this rx_buffer."""
    head = S.INFO_HEAD_FMT.pack(S.INFO_VERSION, 1, 0, 1, 0, 1, 1024, 168_000_000, 0, 0, 0, rx_buffer, 0, 0,
                                0, 0, 0, 0, 0, 0, 0, 0, bytes(32))
    return head + bytes([5]) + b"0.4.0" + bytes([len(board)]) + board + bytes([0])


def test_the_stm32f4_port_reports_its_ring() -> None:
    """The stm32f4 port's rx_buffer (INFO) is its RX ring, which holds the host's 8 in flight of a
    k = 100 QUERY each (a request beyond the ring's bytes goes alone, when nothing is outstanding
    and the frame loop drains the ring as it arrives)."""
    ring = int(_define(ROOT / "firmware/ports/stm32f4/stm32f4.h", "EDP_STM32_RX_RING").rstrip("u"))
    assert ".rx_buffer = EDP_STM32_RX_RING," in (ROOT / "firmware/ports/stm32f4/board.c").read_text()
    k100 = len(frames.encode(P.QUERY, 1, P.pack_vector(np.zeros(100, dtype=np.float32), Mode(MODE_FULL))))
    assert ring >= BOARD_IN_FLIGHT * k100


def test_only_ports_that_receive_by_interrupt_report_a_buffer() -> None:
    """A port whose UART is polled between frames (template, qemu, posix) reports none."""
    for board in sorted((ROOT / "firmware/ports").glob("*/board.c")):
        text = board.read_text()
        if ".rx_buffer" in text:
            assert "edp_stm32_uart_irq" in text, board


@pytest.mark.parametrize("rx_buffer, expected", [
    (4096, (BOARD_IN_FLIGHT, 4096)),   # the stm32f4 port's ring
    (512, (BOARD_IN_FLIGHT, 512)),     # any other: its bytes bound what is ahead
    (0, (1, None)),                    # a polled UART: one request at a time
])
def test_a_board_link_learns_from_infos_rx_buffer(rx_buffer: int, expected: tuple) -> None:
    link = SerialLink("loop://", in_flight=None)
    try:
        assert (link.in_flight, link.in_flight_bytes, link.board_pending) == (1, None, True)
        link.learn_rx_buffer(rx_buffer)
        assert (link.in_flight, link.in_flight_bytes, link.board_pending) == (*expected, False)
    finally:
        link.close()


def test_an_explicit_in_flight_is_not_relearned() -> None:
    """A link given its in_flight (QEMU's qemu port, a pipe) is not asked INFO by connect."""
    link = SerialLink("loop://", in_flight=8)
    try:
        assert (link.in_flight, link.in_flight_bytes, link.board_pending) == (8, None, False)
    finally:
        link.close()
    board = _Board(None)
    board.in_flight, board.board_pending = 8, False
    connect(None, timeout=2, link=board)  # type: ignore[arg-type]
    assert board.learned == [] and board.in_flight == 8 and board.asked == 0


class _Board:
    """A link to a fake board that answers PING and, for INFO, ``info`` (None: an error frame)."""

    def __init__(self, info: bytes | None) -> None:
        self.info, self.out = info, b""
        self.in_flight, self.in_flight_bytes, self.board_pending = 1, None, True
        self.learned: list[int] = []
        self.asked = 0  # INFO requests

    def learn_rx_buffer(self, rx_buffer: int) -> None:
        self.learned.append(rx_buffer)
        self.board_pending = False

    def write(self, data: bytes) -> None:
        for f in frames.FrameReader().feed(data):
            if f.type == P.PING:
                self.out += frames.encode(P.PING | P.RESPONSE, f.seq, f.body)
                continue
            self.asked += f.type == P.INFO
            if self.info is None:
                self.out += frames.encode(P.ERROR, f.seq, bytes([ErrorCode.ERR_UNKNOWN, f.type]))
            else:
                self.out += frames.encode(P.INFO | P.RESPONSE, f.seq, self.info)

    def read(self, timeout: float) -> bytes:
        out, self.out = self.out, b""
        return out

    def close(self) -> None:
        pass


def test_connect_asks_info_once_and_a_refusal_keeps_one_request_at_a_time() -> None:
    link = _Board(None)
    connect(None, timeout=2, link=link)  # type: ignore[arg-type]
    assert link.learned == [0] and not link.board_pending and link.asked == 1


def test_connect_passes_infos_rx_buffer() -> None:
    link = _Board(info_v2(4096))
    connect(None, timeout=2, link=link)  # type: ignore[arg-type]
    assert link.learned == [4096]


def test_a_version_1_info_keeps_one_request_at_a_time() -> None:
    """Firmware 0.3.0 and older answers INFO version 1 (its first byte is build, 0 or 1): the host
    does not read it, so it learns no buffer."""
    v1 = struct.pack("<BBBBHBBIIII", 1, 0, 0, 0, 1024, 1, 0, 168_000_000, 0, 0, 0) + bytes([5]) + b"0.3.0" + \
        bytes([7]) + b"stm32f4"
    link = _Board(v1)
    connect(None, timeout=2, link=link)  # type: ignore[arg-type]
    assert link.learned == [0] and link.asked == 1
