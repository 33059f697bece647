"""The host's table of boards whose firmware buffers pipelined requests (transport.BOARD_RX_BUFFER)
against the firmware it describes, and what a board link learns from INFO's (board, version)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from edgedp import schema as S
from edgedp.device import frames, protocol as P
from edgedp.device.client import connect
from edgedp.device.errors import ErrorCode
from edgedp.device.transport import BOARD_IN_FLIGHT, BOARD_RX_BUFFER, SerialLink
from edgedp.mech.modes import MODE_FULL, Mode

ROOT = Path(__file__).resolve().parents[2]


def _define(path: Path, name: str) -> str:
    m = re.search(rf"#define {name} (\S+)", path.read_text())
    assert m, f"{name} not in {path}"
    return m.group(1)


def test_the_stm32f4_entry_is_the_firmwares_ring_and_version() -> None:
    ring = int(_define(ROOT / "firmware/ports/stm32f4/stm32f4.h", "EDP_STM32_RX_RING").rstrip("u"))
    version = _define(ROOT / "firmware/core/include/edgedp/options.h", "EDP_FIRMWARE_VERSION").strip('"')
    assert BOARD_RX_BUFFER[("stm32f4", version)] == ring
    # and the earlier firmware with the same ring (0.2.0; 0.3.0 changed only the DRBG)
    assert BOARD_RX_BUFFER == {("stm32f4", "0.2.0"): ring, ("stm32f4", version): ring}
    # the host's 8 in flight of a k = 100 QUERY each (a request beyond the ring's bytes goes alone,
    # when nothing is outstanding and the frame loop drains the ring as it arrives)
    k100 = len(frames.encode(P.QUERY, 1, P.pack_vector(np.zeros(100, dtype=np.float32), Mode(MODE_FULL))))
    assert ring >= BOARD_IN_FLIGHT * k100


def test_listed_boards_receive_by_interrupt() -> None:
    """Only a board whose port fills a ring from its RX interrupt is listed (not the template)."""
    for board, _ in BOARD_RX_BUFFER:
        assert "edp_stm32_uart_irq" in (ROOT / f"firmware/ports/{board}/board.c").read_text()


@pytest.mark.parametrize("board, version, expected", [
    ("stm32f4", "0.2.0", (BOARD_IN_FLIGHT, 4096)),
    ("stm32f4", "0.3.0", (BOARD_IN_FLIGHT, 4096)),   # 0.3.0 changed the DRBG, not the ring
    ("stm32f4", "0.1.0", (1, None)),      # the stm32f4 port polled its UART before 0.2.0
    ("stm32f4", "0.0.9", (1, None)),      # a firmware version the host does not know: polled
    ("template", "0.2.0", (1, None)),     # ports/template polls its UART
    ("qemu-netduinoplus2", "0.2.0", (1, None)),  # the qemu port: QEMU itself holds the bytes
])
def test_a_board_link_learns_from_info(board: str, version: str, expected: tuple) -> None:
    link = SerialLink("loop://", in_flight=None)
    try:
        assert (link.in_flight, link.in_flight_bytes, link.board_pending) == (1, None, True)
        link.learn_board(board, version)
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
        self.learned: list[tuple[str, str]] = []
        self.asked = 0  # INFO requests

    def learn_board(self, board: str, version: str) -> None:
        self.learned.append((board, version))
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
    assert link.learned == [("", "")] and not link.board_pending and link.asked == 1


def test_connect_passes_infos_board_and_version() -> None:
    head = S.INFO_HEAD_FMT.pack(1, 0, 0, 0, 1024, 1, 0, 168_000_000, 0, 0, 0)
    link = _Board(head + bytes([5]) + b"0.1.0" + bytes([7]) + b"stm32f4")
    connect(None, timeout=2, link=link)  # type: ignore[arg-type]
    assert link.learned == [("stm32f4", "0.1.0")]
