"""The budget store's record as the firmware writes it (firmware/core/src/store.c), read from a
memory dump: what a saved session memory holds."""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from .. import schema as S

MAGIC = S.STORE_MAGIC     # "EDDP"
RECORDS = (S.STORE_RECORD_V1, S.STORE_RECORD)  # bytes of a version 1 and 2 record (store.h), CRC-32 last
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
    for off in range(0, len(mem) - min(RECORDS) + 1, 4):
        size = mem[off + 6]
        raw = mem[off:off + size]
        if int.from_bytes(raw[:4], "little") != MAGIC or size not in RECORDS or len(raw) != size:
            continue
        if int.from_bytes(raw[size - 4:], "little") != zlib.crc32(raw[:size - 4]):
            continue
        _, _, _, _, _, seq, day, dcap, lcap, dspent, lspent, _, eps = _FMT.unpack_from(raw)
        r = StoredBudget(seq, day, dcap, lcap, dspent, lspent, eps)
        if best is None or (seq - best.sequence) % 2**32 < 2**31:
            best = r
    return best
