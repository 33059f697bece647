"""How far the implemented sampler's law is from the ideal discrete Laplace, computed exactly.

The sampler (firmware/core/src/dlap.c, host/edgedp/mech/reference.py) outputs z = ±G,
G = W 2^L + V, with (negative, 0) rejected, where

- V is uniform on [0, 2^L) accepted with probability a_V = prod_c chunk[c][u_c] / 2^64
  (an exact rational), so P(V = v) is proportional to a_v instead of exp(-v/t);
- W = j R + i (j tail rounds, i < R) has probability mu_R^j mu_i, mu the exact alias
  masses / 2^64, instead of (1 - q) q^W, q = exp(-2^L/t); after lat.tail_rounds tail
  rounds the tail outcome counts as the value R (the cap: the delta below).

The implemented pmf is therefore rho(z) P(z) / (normalisation) with rho = e_V(V) e_W(W);
the privacy loss of one coordinate between two inputs exceeds the ideal one by at most
``spread`` = max ln rho - min ln rho over the support below the cap, so a query of k values
is (epsilon + k * spread, k * delta)-DP against the ideal analysis, where delta bounds the
mass the shifted law puts where the capped law differs from the uncapped one:
P(|z| >= (R' + 1) R 2^L - shift) + P(|z| >= (R' + 1) R 2^L) <= 4 mu_R^(R' + 1 - ceil(shift / (R 2^L)))
for neighbours at most ``shift`` lattice steps apart in a coordinate (docs/privacy.md section 2). ln e_V factorises over
the 4-bit chunks of V, which makes the maximum over all 2^L values exact and cheap. That delta is an
upper bound; ``edgedp.mech.divergence`` computes the exact hockey-stick divergence.
"""
from __future__ import annotations

from dataclasses import dataclass

import mpmath

from .lattice import ALIAS_BITS, ALIAS_N, CHUNK_BITS, Lattice

mpmath.mp.dps = 60


@dataclass(frozen=True)
class Deviation:
    spread_v: float      # max - min of ln e_V over all V
    spread_w: float      # max - min of ln e_W over W < (tail_rounds + 1) R, cap point excluded
    delta: float         # delta of the tail cap per coordinate, between neighbours <= shift apart
    tail_probability: float

    @property
    def spread(self) -> float:
        return self.spread_v + self.spread_w

    def epsilon_excess(self, k: int) -> float:
        return k * self.spread


def alias_masses(lat: Lattice) -> list[mpmath.mpf]:
    """Exact probability of each alias outcome (value i < tail, or the tail) from the table."""
    n = ALIAS_N
    mu = [mpmath.mpf(0)] * n
    for col in range(n):
        if lat.alias[col] == col:
            mu[col] += mpmath.mpf(1) / n
        else:
            keep = mpmath.mpf(lat.keep[col]) / mpmath.mpf(2) ** 64
            mu[col] += keep / n
            mu[lat.alias[col]] += (1 - keep) / n
    return mu


def deviation(lat: Lattice) -> Deviation:
    inv_t = mpmath.mpf(lat.inv_t)
    two64 = mpmath.mpf(2) ** 64
    spread_v = mpmath.mpf(0)
    for c, row in enumerate(lat.chunks):
        width = min(CHUNK_BITS, lat.L - CHUNK_BITS * c)
        logs = [mpmath.log(mpmath.mpf(row[u]) / two64) + u * (2 ** (CHUNK_BITS * c)) * inv_t
                for u in range(1 << width)]
        spread_v += max(logs) - min(logs)
    q = mpmath.exp(-(2 ** lat.L) * inv_t)
    mu = alias_masses(lat)
    R = lat.tail
    assert abs(sum(mu) - 1) < mpmath.mpf(2) ** -100 and all(m == 0 for m in mu[R + 1:])
    lw = []
    for j in (0, lat.tail_rounds):  # ln e_W is linear in the round j: the ends decide
        for i in range(R):
            w = j * R + i
            lw.append(j * mpmath.log(mu[R]) + mpmath.log(mu[i]) - mpmath.log((1 - q) * q ** w))
    tail = mu[R]
    span = R * 2 ** lat.L
    need = -(-mpmath.mpf(lat.shift) // span)
    delta = 4 * tail ** (lat.tail_rounds + 1 - int(need))
    return Deviation(float(spread_v), float(max(lw) - min(lw)), float(delta), float(tail))


def describe(lat: Lattice, k: int) -> dict:
    d = deviation(lat)
    return {"t": lat.t, "L": lat.L, "K": lat.K, "KP": lat.KP, "tail": lat.tail, "alias_bits": ALIAS_BITS,
            "spread_v": d.spread_v, "spread_w": d.spread_w, "spread": d.spread,
            "epsilon_excess": d.epsilon_excess(k), "delta_per_coordinate": d.delta, "delta": k * d.delta}
