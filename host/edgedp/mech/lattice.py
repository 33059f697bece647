"""The mechanism's parameters: lattice step, noise scale and Bernoulli threshold tables.

This module is the executable specification of ``firmware/core/src/dlap.c`` and
``mech.c`` set-up code.  Every floating-point step is written in the same order as
the C code so that IEEE-754 double arithmetic (correctly rounded on both sides: soft
double on the Cortex-M4, SSE2 on the host) gives identical bits.  Nothing here runs
per query on the device.  The guarantee these tables give one query is stated in
docs/privacy.md section 2; its two exponents are SLACK_BITS and DELTA_BITS below.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import schema as S

# The sampler's constants, from dlap.h through edgedp.schema (one source for both sides).
EXP_TERMS = S.DLAP_EXP_TERMS
"""Horner terms of exp(-x) on [0, 1]; 1/25! < 2^-83, far below one ulp."""
CHUNK_BITS = S.DLAP_CHUNK_BITS
"""The acceptance threshold of the low bits is a product of one 64-bit factor per 4-bit chunk."""
MAX_J = S.DLAP_MAX_J
"""Largest floor(log2 t) (t < 2^25), keeps |noise| < 2^31 - 2^24."""
LOW_SHIFT = S.DLAP_LOW_SHIFT
"""L = J - 3 uniform low bits: 2^L / t in (1/16, 1/8], so their acceptance is at least e^-1/8."""
ALIAS_BITS = S.DLAP_ALIAS_BITS
ALIAS_N = S.DLAP_ALIAS_N
"""The high part W = G >> L comes from a 64-column alias table (63 values and a tail outcome)."""
MAX_ACCEPT_BITS = S.DLAP_MAX_ACCEPT_BITS
MAX_KEEP_BITS = S.DLAP_MAX_KEEP_BITS
FIXED_BITS = S.DLAP_FIXED_BITS
"""The fixed draw of one sample is at most 32 bits (one word of the 64-bit bit buffer)."""
CAP_BITS = S.DLAP_CAP_BITS
"""Tail rounds: p^(rounds beyond the shift) <= 2^-CAP_BITS per coordinate (docs/privacy.md section 2)."""
SLACK_BITS = 36
"""Each answer's epsilon is eps + k * 2^-SLACK_BITS: the table rounding (docs/privacy.md section 2)."""
DELTA_BITS = CAP_BITS - 3
"""Each answer's delta is k * 2^-DELTA_BITS: the tail cap, 4 * 2^-CAP_BITS per coordinate."""
Z_LIMIT = S.DLAP_Z_LIMIT
"""|noise| must stay below 2^31 - 2^24 so that lattice value + noise fits int32."""
MIN_TAIL = S.DLAP_MIN_TAIL
"""The alias table stops adding values once q^w < 2^-20, so every mass is >= 2^-24 of the total."""
MAX_CLASSES = S.MAX_CLASSES
MICRO = S.MICRO
"""Micro-epsilon per epsilon: every epsilon on the device, the wire and in this package is an integer
count of micro-epsilon (fixed point, no float accumulation); see ``to_micro``."""
MAX_LATTICE = S.MECH_LATTICE_LIMIT
"""|lo|/g and |hi|/g must stay below 2^24 so that y*g is exact in float32."""
M_MIN, M_MAX = S.M_MIN, S.M_MAX
"""Lattice exponents m run M_MIN..M_MAX."""
TWO64 = 18446744073709551616.0
MASK64 = (1 << 64) - 1


class ConfigError(ValueError):
    """A mechanism configuration the device would refuse with ERR_BAD_VALUE."""


def to_micro(epsilon: float) -> int:
    """epsilon -> micro-epsilon, the nearest integer: the one conversion from a float epsilon."""
    return round(epsilon * MICRO)


def to_epsilon(micro: int) -> float:
    """micro-epsilon -> epsilon, for display."""
    return micro / MICRO


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
    """Smallest m with k * 2^-m <= sensitivity / 256 (mirrors auto_exponent in mech.c)."""
    limit = float(np.float32(sensitivity)) / S.M_AUTO_SLACK
    m = M_MIN
    while m < M_MAX and float(k) * (2.0 ** -m) > limit:
        m += 1
    return m


