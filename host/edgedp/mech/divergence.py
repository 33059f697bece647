"""The exact hockey-stick divergence of the device's realised noise pmf between neighbours.

The realised law (firmware/core/src/dlap.c, ``reference.dlap_sample``) of one coordinate's
noise, from the integer tables of ``lattice.dlap_tables``: for |z| = W 2^L + V,

    P~(z) = A_V * mu^_W / T        (one formula for every z, z = 0 included)

- A_V = prod_c chunks[c][u_c], the acceptance threshold a_V = A_V / 2^(64 nc) of V (an exact
  integer; A = 1 for L = 0, where every V is accepted);
- mu^_W is the exact probability of W from the alias table, scaled by 2^(70 (R' + 2)):
  a column keeps its value with probability keep / 2^64 and gives its alias otherwise, so
  outcome i has probability m_i / 2^70 with integer m_i (sum 2^70); W = j R + i (j <= R' tail
  rounds, i < R) has mu_R^j mu_i, the cap W = (R' + 1) R has mu_R^(R' + 1), nothing beyond;
- the sign is one fair bit and (negative, 0) is rejected and redrawn, as is a rejected V,
  so T = 2 * sum_V A_V * sum_W mu^_W - A_0 mu^_0 normalises (z = 0 is drawn with sign 0 only).

All of that is Python integers: the pmf is exact, not approximated.

``hockey_stick(pmf, s, eps')`` is H_{e^eps'}(P~ || P~(. - s)) = sum_z max(0, P~(z) - e^eps'
P~(z - s)) and the reverse direction, for a shift of s lattice steps; the only inexact
quantity is e^eps', evaluated (as everything after the integer sums) at ``PREC`` bits.

What is enumerated, and why that is exact. Call |z| < Z_c = (R' + 1) R 2^L *regular*. For two
regular points, P~(z) / P~(z - s) = rho(z) / rho(z - s) * e^((|z - s| - |z|) / t) with
rho = e_V e_W (``exactness``), so ln of the ratio is at most spread + s / t, where spread =
max ln rho - min ln rho over the regular support (computed here exactly: ln e_V factorises over
the 4-bit chunks of V; ln e_W = j beta + gamma_i is linear in the round j). ``delta`` checks
spread + s (1/t - eps / shift) <= charge, so that every regular pair contributes 0 at eps' =
s eps / shift + charge in both directions. The sum therefore runs only over z where z or z - s
is not regular: [-(Z_c + 2^L - 1), s - Z_c] and [Z_c, Z_c + 2^L - 1 + s] (everything for
s >= 2 Z_c). Those z are cut into segments on which z and z - s each stay in one block of W
(or outside the support); on a segment the ratio P~(z) / P~(z - s) is mu^_a / mu^_b times
A_V / A_V' with V - V' moving linearly, which lies within e^(+-spread_v) of
mu^_a / mu^_b * e^(-(V - V') / t). Where that interval lies above e^eps' every term is positive
and the segment contributes mu^_a sum A - e^eps' mu^_b sum A' (sums of A_V over a range of V:
digit by digit over the chunks, exact); where it lies below, nothing; otherwise each term is
evaluated (counted in ``undecided``). Where z - s is outside the support the segment
contributes the exact mass of P~ over the range of z. ``brute_force`` sums every z of the
support term by term, without any of this, for small configurations: the tests compare them.

Worst shift: a coordinate of neighbouring inputs moves by an integer s <= shift = Delta/g + k
steps and costs eps_s = s eps / shift of the per-query eps (sum of eps_s <= eps). ``delta``
takes the maximum over the shifts it is given (all of 1 .. floor(shift) by default). The
divergence grows with s (the mass P~(|z| >= Z_c + 2^L - s) that the shifted law puts where the
other has none grows like e^(s / t); the excess of the cap point mass over the uncapped law
does not depend on s), so ``worst_shifts`` is floor(shift) and the few below it; tests check
on small configurations that the maximum over every s is at floor(shift).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import mpmath

from .lattice import ALIAS_BITS, ALIAS_N, CHUNK_BITS, MICRO, SLACK_BITS, Lattice, make_lattice, to_micro

PREC = 320
"""Working precision in bits of everything that is not an integer (e^eps', logarithms, the
final division): values of about 2^-70 to 2^-200 come out with relative error below 2^-250."""
CHARGE = Fraction(1, 2 ** SLACK_BITS)
"""Per-coordinate epsilon charged for the tables' rounding by the bound docs/privacy.md section 2
states."""
_MARGIN = mpmath.mpf(2) ** -200


def alias_integer_masses(lat: Lattice) -> list[int]:
    """m_i with P(alias outcome i) = m_i / 2^70 exactly, i = 0 .. tail (the tail outcome last)."""
    m = [0] * ALIAS_N
    full = 1 << 64
    for col in range(ALIAS_N):
        if lat.alias[col] == col:      # full column: no keep test
            m[col] += full
        else:
            m[col] += lat.keep[col]
            m[lat.alias[col]] += full - lat.keep[col]
    assert sum(m) == 1 << (64 + ALIAS_BITS)
    assert all(x == 0 for x in m[lat.tail + 1:]) and all(x > 0 for x in m[:lat.tail + 1])
    return m[:lat.tail + 1]


class RealisedPmf:
    """The exact law of one coordinate's noise for the tables of ``lat`` (see the module text)."""

    def __init__(self, lat: Lattice):
        self.lat = lat
        self.L = lat.L
        self.block = 1 << lat.L
        self.mask = self.block - 1
        self.R = lat.tail
        self.rounds = lat.tail_rounds
        self.cap = (self.rounds + 1) * self.R                 # W of the cap point
        self.z_cap = self.cap * self.block                    # Z_c: |z| >= Z_c is not regular
        self.z_end = self.z_cap + self.block                  # |z| >= z_end has probability 0
        self.m = alias_integer_masses(lat)
        self.rows = [list(row) for row in lat.chunks]
        self.row_sums = [sum(row) for row in self.rows]
        # low[c] = product of the full row sums of the chunks below c
        self.low = [1]
        for s_ in self.row_sums:
            self.low.append(self.low[-1] * s_)
        self.sum_a = self.low[-1]                             # sum over all V of A_V
        e = 70 * (self.rounds + 2)
        self.scale_bits = e
        mr = self.m[self.R]
        self.mr_pow = [1]
        for _ in range(self.rounds + 1):
            self.mr_pow.append(self.mr_pow[-1] * mr)
        # dm[i] = sum_{i' >= i} m_i' (i' <= R): the mass of "W mod R >= i or another tail round"
        self.dm = [0] * (self.R + 2)
        for i in range(self.R, -1, -1):
            self.dm[i] = self.dm[i + 1] + self.m[i]
        self.total = 2 * self.sum_a * (1 << e) - self.a(0) * self.mu(0)

    # --- exact integer pieces ------------------------------------------------------------
    def a(self, v: int) -> int:
        return self.lat.accept_threshold(v) if self.rows else 1

    def mu(self, w: int) -> int:
        """mu_W * 2^(70 (R' + 2)), exact."""
        if w < self.cap:
            j, i = divmod(w, self.R)
            return self.m[i] * self.mr_pow[j] << (70 * (self.rounds + 1 - j))
        if w == self.cap:
            return self.mr_pow[self.rounds + 1] << 70
        return 0

    def mu_tail(self, w: int) -> int:
        """sum_{W >= w} mu_W * 2^(70 (R' + 2)), exact."""
        if w > self.cap:
            return 0
        j, i = divmod(w, self.R)
        return self.mr_pow[j] * self.dm[i] << (70 * (self.rounds + 1 - j))

    def a_prefix(self, n: int) -> int:
        """sum_{V < n} A_V for 0 <= n <= 2^L, digit by digit over the 4-bit chunks."""
        if n >= self.block:
            return self.sum_a
        total, high = 0, 1
        for c in range(len(self.rows) - 1, -1, -1):
            d = (n >> (CHUNK_BITS * c)) & 15
            row = self.rows[c]
            total += high * sum(row[:d]) * self.low[c]
            high *= row[d]
        return total

    def a_range(self, v0: int, n: int) -> int:
        """sum of A_V for v0 <= V < v0 + n."""
        return self.a_prefix(v0 + n) - self.a_prefix(v0)

    def u(self, z: int) -> int:
        """T * P~(z), exact."""
        g = abs(z)
        if g >= self.z_end:
            return 0
        return self.a(g & self.mask) * self.mu(g >> self.L)

    def upper_mass(self, x: int) -> int:
        """T * P~(z >= x) over z >= 0 (0 <= x): the same for z <= -x when x >= 1."""
        if x >= self.z_end:
            return 0
        w, r = x >> self.L, x & self.mask
        return self.mu(w) * (self.sum_a - self.a_prefix(r)) + self.sum_a * self.mu_tail(w + 1)

    def mass(self, z0: int, z1: int) -> int:
        """T * P~(z0 <= z <= z1), exact."""
        if z0 > z1:
            return 0
        if z0 >= 0:
            return self.upper_mass(z0) - self.upper_mass(z1 + 1)
        if z1 < 0:
            return self.upper_mass(-z1) - self.upper_mass(-z0 + 1)
        return self.upper_mass(0) - self.upper_mass(z1 + 1) + self.upper_mass(1) - self.upper_mass(-z0 + 1)

    def pmf(self, z: int) -> Fraction:
        return Fraction(self.u(z), self.total)

    # --- the deviation from the ideal law, exactly ----------------------------------------
    def spreads(self) -> tuple[mpmath.mpf, mpmath.mpf]:
        """(spread_v, spread_w): max - min of ln e_V over all V and of ln e_W over regular W."""
        with mpmath.workprec(PREC):
            inv_t = mpmath.mpf(self.lat.inv_t)
            sv = mpmath.mpf(0)
            for c, row in enumerate(self.rows):
                width = min(CHUNK_BITS, self.L - CHUNK_BITS * c)
                logs = [mpmath.log(row[u]) + u * (1 << (CHUNK_BITS * c)) * inv_t for u in range(1 << width)]
                sv += max(logs) - min(logs)
            # ln e_W(jR + i) = j (ln mu_R + R 2^L / t) + (ln mu_i + i 2^L / t) + const
            beta = mpmath.log(self.m[self.R]) - 70 * mpmath.log(2) + self.R * self.block * inv_t
            gam = [mpmath.log(self.m[i]) + i * self.block * inv_t for i in range(self.R)]
            sw = self.rounds * abs(beta) + max(gam) - min(gam)
            return +sv, +sw


