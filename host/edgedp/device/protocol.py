"""Frame types and body layouts of the wire protocol (docs/protocol.md)."""
from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass, field

import numpy as np

from ..mech.modes import MODE_BUCKET, MODE_FULL, MODE_LABEL, MODE_ROUND, MODE_SIMPLEX, MODE_TOPK, Mode

PING, INFO, BUDGET = 0x01, 0x02, 0x03
QUERY, LOCAL, SAMPLE, NAIVE = 0x10, 0x11, 0x12, 0x13
CONFIG, SET_TIME, RESET_BUDGET, TEST_SEED = 0x20, 0x21, 0x22, 0x23
ERROR, RESPONSE = 0x7F, 0x80
ADMIN_TYPES = (CONFIG, SET_TIME, RESET_BUDGET, TEST_SEED)
M_AUTO = -128
STORE_STATES = ("loaded", "fresh", "corrupt", "failed", "recovered")
TICK_KINDS = ("systick", "dwt", "host-ns")


@dataclass(frozen=True)
class Info:
    build: str
    entropy: str
    store: str
    time_ok: bool
    max_classes: int
    tick_kind: str
    store_ok: bool
    tick_hz: int
    firmware_version: str
    board: str

    @classmethod
    def parse(cls, b: bytes) -> "Info":
        build, ent, store, time_ok, maxk, tick_kind, store_ok, hz = struct.unpack_from("<BBBBHBBI", b)
        off = 12
        n = b[off]
        version = b[off + 1: off + 1 + n].decode()
        off += 1 + n
        n = b[off]
        board = b[off + 1: off + 1 + n].decode()
        return cls("test" if build else "production", "failed" if ent else "ok", STORE_STATES[store],
                   bool(time_ok), maxk, TICK_KINDS[tick_kind], bool(store_ok), hz, version, board)


@dataclass(frozen=True)
class Budget:
    recorded_day: int
    day: int | None
    daily_cap: int
    daily_spent: int
    lifetime_cap: int
    lifetime_spent: int
    remaining: int
    auth_counter: int
    store: str
    store_ok: bool
    epsilon_micro: int
    lo: float
    hi: float
    sensitivity: float
    m: int | None

    FMT = struct.Struct("<IIQQQQQQBBIfffi")

    @classmethod
    def parse(cls, b: bytes) -> "Budget":
        v = cls.FMT.unpack_from(b)
        return cls(v[0], None if v[1] == 0xFFFFFFFF else v[1], *v[2:8], STORE_STATES[v[8]], bool(v[9]),
                   v[10], v[11], v[12], v[13], None if v[14] == M_AUTO else v[14])


@dataclass
class QueryResult:
    """One external answer, decoded; ``lattice`` holds the integers the device sent."""

    remaining: int
    ticks: int
    m: int
    mode: Mode
    k: int
    lattice: np.ndarray
    indices: np.ndarray | None = None
    label: int = 0
    level: int | None = None
    values: np.ndarray | None = field(default=None)


def pack_vector(x: np.ndarray, mode: Mode) -> bytes:
    x = np.asarray(x, dtype="<f4").ravel()
    return struct.pack("<BBH", mode.kind, mode.arg, len(x)) + x.tobytes()


def parse_query(b: bytes, mode: Mode) -> QueryResult:
    remaining, ticks, m, kind, k = struct.unpack_from("<QIbBH", b)
    p = b[16:]
    g = 2.0 ** -m
    r = QueryResult(remaining, ticks, m, mode, k, np.zeros(0, dtype=np.int64))
    if kind in (MODE_FULL, MODE_SIMPLEX, MODE_ROUND):
        r.lattice = np.frombuffer(p, dtype="<i4", count=k).astype(np.int64)
        scale = 10.0 ** -mode.arg if kind == MODE_ROUND else g
        r.values = r.lattice * scale
        r.label = int(np.argmax(r.lattice))
    elif kind == MODE_TOPK:
        rec = np.frombuffer(p, dtype=np.dtype([("i", "<u2"), ("v", "<i4")]))
        r.indices = rec["i"].astype(np.int64)
        r.lattice = rec["v"].astype(np.int64)
        r.values = r.lattice * g
        r.label = int(r.indices[0])
    elif kind == MODE_LABEL:
        (r.label,) = struct.unpack_from("<H", p)
    elif kind == MODE_BUCKET:
        r.label, r.level = struct.unpack_from("<HB", p)
    return r


def admin_body(type_: int, counter: int, payload: bytes, key: bytes) -> bytes:
    """counter u64 | payload | HMAC-SHA256(key, "EDP1" | type | counter | payload)."""
    head = struct.pack("<Q", counter) + payload
    tag = hmac.new(key, b"EDP1" + bytes([type_]) + head, hashlib.sha256).digest()
    return head + tag


def config_payload(epsilon: float, daily_cap: float, lifetime_cap: float | None, lo: float, hi: float,
                   sensitivity: float, m: int | None = None) -> bytes:
    def micro(v: float) -> int:
        return int(round(v * 1e6))
    return struct.pack("<IQQfffi", micro(epsilon), micro(daily_cap), micro(lifetime_cap or 0),
                       lo, hi, sensitivity, M_AUTO if m is None else m)
