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
    """One block: the rounds applied to the 16-word state, plus the state (edp_chacha_block)."""
    x = list(state)

    def qr(a: int, b: int, c: int, d: int) -> None:
        x[a] = (x[a] + x[b]) & _M
        t = x[d] ^ x[a]
        x[d] = ((t << 16) | (t >> 16)) & _M
        x[c] = (x[c] + x[d]) & _M
        t = x[b] ^ x[c]
        x[b] = ((t << 12) | (t >> 20)) & _M
        x[a] = (x[a] + x[b]) & _M
        t = x[d] ^ x[a]
        x[d] = ((t << 8) | (t >> 24)) & _M
        x[c] = (x[c] + x[d]) & _M
        t = x[b] ^ x[c]
        x[b] = ((t << 7) | (t >> 25)) & _M

    for _ in range(rounds // 2):
        qr(0, 4, 8, 12), qr(1, 5, 9, 13), qr(2, 6, 10, 14), qr(3, 7, 11, 15)
        qr(0, 5, 10, 15), qr(1, 6, 11, 12), qr(2, 7, 8, 13), qr(3, 4, 9, 14)
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