@dataclass(frozen=True)
class HockeyStick:
    shift: int                  # s, lattice steps
    epsilon: mpmath.mpf         # eps' at which the divergence is taken
    forward: mpmath.mpf         # H(P~ || P~(. - s))
    backward: mpmath.mpf        # H(P~(. - s) || P~)
    undecided: int              # terms evaluated one by one (the segment bound could not decide)

    @property
    def delta(self) -> mpmath.mpf:
        return max(self.forward, self.backward)


def _block_end(pmf: RealisedPmf, x: int) -> tuple[int, int, int, int]:
    """For an integer x: (last x' >= x in the same block as x, W or -1 if outside, V, dV/dx)."""
    g = abs(x)
    w = g >> pmf.L
    if x >= 0:
        if g >= pmf.z_end:
            return 1 << 62, -1, 0, 1
        return (w + 1) * pmf.block - 1, w, g & pmf.mask, 1
    if g >= pmf.z_end:
        return -pmf.z_end, -1, 0, -1
    return (-w * pmf.block if w else -1), w, g & pmf.mask, -1


def _v_range(v: int, dv: int, n: int) -> int:
    return v if dv > 0 else v - n + 1


def hockey_stick(pmf: RealisedPmf, s: int, epsilon: mpmath.mpf, spread_v: mpmath.mpf | None = None,
                 restricted: bool = True) -> HockeyStick:
    """H_{e^eps}(P~ || P~(. - s)) and H_{e^eps}(P~(. - s) || P~) for s >= 1 (see the module text:
    ``restricted`` skips the regular pairs, which contribute 0 when the caller has checked
    spread + s (1/t - eps_s) <= charge)."""
    if s < 1:
        raise ValueError("shift must be >= 1")
    with mpmath.workprec(PREC):
        if spread_v is None:
            spread_v = pmf.spreads()[0]
        eps = mpmath.mpf(epsilon)
        big = mpmath.exp(eps)
        inv_t = mpmath.mpf(pmf.lat.inv_t)
        lo, hi = -(pmf.z_end - 1), pmf.z_end - 1 + s
        if restricted and s < 2 * pmf.z_cap:
            ranges = [(lo, s - pmf.z_cap), (pmf.z_cap, hi)]
        else:
            ranges = [(lo, hi)]
        fwd, bwd = mpmath.mpf(0), mpmath.mpf(0)
        undecided = 0
        for z0, z1 in ranges:
            z = z0
            while z <= z1:
                ea, wa, va, da = _block_end(pmf, z)
                eb, wb, vb, db = _block_end(pmf, z - s)
                if wa < 0 and wb < 0:       # both outside: jump to where one enters
                    end = min(ea, eb + s, z1)
                elif wb < 0:                # only z inside: its whole mass counts forward
                    end = min(eb + s, z1)
                    fwd += mpmath.mpf(pmf.mass(z, end))
                elif wa < 0:
                    end = min(ea, z1)
                    bwd += mpmath.mpf(pmf.mass(z - s, end - s))
                else:
                    end = min(ea, eb + s, z1)
                    n = end - z + 1
                    mua, mub = pmf.mu(wa), pmf.mu(wb)
                    ra0, rb0 = _v_range(va, da, n), _v_range(vb, db, n)
                    x = mpmath.mpf(mua * pmf.a_range(ra0, n))
                    y = mpmath.mpf(mub * pmf.a_range(rb0, n))
                    # ln(A_Va / A_Vb) = -(Va - Vb)/t + (ln e_V(Va) - ln e_V(Vb)); Va - Vb is linear in the term
                    d_first, d_last = va - vb, (va + da * (n - 1)) - (vb + db * (n - 1))
                    base = mpmath.log(mua) - mpmath.log(mub)
                    lo_r = base - max(d_first, d_last) * inv_t - spread_v
                    hi_r = base - min(d_first, d_last) * inv_t + spread_v
                    for sign, acc in ((1, "f"), (-1, "b")):
                        lo_s, hi_s = (lo_r, hi_r) if sign > 0 else (-hi_r, -lo_r)
                        if lo_s > eps + _MARGIN:
                            contrib = (x - big * y) if sign > 0 else (y - big * x)
                        elif hi_s < eps - _MARGIN:
                            contrib = mpmath.mpf(0)
                        else:
                            contrib = mpmath.mpf(0)
                            for i in range(n):
                                ua = pmf.a(va + da * i) * mua
                                ub = pmf.a(vb + db * i) * mub
                                pa, pb = (ua, ub) if sign > 0 else (ub, ua)
                                contrib += max(mpmath.mpf(0), mpmath.mpf(pa) - big * pb)
                            undecided += n
                        if acc == "f":
                            fwd += contrib
                        else:
                            bwd += contrib
                z = end + 1
        total = mpmath.mpf(pmf.total)
        return HockeyStick(s, eps, fwd / total, bwd / total, undecided)


