"""Where every random draw of a DP-SGD run comes from (initialisation, Poisson selection, noise).

Two sources with one interface, ``Randomness``:

* ``OsRandomness`` (the default, a private run): every 64-bit word is read from the operating
  system's CSPRNG (``os.urandom``: getrandom(2) on Linux, a ChaCha20 generator keyed with at
  least 256 bits of entropy).  No seed exists, nothing is kept: the run cannot be replayed.
* ``SeededRandomness(seed)`` (``--seed N``): the words come from NumPy's PCG64 seeded by the
  integer, so the run is bit-for-bit reproducible and therefore **not private** (anyone with
  the seed and the data replays the noise and subtracts it).

Both turn words into numbers the same way: a uniform is the top 53 bits of a word over 2^53.  A
standard normal is sign * (-ndtri(U)) (``scipy.special.ndtri``, float64) with U in (0, 1/2) drawn
at full floating-point precision: its octave [2^-(j+2), 2^-(j+1)) with probability 2^-(j+1)
(j = the leading zero bits of two words, so j <= 128 and |z| <= 13.2), its 52 mantissa bits
uniform.  Unlike the inversion of a fixed-point uniform, whose grid thins out in the tails
(spacing 2^-53/phi(z): coarser than a float32 ulp beyond |z| = 6.4), neighbouring samples are
at most about 2^-52 or one float64 ulp of z apart, whichever is larger, everywhere
(docs/privacy.md §4.3 states what this and the lattice rounding of the noisy sum do and do not
protect against).
"""
from __future__ import annotations

import os
from typing import Protocol

import numpy as np
from scipy.special import ndtri

_UNIT = 2.0 ** -53


class Randomness(Protocol):
    """A source of the run's random draws."""

    private: bool

    def words(self, n: int) -> np.ndarray:
        """n uniformly random 64-bit words (uint64)."""

    def describe(self) -> str:
        """One line: where the bits come from (for the manifest)."""


def uniform(src: Randomness, n: int) -> np.ndarray:
    """n uniforms in [0, 1) on the grid 2^-53 (float64)."""
    return (src.words(n) >> np.uint64(11)).astype(np.float64) * _UNIT


def _leading_zeros(w: np.ndarray) -> np.ndarray:
    """Leading zero bits of each uint64 (64 for zero)."""
    n = np.zeros(w.shape, np.int64)
    x = w.copy()
    for s in (32, 16, 8, 4, 2, 1):
        top_clear = x < (np.uint64(1) << np.uint64(64 - s))
        n += np.where(top_clear, s, 0)
        x = np.where(top_clear, x << np.uint64(s), x)
    return n + (x == 0)


def normal(src: Randomness, shape: tuple[int, ...]) -> np.ndarray:
    """Standard normal float64 samples of ``shape``: inversion of a uniform drawn at full
    floating-point precision (three words per sample: two for the octave, one for the 52-bit
    mantissa and the sign)."""
    n = int(np.prod(shape, dtype=np.int64))
    w = src.words(3 * n).reshape(3, n)
    lz = _leading_zeros(w[0])
    octave = np.where(lz == 64, 64 + _leading_zeros(w[1]), lz)          # P(octave = j) = 2^-(j+1)
    mantissa = 1.0 + (w[2] >> np.uint64(12)).astype(np.float64) * 2.0 ** -52
    u = np.ldexp(mantissa, -(octave + 2))                                  # uniform in (0, 1/2)
    sign = np.where(w[2] & np.uint64(1), -1.0, 1.0)
    return (sign * -ndtri(u)).reshape(shape)


class OsRandomness:
    """Every word from the operating system's CSPRNG; not reproducible."""

    private = True

    def words(self, n: int) -> np.ndarray:
        return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).copy()

    def describe(self) -> str:
        return "os.urandom (the OS CSPRNG) for every draw; no seed, not replayable"


class SeededRandomness:
    """Words from NumPy's PCG64 seeded by ``seed``: reproducible, hence not private."""

    private = False

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)
        self._rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, 0xD95])))

    def words(self, n: int) -> np.ndarray:
        return self._rng.integers(0, 2 ** 64, size=n, dtype=np.uint64, endpoint=False)

    def describe(self) -> str:
        return f"NumPy PCG64 seeded with {self.seed}: replayable from the seed"


def source(seed: int | None) -> Randomness:
    """The OS CSPRNG when ``seed`` is None, else the seeded (reproducible, non-private) source."""
    return OsRandomness() if seed is None else SeededRandomness(seed)
