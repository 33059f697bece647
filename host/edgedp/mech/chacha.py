"""The device's keystream: ChaCha12 blocks, batched with fast key erasure (firmware drbg.h).

The ``cryptography`` package has ChaCha20 only, so the block function is written here: the
quarter round and state layout of RFC 8439 section 2.3 with ``ROUNDS`` rounds (Bernstein's
ChaCha family; 12 on the device, docs/privacy.md section 3). It runs on the host only, to
replay test images. ``tests/python/test_chacha.py`` checks it at 20 rounds against
``cryptography``'s ChaCha20 and at 12 against the ChaCha12 vectors of
draft-strombergson-chacha-test-vectors, and the constants against drbg.h.
"""
from __future__ import annotations

import struct

ROUNDS = 12
"""EDP_CHACHA_ROUNDS."""
BATCH_BLOCKS = 6
"""Blocks per batch (EDP_DRBG_BATCH_BLOCKS)."""
KEY_BYTES = 32
"""Fast key erasure: the first 32 bytes of a batch are the next key (EDP_DRBG_KEY_WORDS words)."""
CONSTANTS = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)
"""'expand 32-byte k'."""
_M = 0xFFFFFFFF


def block(state: list[int] | tuple[int, ...], rounds: int = ROUNDS) -> list[int]:
    """One block: the rounds applied to the 16-word state, plus the state (edp_chacha_block).

    The quarter rounds are written out on local variables: the replay tests draw millions of
    samples, and this is about twice as fast as a quarter-round function on a list."""
    x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15 = state
    for _ in range(rounds // 2):
        # quarter round, column 0
        x0 = (x0 + x4) & _M; x12 ^= x0; x12 = ((x12 << 16) | (x12 >> 16)) & _M
        x8 = (x8 + x12) & _M; x4 ^= x8; x4 = ((x4 << 12) | (x4 >> 20)) & _M
        x0 = (x0 + x4) & _M; x12 ^= x0; x12 = ((x12 << 8) | (x12 >> 24)) & _M
        x8 = (x8 + x12) & _M; x4 ^= x8; x4 = ((x4 << 7) | (x4 >> 25)) & _M
        # quarter round, column 1
        x1 = (x1 + x5) & _M; x13 ^= x1; x13 = ((x13 << 16) | (x13 >> 16)) & _M
        x9 = (x9 + x13) & _M; x5 ^= x9; x5 = ((x5 << 12) | (x5 >> 20)) & _M
        x1 = (x1 + x5) & _M; x13 ^= x1; x13 = ((x13 << 8) | (x13 >> 24)) & _M
        x9 = (x9 + x13) & _M; x5 ^= x9; x5 = ((x5 << 7) | (x5 >> 25)) & _M
        # quarter round, column 2
        x2 = (x2 + x6) & _M; x14 ^= x2; x14 = ((x14 << 16) | (x14 >> 16)) & _M
        x10 = (x10 + x14) & _M; x6 ^= x10; x6 = ((x6 << 12) | (x6 >> 20)) & _M
        x2 = (x2 + x6) & _M; x14 ^= x2; x14 = ((x14 << 8) | (x14 >> 24)) & _M
        x10 = (x10 + x14) & _M; x6 ^= x10; x6 = ((x6 << 7) | (x6 >> 25)) & _M
        # quarter round, column 3
        x3 = (x3 + x7) & _M; x15 ^= x3; x15 = ((x15 << 16) | (x15 >> 16)) & _M
        x11 = (x11 + x15) & _M; x7 ^= x11; x7 = ((x7 << 12) | (x7 >> 20)) & _M
        x3 = (x3 + x7) & _M; x15 ^= x3; x15 = ((x15 << 8) | (x15 >> 24)) & _M
        x11 = (x11 + x15) & _M; x7 ^= x11; x7 = ((x7 << 7) | (x7 >> 25)) & _M
        # quarter round, diagonal 0
        x0 = (x0 + x5) & _M; x15 ^= x0; x15 = ((x15 << 16) | (x15 >> 16)) & _M
        x10 = (x10 + x15) & _M; x5 ^= x10; x5 = ((x5 << 12) | (x5 >> 20)) & _M
        x0 = (x0 + x5) & _M; x15 ^= x0; x15 = ((x15 << 8) | (x15 >> 24)) & _M
        x10 = (x10 + x15) & _M; x5 ^= x10; x5 = ((x5 << 7) | (x5 >> 25)) & _M
        # quarter round, diagonal 1
        x1 = (x1 + x6) & _M; x12 ^= x1; x12 = ((x12 << 16) | (x12 >> 16)) & _M
        x11 = (x11 + x12) & _M; x6 ^= x11; x6 = ((x6 << 12) | (x6 >> 20)) & _M
        x1 = (x1 + x6) & _M; x12 ^= x1; x12 = ((x12 << 8) | (x12 >> 24)) & _M
        x11 = (x11 + x12) & _M; x6 ^= x11; x6 = ((x6 << 7) | (x6 >> 25)) & _M
        # quarter round, diagonal 2
        x2 = (x2 + x7) & _M; x13 ^= x2; x13 = ((x13 << 16) | (x13 >> 16)) & _M
        x8 = (x8 + x13) & _M; x7 ^= x8; x7 = ((x7 << 12) | (x7 >> 20)) & _M
        x2 = (x2 + x7) & _M; x13 ^= x2; x13 = ((x13 << 8) | (x13 >> 24)) & _M
        x8 = (x8 + x13) & _M; x7 ^= x8; x7 = ((x7 << 7) | (x7 >> 25)) & _M
        # quarter round, diagonal 3
        x3 = (x3 + x4) & _M; x14 ^= x3; x14 = ((x14 << 16) | (x14 >> 16)) & _M
        x9 = (x9 + x14) & _M; x4 ^= x9; x4 = ((x4 << 12) | (x4 >> 20)) & _M
        x3 = (x3 + x4) & _M; x14 ^= x3; x14 = ((x14 << 8) | (x14 >> 24)) & _M
        x9 = (x9 + x14) & _M; x4 ^= x9; x4 = ((x4 << 7) | (x4 >> 25)) & _M
    x = (x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15)
    return [(a + b) & _M for a, b in zip(x, state)]


def keystream(key: bytes, counter: int, nblocks: int, nonce: bytes = bytes(8), rounds: int = ROUNDS) -> bytes:
    """nblocks blocks of key from the 64-bit block counter (words 12-13) and the 8-byte nonce
    (words 14-15; zero on the device), little-endian words as the device stores them."""
    if len(key) != 32 or len(nonce) != 8:
        raise ValueError("ChaCha needs a 32-byte key and an 8-byte nonce")
    head = list(CONSTANTS) + list(struct.unpack("<8I", key))
    tail = list(struct.unpack("<2I", nonce))
    out = []
    for i in range(nblocks):
        c = (counter + i) & ((1 << 64) - 1)
        out.append(struct.pack("<16I", *block(head + [c & _M, c >> 32] + tail, rounds)))
    return b"".join(out)


def batch(key: bytes, counter: int) -> tuple[bytes, bytes]:
    """One batch from key at block counter `counter`: (the next key, the output bytes)
    (edp_drbg_next_block: its first KEY_BYTES are never output)."""
    raw = keystream(key, counter, BATCH_BLOCKS)
    return raw[:KEY_BYTES], raw[KEY_BYTES:]