def brute_force(pmf: RealisedPmf, shifts: list[tuple[int, mpmath.mpf]]) -> list[tuple[mpmath.mpf, mpmath.mpf]]:
    """Both directions for each (s, eps'), summed over every z of the support term by term
    (small configurations: the check of ``hockey_stick``)."""
    with mpmath.workprec(PREC):
        lo = -(pmf.z_end - 1)
        top = max(s for s, _ in shifts)
        vals = [mpmath.mpf(pmf.u(z)) for z in range(lo - top, pmf.z_end + top)]
        total = mpmath.mpf(pmf.total)
        zero = mpmath.mpf(0)
        out = []
        for s, eps in shifts:
            big = mpmath.exp(mpmath.mpf(eps))
            fwd = bwd = zero
            for z in range(lo, pmf.z_end + s):
                ua, ub = vals[z - lo + top], vals[z - s - lo + top]
                fwd += max(zero, ua - big * ub)
                bwd += max(zero, ub - big * ua)
            out.append((fwd / total, bwd / total))
        return out


def epsilon_of_shift(lat: Lattice, epsilon_micro: int, s: int, charge: Fraction = CHARGE) -> Fraction:
    """eps' = s eps / shift + charge: what the stated bound gives a coordinate moved by s steps."""
    return Fraction(s) * Fraction(epsilon_micro, MICRO) / Fraction(lat.shift) + charge


