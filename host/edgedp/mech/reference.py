"""Bit-exact NumPy reference of the device: same ChaCha12 stream, same sampler, same modes.

The keystream comes from ``edgedp.mech.chacha`` (ChaCha12, 64-bit block counter and
zero nonce: the device's state layout), in batches of 6 blocks with fast key erasure:
the first 32 bytes of each batch key the next one and are never output. Bits are consumed
MSB first from each little-endian 32-bit word, lazily, exactly as
``firmware/core/src/drbg.h``.
"""
from __future__ import annotations

import numpy as np

from . import chacha
from .types import MechConfig, QueryResult, SampleAnswer, SampleRequest
from . import modes
from .lattice import ALIAS_BITS, ALIAS_N, Lattice, make_lattice, quantize
from .modes import Mode

TEST_SEED = bytes(range(32))
"""The documented boot seed of test images (firmware/ports/common/test_keys.h)."""

_BATCHES_PER_REFILL = 8
"""Batches generated at a time (a batch is six Python ChaCha12 blocks, about 0.1 ms)."""


class BitStream:
    """The device's DRBG bit buffer, replayed."""

    def __init__(self, key: bytes):
        if len(key) != 32:
            raise ValueError("the DRBG key must be 32 bytes")
        self._key = key
        self._block = 0
        self._words: list[int] = []
        self._pos = 0  # bit position into the concatenated words
        self._dropped = 0  # bits of the words dropped from the front

    def _batch(self) -> bytes:
        """The output bytes of the next batch; re-keys from its first 32 bytes."""
        self._key, out = chacha.batch(self._key, self._block)
        self._block += chacha.BATCH_BLOCKS
        return out

    def _extend(self, need: int) -> None:
        while len(self._words) * 32 - self._pos < need:
            raw = b"".join(self._batch() for _ in range(_BATCHES_PER_REFILL))
            drop = self._pos // 32
            self._words = self._words[drop:] + np.frombuffer(raw, dtype="<u4").tolist()
            self._pos -= drop * 32
            self._dropped += drop * 32

    @property
    def position(self) -> int:
        """Bits consumed since the seed (the device's edgedp.bench.trace keystream position)."""
        return self._dropped + self._pos

    def _window(self, n: int) -> int:
        """The next n <= 64 bits as an integer without consuming them."""
        self._extend(n)
        w, off = divmod(self._pos, 32)
        words = self._words
        v = (words[w] << 64) | (words[w + 1] << 32 if w + 1 < len(words) else 0) | \
            (words[w + 2] if w + 2 < len(words) else 0)
        return (v >> (96 - off - n)) & ((1 << n) - 1)

    def take(self, n: int) -> int:
        """Next n bits as an integer, first bit most significant."""
        if n == 0:
            return 0
        v = self._window(n)
        self._pos += n
        return v

    def bernoulli(self, threshold: int) -> int:
        """1 iff the random bits, read as a binary fraction, are below threshold / 2^64."""
        diff = self._window(64) ^ threshold
        if diff == 0:
            self._pos += 64
            return 0
        i = 64 - diff.bit_length()  # index of the first differing bit, MSB first
        self._pos += i + 1
        return (threshold >> (63 - i)) & 1

    def less_than(self, value: int, nbits: int) -> bool:
        """Compare the stream, read as a binary fraction, with value / 2^nbits.

        Consumes the bits up to and including the first one that differs from value's
        nbits-bit expansion and returns True iff the stream is below; if all nbits bits
        agree they are consumed and the answer is False (the stream is not below)."""
        while nbits > 0:
            n = min(64, nbits)
            part = (value >> (nbits - n)) & ((1 << n) - 1)
            diff = self._window(n) ^ part
            if diff:
                i = n - diff.bit_length()
                self._pos += i + 1
                return bool((part >> (n - 1 - i)) & 1)
            self._pos += n
            nbits -= n
        return False


