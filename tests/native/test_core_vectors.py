"""The C core natively under ASan/UBSan: known-answer vectors, and cross-checks with Python's libraries."""
from __future__ import annotations

import hashlib
import hmac
import struct
import subprocess
import zlib

import numpy as np
import pytest
from cobs import cobs

from edgedp.mech import chacha
from edgedp.mech.reference import BitStream

from ..helpers import ROOT

pytestmark = pytest.mark.native
TOOL = str(ROOT / "build/native/test_core")


def run(*args: str) -> str:
    r = subprocess.run([TOOL, *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip()


def test_rfc_known_answers(native_builds: None) -> None:
    out = run("rfc")
    assert "FAIL" not in out
    assert out.count("ok ") == 13


def test_info_v2_fields_on_a_stub_port(native_builds: None) -> None:
    """INFO version 2 from the core itself (test_core.c, edp_device_handle on a stub port): the
    port's rx_buffer, each randomness source's health when it alone fails, the model's kind,
    head, classes, input shape, sha256 and name, and zeros without a model."""
    out = run("info")
    assert "FAIL" not in out
    assert out.count("ok ") == 12


@pytest.mark.parametrize("seed", range(4))
def test_chacha_keystream_with_fast_key_erasure_matches_the_block_function(native_builds: None, seed: int) -> None:
    """Batch i: 6 ChaCha12 blocks (counter 6i) of key_i; bytes 0..31 are key_(i+1) and never
    output, bytes 32..383 are (the block function from edgedp.mech.chacha, itself checked
    against published vectors and cryptography's ChaCha20 in tests/python/test_chacha.py)."""
    key = np.random.default_rng(seed).bytes(32)
    got = bytes.fromhex(run("chacha", key.hex(), "5"))
    want = b""
    for i in range(5):
        raw = chacha.keystream(key, chacha.BATCH_BLOCKS * i, chacha.BATCH_BLOCKS)
        key, want = raw[:32], want + raw[32:]
    assert got == want
    # past outputs do not depend on the key left in the device: a plain stream differs
    assert got[:224] != chacha.keystream(np.random.default_rng(seed).bytes(32), 0, chacha.BATCH_BLOCKS)[:224]


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


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 7, 300, 301, 1030])
def test_crc_matches_zlib(native_builds: None, n: int) -> None:
    data = np.random.default_rng(n).bytes(n)  # word-wise body, byte-wise tail of 0-3
    assert int(run("crc", data.hex())) == zlib.crc32(data)


def cobs_wire(data: bytes) -> bytes:
    """The device's COBS bytes: like cobs.encode, except that a run of 254 non-zero bytes
    always closes with 0xFF, also at the very end (then a code 0x01 follows)."""
    out, run = bytearray(), bytearray()
    for b in data:
        if b:
            run.append(b)
            if len(run) == 254:
                out += b"\xff" + run
                run.clear()
        else:
            out += bytes([len(run) + 1]) + run
            run.clear()
    return bytes(out + bytes([len(run) + 1]) + run + b"\x00")


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00", b"abc\x00def", bytes(range(1, 255)),
                                  bytes(range(1, 256)) * 3, b"\x11" * 254 + b"\x00" + b"\x22" * 600,
                                  b"\x11" * 253, b"\x11" * 254, b"\x11" * 255, b"\x11" * 508, bytes(4120),
                                  b"\x7e" * 4120, struct.pack("<1030i", *([0, 131072, 70776, -3] * 257 + [1, 2])),
                                  np.random.default_rng(5).dirichlet(np.ones(1030)).astype("<f4").tobytes()])
def test_cobs_matches_python_package(native_builds: None, data: bytes) -> None:
    enc, _, dec = run("cobs", data.hex() or "").partition(" ")
    enc_b = bytes.fromhex(enc)
    assert enc_b[-1] == 0 and 0 not in enc_b[:-1]
    assert enc_b == cobs_wire(data)  # the bytes on the wire, not only a valid encoding
    assert cobs.decode(enc_b[:-1]) == data
    assert bytes.fromhex(dec) == data


def test_cobs_word_encoder_matches_byte_reference(native_builds: None) -> None:
    """The word-at-a-time encoder against the byte-at-a-time one in C: runs of 250-258
    non-zero bytes at every offset, all zeros, no zeros, random zero densities up to the
    largest frame (EDP_FRAME_MAX), every alignment, into exactly EDP_COBS_MAX bytes (ASan)."""
    assert run("cobs-edges").startswith("ok")


@pytest.mark.parametrize("epsilon_micro, sensitivity, m, k", [
    (1_000_000, 2.0, None, 10), (100_000, 2.0, None, 1000), (8_000_000, 2.0, 7, 1),
    (1_000_000_000, 2.0, 9, 1), (0xFFFFFFFF, 2.0, 12, 1), (0xFFFFFFFF, 1.0, 16, 3),
    (0xFFFFFFFF, 2.0 ** 11, 21, 1), (0xFFFFFFFF, 2.0 ** 11, 20, 1), (1, 2.0, -6, 1),
])
def test_sampler_setup_matches_lattice_including_the_tail_cap(native_builds: None, epsilon_micro: int,
                                                             sensitivity: float, m: int | None, k: int) -> None:
    """edp_dlap_setup and lattice.dlap_tables agree on the table shape and the ε-dependent
    tail cap, and refuse the same configurations (ERR_BAD_VALUE = -5)."""
    from edgedp.mech.lattice import ConfigError, auto_exponent, make_lattice

    mm = auto_exponent(k, sensitivity) if m is None else m
    shift = float(np.float32(sensitivity)) * (2.0 ** mm) + float(k)
    inv_t = float(epsilon_micro) / 1e6 / shift
    got = run("dlap", repr(inv_t), repr(shift))
    try:
        lat = make_lattice(k, epsilon_micro, sensitivity, 0.0, 1.0, m)
    except ConfigError:
        assert got == "error -5"
        return
    assert got == f"{lat.J} {lat.L} {lat.K} {lat.KP} {lat.tail} {lat.tail_rounds}"