def worst_shifts(lat: Lattice, extra: int = 3) -> list[int]:
    """floor(shift) and the ``extra`` shifts below it (the divergence grows with s)."""
    top = int(lat.shift)
    return list(range(max(1, top - extra), top + 1))


@dataclass(frozen=True)
class CapDelta:
    delta: mpmath.mpf           # max over the shifts of both directions, per coordinate
    worst_shift: int
    spread: mpmath.mpf          # spread_v + spread_w
    slack: mpmath.mpf           # charge - (spread + s_max (1/t - eps/shift)) >= 0
    per_shift: tuple[HockeyStick, ...]

    @property
    def log2(self) -> float:
        return float(mpmath.log(self.delta, 2)) if self.delta > 0 else float("-inf")


def delta(lat: Lattice, epsilon_micro: int, shifts: list[int] | None = None,
          charge: Fraction = CHARGE) -> CapDelta:
    """Exact per-coordinate delta of the realised pmf at eps' = s eps / shift + charge, the
    maximum over ``shifts`` (default: every s in 1 .. floor(shift)) and both directions.

    Raises ValueError if the tables' spread does not fit in the charge (then the regular pairs
    could contribute and the restricted sum would not be exact)."""
    pmf = RealisedPmf(lat)
    if shifts is None:
        shifts = list(range(1, int(lat.shift) + 1))
    with mpmath.workprec(PREC):
        sv, sw = pmf.spreads()
        spread = sv + sw
        excess = mpmath.mpf(lat.inv_t) - mpmath.mpf(Fraction(epsilon_micro, MICRO) / Fraction(lat.shift))
        slack = mpmath.mpf(charge) - spread - max(shifts) * max(excess, 0)
        if slack < 0:
            raise ValueError(f"spread {mpmath.nstr(spread, 5)} does not fit in the charge: restricted sum not exact")
        results = []
        for s in shifts:
            eps_s = epsilon_of_shift(lat, epsilon_micro, s, charge)
            results.append(hockey_stick(pmf, s, mpmath.mpf(eps_s), sv))
        worst = max(results, key=lambda h: h.delta)
        return CapDelta(worst.delta, worst.shift, spread, slack, tuple(results))


