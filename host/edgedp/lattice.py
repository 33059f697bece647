"""The mechanism's parameters: lattice step, noise scale and Bernoulli threshold tables.

This module is the executable specification of ``firmware/core/src/dlap.c`` and
``mech.c`` set-up code.  Every floating-point step is written in the same order as
the C code so that IEEE-754 double arithmetic (correctly rounded on both sides: soft
double on the Cortex-M4, SSE2 on the host) gives identical bits.  Nothing here runs
per query on the device.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EXP_TERMS = 24
"""Horner terms of exp(-x) on [0, 1]; 1/25! < 2^-83, far below one ulp."""
CHUNK_BITS = 4
"""Low magnitude digits are accepted in groups of this many bits (table of 15 thresholds)."""
MAX_J = 24
"""Largest number of uniformly drawn low bits (t < 2^25), keeps |noise| < 2^31."""
HMAX = 96
"""Cap of the unary high part: q^96 <= e^-48 < 2^-69 since q <= e^-1/2."""
MAX_CLASSES = 1024
MAX_LATTICE = 1 << 24
"""|lo|/g and |hi|/g must stay below 2^24 so that y*g is exact in float32."""
TWO64 = 18446744073709551616.0


class ConfigError(ValueError):
    """A mechanism configuration the device would refuse with ERR_BAD_VALUE."""


def exp_neg(x: float) -> float:
    """exp(-x) for 0 <= x <= 1 by a fixed Horner scheme (mirrors edp_exp_neg)."""
    r = 1.0
    for n in range(EXP_TERMS, 0, -1):
        r = 1.0 - x * r / float(n)
    return r


def threshold64(p: float) -> int:
    """floor(p * 2^64) for 0 < p < 1: a Bernoulli(p) decided by 64 random bits."""
    return int(p * TWO64)


def auto_exponent(k: int, sensitivity: float) -> int:
    """Smallest m with k * 2^-m <= sensitivity / 256 (mirrors edp_mech_auto_m)."""
    limit = float(np.float32(sensitivity)) / 256.0
    m = -30
    while m < 30 and float(k) * (2.0 ** -m) > limit:
        m += 1
    return m


@dataclass(frozen=True)
class Lattice:
    """Everything the sampler needs for one (configuration, k)."""

    k: int
    m: int
    lo: int
    hi: int
    inv_t: float
    J: int
    chunks: tuple[tuple[int, ...], ...]
    q: int

    @property
    def granularity(self) -> float:
        return 2.0 ** -self.m

    @property
    def t(self) -> float:
        return 1.0 / self.inv_t


def _ceil_f32(v: np.float32) -> int:
    i = int(v)
    return i + 1 if float(i) < float(v) else i


def _floor_f32(v: np.float32) -> int:
    i = int(v)
    return i - 1 if float(i) > float(v) else i


def make_lattice(k: int, epsilon_micro: int, sensitivity: float, lo: float, hi: float,
                 m: int | None = None) -> Lattice:
    """Lattice and tables for k classes; raises ConfigError where the device says ERR_BAD_VALUE."""
    sens = np.float32(sensitivity)
    flo, fhi = np.float32(lo), np.float32(hi)
    if not (1 <= k <= MAX_CLASSES):
        raise ConfigError(f"k={k} outside 1..{MAX_CLASSES}")
    if not (np.isfinite(sens) and sens > 0):
        raise ConfigError("sensitivity must be finite and > 0")
    if not (np.isfinite(flo) and np.isfinite(fhi) and flo < fhi):
        raise ConfigError("range must be finite with lo < hi")
    if not (1 <= epsilon_micro <= 0xFFFFFFFF):
        raise ConfigError("epsilon must be at least 1e-6")
    if m is None:
        m = auto_exponent(k, float(sens))
    if not (-30 <= m <= 30):
        raise ConfigError("lattice exponent outside -30..30")
    scale = np.float32(2.0 ** m)
    slo, shi = np.float32(flo * scale), np.float32(fhi * scale)
    if not (abs(float(slo)) < MAX_LATTICE and abs(float(shi)) < MAX_LATTICE):
        raise ConfigError("range / granularity exceeds 2^24 lattice steps")
    ylo, yhi = _ceil_f32(slo), _floor_f32(shi)
    if ylo > yhi:
        raise ConfigError("range holds no lattice point")
    eps = float(epsilon_micro) / 1e6
    inv_t = eps / (float(sens) * (2.0 ** m) + float(k))
    if inv_t > 1.0:
        raise ConfigError("noise scale t < 1 lattice step: use a finer lattice or smaller epsilon")
    J = 0
    while J < 62 and (2.0 ** (J + 1)) * inv_t <= 1.0:
        J += 1
    if J > MAX_J:
        raise ConfigError("noise scale t >= 2^25 lattice steps: epsilon too small for this lattice")
    chunks = []
    for c in range((J + CHUNK_BITS - 1) // CHUNK_BITS):
        width = min(CHUNK_BITS, J - CHUNK_BITS * c)
        row = []
        for u in range(1, 1 << width):
            x = float(u << (CHUNK_BITS * c)) * inv_t
            row.append(threshold64(exp_neg(x)))
        chunks.append(tuple(row))
    q = threshold64(exp_neg((2.0 ** J) * inv_t))
    return Lattice(k=k, m=m, lo=ylo, hi=yhi, inv_t=inv_t, J=J, chunks=tuple(chunks), q=q)


def quantize(x: np.ndarray, lat: Lattice, lo: float, hi: float) -> np.ndarray:
    """Clamp to [lo, hi] in float32 and round half away from zero onto the lattice (int64).

    Mirrors edp_mech_quantize; NaN/Inf must have been rejected before."""
    xs = np.clip(np.asarray(x, dtype=np.float32), np.float32(lo), np.float32(hi))
    s = xs * np.float32(2.0 ** lat.m)
    q = np.trunc(s).astype(np.int64)
    f = s - q.astype(np.float32)
    q = q + (f >= np.float32(0.5)) - (f <= np.float32(-0.5))
    return q.astype(np.int64)


def dlap_pmf(z: np.ndarray, inv_t: float) -> np.ndarray:
    """Exact discrete Laplace pmf P(z) = (1-r)/(1+r) r^|z|, r = exp(-1/t)."""
    r = np.exp(-inv_t)
    return (1 - r) / (1 + r) * np.exp(-np.abs(z) * inv_t)
