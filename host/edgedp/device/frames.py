"""Frame codec: COBS + CRC-32, 0x00 delimited (docs/protocol.md)."""
from __future__ import annotations

import zlib
from dataclasses import dataclass

from cobs import cobs

from .. import schema as S

VERSION = S.PROTO_VERSION
HEADER = S.FRAME_HEADER_FMT
CRC = S.FRAME_CRC_FMT


@dataclass(frozen=True)
class Frame:
    version: int
    type: int
    seq: int
    body: bytes


class FrameError(ValueError):
    """A received chunk that is not a valid frame."""


def encode(type_: int, seq: int, body: bytes = b"", version: int = VERSION) -> bytes:
    """Wire bytes of one frame, including the trailing 0x00."""
    raw = HEADER.pack(version, type_, seq & 0xFFFF) + body
    raw += CRC.pack(zlib.crc32(raw))
    return cobs.encode(raw) + b"\x00"


def decode(chunk: bytes) -> Frame:
    """Decode one chunk (without its 0x00); raises FrameError."""
    try:
        raw = cobs.decode(chunk)
    except cobs.DecodeError as exc:
        raise FrameError(f"bad COBS: {exc}") from None
    if len(raw) < S.FRAME_OVERHEAD:
        raise FrameError(f"frame of {len(raw)} bytes is too short")
    (crc,) = CRC.unpack_from(raw, len(raw) - CRC.size)
    if crc != zlib.crc32(raw[:-CRC.size]):
        raise FrameError("CRC mismatch")
    version, type_, seq = HEADER.unpack_from(raw)
    return Frame(version, type_, seq, bytes(raw[HEADER.size:-CRC.size]))


class FrameReader:
    """Splits a byte stream into chunks at 0x00 and yields decodable frames.

    Chunks that fail to decode (the boot banner, line noise) are counted in
    ``discarded`` and skipped."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self.discarded = 0

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        frames: list[Frame] = []
        while True:
            i = self._buf.find(0)
            if i < 0:
                return frames
            chunk = bytes(self._buf[:i])
            del self._buf[: i + 1]
            if not chunk:
                continue
            try:
                frames.append(decode(chunk))
            except FrameError:
                self.discarded += 1
