"""edgedp.mech.chacha, the host's copy of the device's keystream: published vectors, cryptography's
ChaCha20 at 20 rounds, and the constants of firmware drbg.h."""
from __future__ import annotations

import re
import struct

import numpy as np
import pytest

from ..helpers import ROOT, require

require("cryptography")  # the reference ChaCha

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from edgedp.mech import chacha
from edgedp.mech.reference import BitStream


# draft-strombergson-chacha-test-vectors-01, 256-bit keys: (key, IV, rounds, first 64 bytes).
TC1_KEY, TC1_IV = bytes(32), bytes(8)
TC8_KEY = bytes.fromhex("c46ec1b18ce8a878725a37e780dfb7351f68ed2e194c79fbc6aebee1a667975d")
TC8_IV = bytes.fromhex("1ada31d5cf688221")
VECTORS = [
    (TC1_KEY, TC1_IV, 12, "9bf49a6a0755f953811fce125f2683d50429c3bb49e074147e0089a52eae155f"
                          "0564f879d27ae3c02ce82834acfa8c793a629f2ca0de6919610be82f411326be"),
    (TC1_KEY, TC1_IV, 20, "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
                          "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586"),
    (TC8_KEY, TC8_IV, 12, "1482072784bc6d06b4e73bdc118bc0103c7976786ca918e06986aa251f7e9cc1"
                          "b2749a0a16ee83b4242d2e99b08d7c20092b80bc466c87283b61b1b39d0ffbab"),
    (TC8_KEY, TC8_IV, 20, "f63a89b75c2271f9368816542ba52f06ed49241792302b00b5e8f80ae9a473af"
                          "c25b218f519af0fdd406362e8d69de7f54c604a6e00f353f110f771bdca8ab92"),
]


@pytest.mark.parametrize("key,iv,rounds,want", VECTORS)
def test_published_vectors(key: bytes, iv: bytes, rounds: int, want: str) -> None:
    assert chacha.keystream(key, 0, 1, iv, rounds).hex() == want


@pytest.mark.parametrize("seed", range(3))
def test_twenty_rounds_are_cryptographys_chacha20(seed: int) -> None:
    """The same code with 20 rounds is ChaCha20 (OpenSSL's 16-byte IV: counter words 12-13 and
    nonce words 14-15, the device's layout): the only difference on the device is the round count."""
    rng = np.random.default_rng(seed)
    key, nonce = rng.bytes(32), rng.bytes(8)
    counter = int(rng.integers(0, 1 << 31))
    want = Cipher(algorithms.ChaCha20(key, struct.pack("<Q", counter) + nonce), mode=None).encryptor() \
        .update(bytes(64 * 5))
    assert chacha.keystream(key, counter, 5, nonce, 20) == want
    assert chacha.keystream(key, counter, 5, nonce) != want  # 12 rounds: another stream


def test_constants_are_drbg_h() -> None:
    text = (ROOT / "firmware/core/src/drbg.h").read_text()

    def define(name: str) -> int:
        m = re.search(rf"#define {name} (\d+)", text)
        assert m, name
        return int(m.group(1))
    assert define("EDP_CHACHA_ROUNDS") == chacha.ROUNDS == 12
    assert define("EDP_DRBG_BATCH_BLOCKS") == chacha.BATCH_BLOCKS
    assert define("EDP_DRBG_KEY_WORDS") * 4 == chacha.KEY_BYTES


def test_bitstream_is_the_batches_with_fast_key_erasure() -> None:
    key = bytes(range(32))
    bits = BitStream(key)
    want, k = b"", key
    for i in range(3):
        k, out = chacha.batch(k, chacha.BATCH_BLOCKS * i)
        want += out
    got = b"".join(struct.pack(">I", bits.take(32)) for _ in range(len(want) // 4))
    assert got == b"".join(struct.pack(">I", w) for w in struct.unpack("<%dI" % (len(want) // 4), want))
    assert bits.position == 8 * len(want)
