"""The C core natively under ASan/UBSan: RFC vectors, and cross-checks with Python's libraries."""
from __future__ import annotations

import hashlib
import hmac
import struct
import subprocess
import zlib

import numpy as np
import pytest
from cobs import cobs
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from edgedp.mech.reference import BitStream

from ..conftest import ROOT

pytestmark = pytest.mark.native
TOOL = str(ROOT / "build/native/test_core")


def run(*args: str) -> str:
    r = subprocess.run([TOOL, *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip()


def test_rfc_known_answers(native_builds: None) -> None:
    out = run("rfc")
    assert "FAIL" not in out
    assert out.count("ok ") == 12


@pytest.mark.parametrize("seed", range(4))
def test_chacha_keystream_matches_cryptography(native_builds: None, seed: int) -> None:
    key = np.random.default_rng(seed).bytes(32)
    got = bytes.fromhex(run("chacha", key.hex(), "5"))
    nonce = struct.pack("<Q", 0) + bytes(8)
    want = Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor().update(bytes(64 * 5))
    assert got == want


def test_lazy_bits_match_reference_stream(native_builds: None) -> None:
    key = bytes(range(100, 132))
    got = run("bits", key.hex(), "3000")
    ref = BitStream(key)
    want = "".join(str(ref.take(1)) for _ in range(len(got)))
    assert got == want


@pytest.mark.parametrize("n", [0, 1, 31, 64, 65, 200])
def test_hmac_matches_python(native_builds: None, n: int) -> None:
    rng = np.random.default_rng(n)
    key, msg = rng.bytes(32 if n % 2 else 70), rng.bytes(n)
    assert run("hmac", key.hex(), msg.hex()) == hmac.new(key, msg, hashlib.sha256).hexdigest()


def test_crc_matches_zlib(native_builds: None) -> None:
    data = np.random.default_rng(1).bytes(300)
    assert int(run("crc", data.hex())) == zlib.crc32(data)


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00", b"abc\x00def", bytes(range(1, 255)),
                                  bytes(range(1, 256)) * 3, b"\x11" * 254 + b"\x00" + b"\x22" * 600])
def test_cobs_matches_python_package(native_builds: None, data: bytes) -> None:
    enc, _, dec = run("cobs", data.hex() or "").partition(" ")
    enc_b = bytes.fromhex(enc)
    assert enc_b[-1] == 0 and 0 not in enc_b[:-1]
    assert cobs.decode(enc_b[:-1]) == data
    assert bytes.fromhex(dec) == data