DOC_CASES = [(k, eps, 2.0, None) for eps in (0.1, 1.0, 10.0) for k in (1, 10, 100, 1000)] + [
    (1, 8.0, 1.9765625, 7), (1, 12.0, 2.0, None), (1, 12.0, 2.998046875, 10),
    (1, 1000.0, 2.0, 9), (1, 4294.967295, 2.0, 12), (1, 4294.967295, 1.0, 16)]
"""The settings of docs/privacy.md section 2 (range [0, 1]): the table's grid and the issue's cases."""


def main() -> None:
    """Print the rows of docs/privacy.md section 2's table of the exact delta (range [0, 1])."""
    import dataclasses

    from .exactness import deviation
    print("| k | ε | Δ | m | t | R' | s | exact δ per coordinate | upper bound | exact δ with R' = 13 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k, eps, sens, m in DOC_CASES:
        mic = to_micro(eps)
        lat = make_lattice(k, mic, sens, 0.0, 1.0, m)
        d = delta(lat, mic, worst_shifts(lat, 0))
        old = delta(dataclasses.replace(lat, tail_rounds=13), mic, worst_shifts(lat, 0))
        ub = float(mpmath.log(deviation(lat).delta, 2))
        was = "≈ 1" if old.log2 > -0.05 else f"2^{old.log2:.1f}"
        print(f"| {k} | {eps:.10g} | {sens:.10g} | {lat.m} | {lat.t:.4g} | {lat.tail_rounds} | {d.worst_shift} "
              f"| 2^{d.log2:.1f} | 2^{ub:.1f} | {was} |")


if __name__ == "__main__":
    main()