def dlap_sample(lat: Lattice, bits: BitStream) -> int:
    """One discrete Laplace sample, consuming bits exactly as edp_dlap_sample.

    One fixed draw of ``lat.take_bits`` bits gives, from the most significant end:
    V (L bits), the K-bit prefix of the acceptance comparison, the sign, the alias
    column i (6 bits) and the KP-bit prefix of the keep comparison. V is accepted iff
    the acceptance bits, continued lazily when they are all ones, are below a_V; column
    i keeps its value iff the keep bits (continued lazily on a tie) are below
    keep[i] / 2^64. The tail outcome adds ``lat.tail`` to W and draws a new column and
    keep prefix (at most lat.tail_rounds times). A rejected V, or (negative, 0), restarts
    the whole draw."""
    L, K, KP = lat.L, lat.K, lat.KP
    n1 = lat.take_bits
    nb = 64 * len(lat.chunks)
    while True:
        x = bits.take(n1)
        p = x & ((1 << KP) - 1)
        x >>= KP
        i = x & (ALIAS_N - 1)
        x >>= ALIAS_BITS
        sign = x & 1
        x >>= 1
        acc = x & ((1 << K) - 1)
        v = x >> K
        if nb and acc == (1 << K) - 1:
            a = lat.accept_threshold(v)
            if not bits.less_than(a & ((1 << (nb - K)) - 1), nb - K):
                continue
        w = 0
        rounds = 0
        while True:
            if lat.alias[i] != i:
                th = lat.keep[i]
                tp = th >> (64 - KP)
                if p > tp or (p == tp and not bits.less_than(th & ((1 << (64 - KP)) - 1), 64 - KP)):
                    i = lat.alias[i]
            if i != lat.tail or rounds == lat.tail_rounds:
                break
            w += lat.tail
            rounds += 1
            y = bits.take(ALIAS_BITS + KP)
            p = y & ((1 << KP) - 1)
            i = y >> KP
        g = ((w + i) << L) | v
        if sign and g == 0:
            continue
        return -g if sign else g


class ReferenceDevice:
    """Replays what a test-build device outputs, given the same seed and configuration."""

    def __init__(self, cfg: MechConfig = MechConfig(), seed: bytes = TEST_SEED):
        self.cfg = cfg
        self.bits = BitStream(seed)

    def configure(self, cfg: MechConfig) -> None:
        self.cfg = cfg

    def reseed(self, seed: bytes) -> None:
        self.bits = BitStream(seed)

    def noisy(self, x: np.ndarray) -> tuple[np.ndarray, Lattice]:
        """Noisy (unclamped) lattice vector for one query."""
        x = np.asarray(x, dtype=np.float32).ravel()
        lat = self.cfg.lattice(len(x))
        q = quantize(x, lat, self.cfg.lo, self.cfg.hi)
        y = np.array([int(qi) + dlap_sample(lat, self.bits) for qi in q], dtype=np.int64)
        return y, lat

    def query(self, x: np.ndarray, mode: Mode | str = "full") -> QueryResult:
        """The answer the device sends for this query (without remaining budget and ticks)."""
        mode = Mode.parse(mode) if isinstance(mode, str) else mode
        modes.check_fits(self.cfg.lattice(np.size(x)), mode)  # the device refuses before drawing noise
        y, lat = self.noisy(x)
        return QueryResult.from_release(modes.release(y[None, :], lat, mode), mode, lat.m, lat.k)

    def sample(self, req: SampleRequest) -> SampleAnswer:
        """Raw noise as the SAMPLE command draws it (range [0, 1] lattice)."""
        lat = make_lattice(req.k, req.eps_micro, req.sensitivity, 0.0, 1.0, req.m)
        noise = np.array([dlap_sample(lat, self.bits) for _ in range(req.count)], dtype=np.int64)
        return SampleAnswer(lat.m, lat.J, noise)
