"""The budget store's record as the firmware writes it (firmware/core/src/store.c), read from a
memory dump: what a saved session memory holds."""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

MAGIC = 0x50444445        # "EDDP"
RECORD = 84               # bytes, CRC-32 last
_FMT = struct.Struct("<IBBBBIIQQQQQI")  # magic, version, _, size, _, sequence, day, caps, spends, counter, eps


@dataclass(frozen=True)
class StoredBudget:
    sequence: int
    day: int
    daily_cap: int        # micro-epsilon
    lifetime_cap: int     # micro-epsilon, 0: none
    daily_spent: int
    lifetime_spent: int
    eps_micro: int


def newest_record(mem: bytes) -> StoredBudget | None:
    """The valid record with the highest sequence anywhere in ``mem`` (4-byte aligned), or None."""
    best: StoredBudget | None = None
    for off in range(0, len(mem) - RECORD + 1, 4):
        raw = mem[off:off + RECORD]
        if int.from_bytes(raw[:4], "little") != MAGIC or raw[6] != RECORD:
            continue
        if int.from_bytes(raw[80:84], "little") != zlib.crc32(raw[:80]):
            continue
        _, _, _, _, _, seq, day, dcap, lcap, dspent, lspent, _, eps = _FMT.unpack_from(raw)
        r = StoredBudget(seq, day, dcap, lcap, dspent, lspent, eps)
        if best is None or (seq - best.sequence) % 2**32 < 2**31:
            best = r
    return best