@dataclass(frozen=True)
class Lattice:
    """Everything the sampler needs for one (configuration, k): mirrors edp_dlap_t.

    A sample is sign s, low part V (L bits, accepted with probability a_V = prod_c
    chunks[c][u_c] / 2^(64 nc)) and high part W from the alias table (columns
    ``alias``, keep thresholds ``keep`` / 2^64, outcome ``tail`` = "W >= tail, draw
    again"); G = W 2^L + V and (s = 1, G = 0) is rejected. See ``reference.dlap_sample``."""

    k: int
    m: int
    lo: int
    hi: int
    inv_t: float
    J: int
    L: int
    K: int                                  # fixed acceptance bits (all-ones means: compare further)
    KP: int                                 # fixed keep bits of the alias test
    chunks: tuple[tuple[int, ...], ...]     # nc rows of 16 64-bit factors, factor(0) = 2^64 - 1
    keep: tuple[int, ...]                   # ALIAS_N 64-bit keep thresholds
    alias: tuple[int, ...]                  # ALIAS_N column aliases (== column: full, no test)
    tail: int                               # index of the tail outcome = number of plain values R
    tail_rounds: int                        # tail outcomes before the tail counts as the value R
    shift: float                            # L1 bound of neighbouring lattice vectors, sensitivity/g + k

    @property
    def granularity(self) -> float:
        return 2.0 ** -self.m

    @property
    def t(self) -> float:
        return 1.0 / self.inv_t

    @property
    def take_bits(self) -> int:
        """Bits of the fixed draw: V | accept prefix | sign | alias column | keep prefix."""
        return 1 + self.L + self.K + ALIAS_BITS + self.KP

    def accept_threshold(self, v: int) -> int:
        """a_V * 2^(64 nc) as an integer (the exact acceptance probability of the low part V)."""
        a = 1
        for c, row in enumerate(self.chunks):
            a *= row[(v >> (CHUNK_BITS * c)) & 15]
        return a


def _ceil_f32(v: np.float32) -> int:
    i = int(v)
    return i + 1 if float(i) < float(v) else i


def _floor_f32(v: np.float32) -> int:
    i = int(v)
    return i - 1 if float(i) > float(v) else i


@lru_cache(maxsize=1024)
def make_lattice(k: int, epsilon_micro: int, sensitivity: float, lo: float, hi: float,
                 m: int | None = None) -> Lattice:
    """Lattice and tables for k classes; raises ConfigError where the device says ERR_BAD_VALUE.

    Memoised: a Lattice is immutable and a function of the arguments alone, and a replay asks
    for the same few (configuration, k) thousands of times (building the tables takes about
    0.7 ms of Python). Arguments that compare equal (1 and 1.0) give the same float32 values."""
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
    if not (M_MIN <= m <= M_MAX):
        raise ConfigError(f"lattice exponent outside {M_MIN}..{M_MAX}")
    scale = np.float32(2.0 ** m)
    slo, shi = np.float32(flo * scale), np.float32(fhi * scale)
    if not (abs(float(slo)) < MAX_LATTICE and abs(float(shi)) < MAX_LATTICE):
        raise ConfigError("range / granularity exceeds 2^24 lattice steps")
    ylo, yhi = _ceil_f32(slo), _floor_f32(shi)
    if ylo > yhi:
        raise ConfigError("range holds no lattice point")
    eps = float(epsilon_micro) / MICRO
    shift = float(sens) * (2.0 ** m) + float(k)
    inv_t = eps / shift
    if inv_t > 1.0:
        raise ConfigError("noise scale t < 1 lattice step: use a finer lattice or smaller epsilon")
    J = 0
    while J < 62 and (2.0 ** (J + 1)) * inv_t <= 1.0:
        J += 1
    if J > MAX_J:
        raise ConfigError("noise scale t >= 2^25 lattice steps: epsilon too small for this lattice")
    return Lattice(k=k, m=m, lo=ylo, hi=yhi, inv_t=inv_t, J=J, shift=shift, **dlap_tables(inv_t, J, shift))


def _pow2(e: int) -> float:
    v = 1.0
    for _ in range(e):
        v *= 2.0
    return v


def leading_ones(v: int, nbits: int) -> int:
    """Number of leading one bits of v written with nbits bits."""
    n = 0
    while n < nbits and (v >> (nbits - 1 - n)) & 1:
        n += 1
    return n


