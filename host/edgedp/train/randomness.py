"""Where every random draw of a DP-SGD run comes from (initialisation, Poisson selection, noise).

Two sources with one interface, ``Randomness``:

* ``OsRandomness`` (the default, a private run): every 64-bit word is read from the operating
  system's CSPRNG (``os.urandom``: getrandom(2) on Linux, a ChaCha20 generator keyed with at
  least 256 bits of entropy).  No seed exists, nothing is kept: the run cannot be replayed.
* ``SeededRandomness(seed)`` (``--seed N``): the words come from NumPy's PCG64 seeded by the
  integer, so the run is bit-for-bit reproducible and therefore **not private** (anyone with
  the seed and the data replays the noise and subtracts it).

Both turn words into numbers the same way: a uniform is the top 53 bits of a word over 2^53; a
standard normal is the inverse normal CDF (``scipy.special.ndtri``, float64) of
(top 53 bits + 1/2) / 2^53, so its support is symmetric and reaches |z| = 8.3.  The noise is
added to the float32 gradient sum in float64 and the sum is then rounded to float32
(docs/privacy.md §4.3 states what this does and does not protect against).
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


def normal(src: Randomness, shape: tuple[int, ...]) -> np.ndarray:
    """Standard normal float64 samples of ``shape`` by inversion of 53-bit uniforms."""
    n = int(np.prod(shape, dtype=np.int64))
    u = ((src.words(n) >> np.uint64(11)).astype(np.float64) + 0.5) * _UNIT
    return ndtri(u).reshape(shape)


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
