"""Malformed and hostile frames on the native device: each gets its error, and the device goes on."""
from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from cobs import cobs

from edgedp.device import frames, protocol as P
from edgedp.device.errors import DeviceError

pytestmark = pytest.mark.native


def raw_frame(version: int, type_: int, seq: int, body: bytes, crc_fix: int = 0) -> bytes:
    raw = struct.pack("<BBH", version, type_, seq) + body
    raw += struct.pack("<I", (zlib.crc32(raw) + crc_fix) & 0xFFFFFFFF)
    return cobs.encode(raw) + b"\x00"


def expect_error(dev, wire: bytes, seq: int, code: str) -> None:
    dev.send_raw(wire)
    f = dev.receive()
    assert f.type == P.ERROR, f
    assert f.seq == seq
    from edgedp.device.errors import ErrorCode
    assert ErrorCode(f.body[0]).name == code
    assert dev.ping(b"alive") == b"alive"


CASES = {
    "bad_crc": (raw_frame(1, P.PING, 11, b"x", crc_fix=1), 11, "ERR_CRC"),
    "truncated": (cobs.encode(b"\x01\x01\x0c") + b"\x00", 0, "ERR_LEN"),
    "short_with_seq": (cobs.encode(b"\x01\x01\x0d\x00\x00") + b"\x00", 13, "ERR_LEN"),
    "unknown_type": (raw_frame(1, 0x5A, 14, b""), 14, "ERR_UNKNOWN"),
    "wrong_version": (raw_frame(2, P.PING, 15, b""), 15, "ERR_VERSION"),
    "bad_cobs": (b"\x05\x01\x02\x00", 0, "ERR_CRC"),
    "oversize": (b"\x01" * 9000 + b"\x00", 0, "ERR_LEN"),
    "body_len_mismatch": (raw_frame(1, P.QUERY, 16, struct.pack("<BBH", 0, 0, 5) + b"\x00" * 8), 16, "ERR_LEN"),
    "nan": (raw_frame(1, P.QUERY, 17, P.pack_vector(np.array([0.1, np.nan]), P.Mode(0))), 17, "ERR_BAD_VALUE"),
    "inf": (raw_frame(1, P.QUERY, 18, P.pack_vector(np.array([np.inf, 0.2]), P.Mode(0))), 18, "ERR_BAD_VALUE"),
    "k_zero": (raw_frame(1, P.QUERY, 19, struct.pack("<BBH", 0, 0, 0)), 19, "ERR_BAD_VALUE"),
    "bad_mode": (raw_frame(1, P.QUERY, 20, struct.pack("<BBH", 9, 0, 1) + b"\x00" * 4), 20, "ERR_BAD_VALUE"),
    "topk_zero": (raw_frame(1, P.QUERY, 21, struct.pack("<BBH", 1, 0, 1) + b"\x00" * 4), 21, "ERR_BAD_VALUE"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_frame_gets_its_error(posix_device, name: str) -> None:
    dev = posix_device.start()
    wire, seq, code = CASES[name]
    expect_error(dev, wire, seq, code)


def test_random_garbage_then_resync(posix_device) -> None:
    dev = posix_device.start()
    rng = np.random.default_rng(3)
    for _ in range(20):
        dev.send_raw(rng.bytes(int(rng.integers(1, 3000))))
    dev.sync()  # flushes with 0x00 and waits for a PING answer, skipping stale error frames
    r = dev.query(np.array([0.2, 0.8]), "label")
    assert r.label in (0, 1)


def test_nan_query_costs_nothing(posix_device) -> None:
    dev = posix_device.start()
    before = dev.budget().daily_spent
    with pytest.raises(DeviceError) as e:
        dev.query(np.array([np.nan, 1.0]))
    assert e.value.code == "ERR_BAD_VALUE"
    assert dev.budget().daily_spent == before


def test_every_request_gets_exactly_one_response(posix_device) -> None:
    dev = posix_device.start()
    seqs = list(range(100, 140))
    for s in seqs:
        dev.send_raw(frames.encode(P.PING, s, bytes([s & 0xFF])))
    got = [dev.receive() for _ in seqs]
    assert [f.seq for f in got] == seqs
    assert all(f.type == P.PING | P.RESPONSE for f in got)