def tail_rounds(tail_mass: int, tail: int, L: int, shift: float) -> int:
    """Tail outcomes before the tail counts as the value R (mirrors tail_cap in dlap.c).

    W reaches the cap (R' + 1) tail only after R' + 1 tail outcomes, each of probability
    p = tail_mass / 2^64, so |z| >= (R' + 1) span - s (span = tail 2^L) has probability at most
    2 p^(R' + 1 - ceil(s / span)); R' is the least with p^(R' + 1 - ceil(shift / span)) <= 2^-69.
    Raises ConfigError where the largest |z|, (R' + 2) span - 1, would reach Z_LIMIT."""
    p, pr, span, floor_bound = float(tail_mass) / TWO64, 1.0, float(tail), 1.0
    for _ in range(L):
        span *= 2.0
    for _ in range(CAP_BITS):
        floor_bound *= 0.5
    j = 0
    while pr > floor_bound:
        pr *= p
        j += 1
    too_wide = ConfigError("epsilon too large for this lattice: the noise cap it needs "
                           "exceeds 2^31 - 2^24 lattice steps")
    if not shift < Z_LIMIT:
        raise too_wide
    need = float(int(shift / span))
    if need * span < shift:
        need += 1.0
    if (need + float(j) + 1.0) * span > Z_LIMIT:
        raise too_wide
    return int(need) + j - 1


def dlap_tables(inv_t: float, J: int, shift: float) -> dict:
    """Sampler tables for 1/t = inv_t (mirrors edp_dlap_setup, one C function per phase, same double operations)."""
    L = J - LOW_SHIFT if J >= LOW_SHIFT else 0
    nc = (L + CHUNK_BITS - 1) // CHUNK_BITS
    chunks = []
    for c in range(nc):
        width = min(CHUNK_BITS, L - CHUNK_BITS * c)
        row = [MASK64]
        for u in range(1, 16):
            row.append(threshold64(exp_neg(float(u << (CHUNK_BITS * c)) * inv_t)) if u < (1 << width) else 0)
        chunks.append(tuple(row))
    K = 0
    if nc:
        a_min = 1
        for c, chunk in enumerate(chunks):
            a_min *= chunk[(1 << min(CHUNK_BITS, L - CHUNK_BITS * c)) - 1]
        K = min(MAX_ACCEPT_BITS, leading_ones(a_min, 64 * nc), FIXED_BITS - 1 - ALIAS_BITS - L)
    # Alias table of W: masses (1-q) q^w for 1 <= w < R, tail q^R, value 0 the rest (units of 2^-64).
    q = exp_neg(_pow2(L) * inv_t)
    one_minus_q = 1.0 - q
    masses = [0]
    qp = q
    while len(masses) < ALIAS_N - 1 and qp >= MIN_TAIL:
        masses.append(threshold64(one_minus_q * qp))
        qp *= q
    tail = len(masses)
    masses.append(threshold64(qp))
    masses[0] = (1 << 64) - sum(masses)  # value 0, the largest mass, takes the rounding residue
    masses += [0] * (ALIAS_N - len(masses))
    rounds = tail_rounds(masses[tail], tail, L, shift)
    cap = 1 << (64 - ALIAS_BITS)
    keep, alias = [0] * ALIAS_N, list(range(ALIAS_N))
    small = [w for w in range(ALIAS_N) if masses[w] < cap]
    large = [w for w in range(ALIAS_N) if masses[w] >= cap]
    while small and large:
        s_, l_ = small.pop(), large.pop()
        keep[s_] = masses[s_] << ALIAS_BITS
        alias[s_] = l_
        masses[l_] -= cap - masses[s_]
        (small if masses[l_] < cap else large).append(l_)
    for w in large:
        keep[w] = MASK64
    KP = max(0, min(MAX_KEEP_BITS, FIXED_BITS - 1 - ALIAS_BITS - L - K))
    return dict(L=L, K=K, KP=KP, chunks=tuple(chunks), keep=tuple(keep), alias=tuple(alias), tail=tail,
                tail_rounds=rounds)


def quantize(x: np.ndarray, lat: Lattice, lo: float, hi: float) -> np.ndarray:
    """Clamp to [lo, hi] in float32 and round half away from zero onto the lattice (int64).

    Mirrors edp_mech_quantize; NaN/Inf must have been rejected before."""
    xs = np.clip(np.asarray(x, dtype=np.float32), np.float32(lo), np.float32(hi))
    s = xs * np.float32(2.0 ** lat.m)
    q = np.trunc(s).astype(np.int64)
    f = s - q.astype(np.float32)
    q = q + (f >= np.float32(0.5)) - (f <= np.float32(-0.5))
    return q.astype(np.int64)
