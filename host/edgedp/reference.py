"""Bit-exact NumPy reference of the device: same ChaCha20 stream, same sampler, same modes.

The keystream comes from the ``cryptography`` package (ChaCha20 with a 16-byte
nonce = 64-bit little-endian block counter || 8 zero bytes, which is the
device's state layout); bits are consumed MSB first from each little-endian
32-bit word, lazily, exactly as ``firmware/core/include/edgedp/drbg.h``.
"""
from __future__ import annotations

import struct

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from . import modes
from .lattice import CHUNK_BITS, HMAX, Lattice, make_lattice, quantize
from .modes import Mode

TEST_SEED = bytes(range(32))
"""The documented boot seed of test images (firmware/app/test_keys.h)."""

_BLOCKS_PER_REFILL = 256


class BitStream:
    """The device's DRBG bit buffer, replayed."""

    def __init__(self, key: bytes):
        if len(key) != 32:
            raise ValueError("ChaCha20 key must be 32 bytes")
        self._key = key
        self._block = 0
        self._bits = np.zeros(0, dtype=np.uint8)
        self._pos = 0

    def _extend(self, need: int) -> None:
        while len(self._bits) - self._pos < need:
            nonce = struct.pack("<Q", self._block) + bytes(8)
            enc = Cipher(algorithms.ChaCha20(self._key, nonce), mode=None).encryptor()
            raw = enc.update(bytes(64 * _BLOCKS_PER_REFILL))
            self._block += _BLOCKS_PER_REFILL
            words = np.frombuffer(raw, dtype="<u4").astype(">u4")
            fresh = np.unpackbits(words.view(np.uint8))
            self._bits = np.concatenate([self._bits[self._pos:], fresh])
            self._pos = 0

    def take(self, n: int) -> int:
        """Next n bits as an integer, first bit most significant."""
        if n == 0:
            return 0
        self._extend(n)
        v = 0
        for b in self._bits[self._pos:self._pos + n]:
            v = (v << 1) | int(b)
        self._pos += n
        return v

    def bernoulli(self, threshold: int) -> int:
        """1 iff the random bits, read as a binary fraction, are below threshold / 2^64."""
        self._extend(64)
        seg = self._bits[self._pos:self._pos + 64]
        th = np.unpackbits(np.frombuffer(threshold.to_bytes(8, "big"), dtype=np.uint8))
        diff = np.flatnonzero(seg != th)
        if len(diff) == 0:
            self._pos += 64
            return 0
        i = int(diff[0])
        self._pos += i + 1
        return int(th[i])

    @property
    def bits_consumed(self) -> int:
        return self._block * 512 - (len(self._bits) - self._pos)


def dlap_sample(lat: Lattice, bits: BitStream) -> int:
    """One discrete Laplace sample, consuming bits exactly as edp_dlap_sample."""
    while True:
        sign = bits.take(1)
        while True:
            v = bits.take(lat.J)
            for c, row in enumerate(lat.chunks):
                u = (v >> (CHUNK_BITS * c)) & 15
                if u and not bits.bernoulli(row[u - 1]):
                    break
            else:
                break
        h = 0
        while h < HMAX and bits.bernoulli(lat.q):
            h += 1
        mag = v + (h << lat.J)
        if sign and mag == 0:
            continue
        return -mag if sign else mag


class ReferenceDevice:
    """Replays what a test-build device outputs, given the same seed and configuration."""

    def __init__(self, seed: bytes = TEST_SEED, epsilon_micro: int = 1_000_000, sensitivity: float = 2.0,
                 lo: float = 0.0, hi: float = 1.0, m: int | None = None):
        self.bits = BitStream(seed)
        self.configure(epsilon_micro, sensitivity, lo, hi, m)

    def configure(self, epsilon_micro: int, sensitivity: float, lo: float, hi: float, m: int | None = None) -> None:
        self.epsilon_micro, self.sensitivity, self.lo, self.hi, self.m = epsilon_micro, sensitivity, lo, hi, m

    def reseed(self, seed: bytes) -> None:
        self.bits = BitStream(seed)

    def lattice(self, k: int) -> Lattice:
        return make_lattice(k, self.epsilon_micro, self.sensitivity, self.lo, self.hi, self.m)

    def noisy(self, x: np.ndarray) -> tuple[np.ndarray, Lattice]:
        """Noisy (unclamped) lattice vector for one query."""
        x = np.asarray(x, dtype=np.float32).ravel()
        lat = self.lattice(len(x))
        q = quantize(x, lat, self.lo, self.hi)
        y = np.array([int(qi) + dlap_sample(lat, self.bits) for qi in q], dtype=np.int64)
        return y, lat

    def query(self, x: np.ndarray, mode: Mode | str = "full") -> dict:
        """The integers the device sends for this query: lattice/indices/label/level."""
        mode = Mode.parse(mode) if isinstance(mode, str) else mode
        y, lat = self.noisy(x)
        return encode_mode(y, lat, mode)

    def sample(self, epsilon_micro: int, sensitivity: float, k: int, count: int,
               m: int | None = None) -> tuple[Lattice, np.ndarray]:
        """Raw noise as the SAMPLE command draws it (range [0, 1] lattice)."""
        lat = make_lattice(k, epsilon_micro, sensitivity, 0.0, 1.0, m)
        return lat, np.array([dlap_sample(lat, self.bits) for _ in range(count)], dtype=np.int64)


def encode_mode(y: np.ndarray, lat: Lattice, mode: Mode) -> dict:
    """The integer payload of one answer in the given mode (what the device puts on the wire)."""
    y2 = y[None, :]
    if mode.kind == modes.MODE_FULL:
        return {"lattice": modes.clamp(y, lat)}
    if mode.kind == modes.MODE_SIMPLEX:
        return {"lattice": modes.simplex(y2, lat)[0]}
    if mode.kind == modes.MODE_ROUND:
        return {"lattice": modes.round_decimals(y2, lat, mode.arg)[0]}
    if mode.kind == modes.MODE_TOPK:
        idx, val = modes.topk(y2, mode.arg, lat)
        return {"indices": idx[0], "lattice": val[0]}
    if mode.kind == modes.MODE_LABEL:
        return {"label": int(modes.label(y2)[0])}
    lab, level = modes.bucket(y2, lat)
    return {"label": int(lab[0]), "level": int(level[0])}


def matches(device: "object", ref: dict) -> bool:
    """True iff a client QueryResult carries exactly the reference's integers."""
    for key, val in ref.items():
        got = getattr(device, key)
        if isinstance(val, np.ndarray):
            if got is None or not np.array_equal(np.asarray(got), val):
                return False
        elif got != val:
            return False
    return True
