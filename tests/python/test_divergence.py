"""The exact hockey-stick divergence of the realised pmf between neighbours (issue 9).

delta per coordinate = H_{e^eps'}(P~ || P~(. - s)), both directions, at eps' = s eps / shift
+ 2^-36 (what the stated bound (eps + k 2^-36, k 2^-66) gives a coordinate moved by s steps),
computed from the device's 64-bit tables: it must be <= 2^-64 for every configuration, and
below the upper bound of edgedp.mech.exactness. The pmf itself is checked against the
bit-exact reference sampler, and the sum restricted to the cap's neighbourhood against the sum
over the whole support."""
from __future__ import annotations

import dataclasses
import random
from fractions import Fraction

from ..helpers import require

require("mpmath")  # exact arithmetic

import mpmath
import numpy as np
import pytest
from scipy import stats

from edgedp.mech import divergence as dv
from edgedp.mech.exactness import deviation
from edgedp.mech import dlap
from edgedp.mech.lattice import ConfigError, make_lattice, to_micro
from edgedp.mech.reference import TEST_SEED, BitStream, dlap_sample

TWO = mpmath.mpf(2)
ALPHA = 1e-3


def lattice(k: int, epsilon: float, sensitivity: float = 2.0, m: int | None = None, tail_rounds: int | None = None):
    lat = make_lattice(k, to_micro(epsilon), sensitivity, 0.0, 1.0, m)
    return lat if tail_rounds is None else dataclasses.replace(lat, tail_rounds=tail_rounds)


@pytest.mark.parametrize("epsilon, sensitivity, m", [(2.0, 2.0, 3), (1.0, 2.0, 3), (1.5, 2.0, 4)])
def test_pmf_is_the_reference_samplers_law(epsilon: float, sensitivity: float, m: int) -> None:
    """300,000 samples of reference.dlap_sample (bit-exact with the device) against P~, with
    the cap after 0 tail rounds so that its point mass is visible (~200 samples)."""
    lat = lattice(1, epsilon, sensitivity, m, tail_rounds=0)
    pmf = dv.RealisedPmf(lat)
    bits = BitStream(TEST_SEED)
    n = 300_000
    z = np.array([dlap_sample(lat, bits) for _ in range(n)])
    support = np.arange(-(pmf.z_end - 1), pmf.z_end)
    expected = n * np.array([float(pmf.pmf(int(x))) for x in support])
    observed = np.array([np.count_nonzero(z == x) for x in support])
    assert observed.sum() == n
    big = expected >= 20
    obs, exp = observed[big], expected[big]
    if not big.all():
        obs, exp = np.append(obs, observed[~big].sum()), np.append(exp, expected[~big].sum())
    chi = float(((obs - exp) ** 2 / exp).sum())
    assert stats.chi2.sf(chi, len(obs) - 1) > ALPHA
    # The cap's point mass (|z| >= Z_c): P~'s, not the uncapped law's (a tenth of it).
    at_cap = int(np.count_nonzero(np.abs(z) >= pmf.z_cap))
    p_cap = float(Fraction(pmf.mass(pmf.z_cap, pmf.z_end) + pmf.mass(-pmf.z_end, -pmf.z_cap), pmf.total))
    assert stats.binomtest(at_cap, n, p_cap).pvalue > ALPHA
    p_ideal = float(dlap.tail(np.array([pmf.z_cap]), lat.inv_t)[0] - dlap.tail(np.array([pmf.z_end]), lat.inv_t)[0]) * 2
    assert stats.binomtest(at_cap, n, p_ideal).pvalue < ALPHA


@pytest.mark.parametrize("epsilon, sensitivity, m, tail_rounds", [
    (4.0, 2.0, 2, None),        # t = 2.25, L = 0, R = 32
    (1.0, 2.0, 3, None),        # t = 17, L = 1
    (2.0, 2.0, 3, None),        # t = 8.5, L = 0
    (1.0, 0.5, 4, None),        # t = 9, L = 0
    (4.0, 2.0, 2, 1),           # a cap too close: delta ~ 2^-37
    (8.0, 1.9765625, 7, 13),    # the old fixed cap at the t = 31.75 (sampled shifts)
])
def test_restricted_sum_is_the_full_sum(epsilon: float, sensitivity: float, m: int, tail_rounds: int | None) -> None:
    """Against the sum over every z of the support, term by term, for every shift 1..floor(shift)
    (every 63rd for the wider one): equal to 60 digits, and largest at floor(shift)."""
    lat = lattice(1, epsilon, sensitivity, m, tail_rounds)
    pmf = dv.RealisedPmf(lat)
    assert sum(pmf.u(z) for z in range(-pmf.z_end, pmf.z_end + 1)) == pmf.total
    assert pmf.mass(-pmf.z_end, pmf.z_end) == pmf.total
    top = int(lat.shift)
    shifts = range(1, top + 1) if top < 40 else [*range(1, top, 63), top]
    sv, _ = pmf.spreads()
    eps = [mpmath.mpf(dv.epsilon_of_shift(lat, to_micro(epsilon), s)) for s in shifts]
    brute = dv.brute_force(pmf, list(zip(shifts, eps)))
    values = []
    for s, e, (fwd, bwd) in zip(shifts, eps, brute):
        h = dv.hockey_stick(pmf, s, e, sv)
        assert h.forward > 0 and h.undecided == 0
        got = [h.forward, h.backward]
        if top < 40:    # the segment walk over the whole support too (regular pairs decided as 0)
            full = dv.hockey_stick(pmf, s, e, sv, restricted=False)
            got += [full.forward, full.backward]
        for g in got:
            assert abs(g - fwd) <= fwd * TWO ** -200
        assert abs(bwd - fwd) <= fwd * TWO ** -200   # P~ is symmetric: both directions agree
        values.append(h.delta)
    assert max(values) == values[-1]


GRID = [(k, eps, 2.0, None) for eps in (0.1, 1.0, 10.0) for k in (1, 10, 100, 1000)] + [
    (1, 8.0, 1.9765625, 7),      # the t = 31.75
    (1, 12.0, 2.0, None),
    (1, 12.0, 2.998046875, 10),  # t = 255.9, 2^L / t = 1/16: the old cap's worst at eps = 12
    (1, 100.0, 2.0, None),       # L = 0
    (1, 1000.0, 2.0, 9),         # t = 1.025, L = 0
    (1, 4294.967295, 2.0, 12),   # the largest epsilon CONFIG accepts, t = 1.9, L = 0, R' = 307
    (1, 4294.967295, 1.0, 16),   # t = 15.3, R' = 1052
    (1000, 0.01, 2.0, None),     # t = 2.6e7, L = 21
]


@pytest.mark.parametrize("k, epsilon, sensitivity, m", GRID)
def test_exact_delta_per_coordinate_is_below_2_to_the_minus_64(k: int, epsilon: float, sensitivity: float,
                                                             m: int | None) -> None:
    lat = lattice(k, epsilon, sensitivity, m)
    mic = to_micro(epsilon)
    d = dv.delta(lat, mic, dv.worst_shifts(lat))
    assert d.delta <= TWO ** -64
    assert d.delta <= deviation(lat).delta          # the exact value is below the upper bound
    assert d.worst_shift == int(lat.shift) and d.slack > 0
    # Shifts spread over 1..floor(shift): none is worse than floor(shift).
    top = int(lat.shift)
    sample = sorted({1, 2, 2 ** lat.L, top // 3, top // 2, top - 2 ** lat.L, top - 1} - {0})
    assert dv.delta(lat, mic, [s for s in sample if 1 <= s < top]).delta <= d.delta


def test_random_configurations() -> None:
    """Random accepted configurations (epsilon from 10^-3 to 4294, k, sensitivity, lattice)."""
    rng = random.Random(9)
    done = 0
    while done < 40:
        k = rng.choice([1, 1, 2, 10, 100, 1000])
        mic = int(10 ** rng.uniform(3, np.log10(0xFFFFFFFF)))
        sens = float(np.float32(10 ** rng.uniform(-2, 2)))
        m = rng.randint(-4, 20)
        try:
            lat = make_lattice(k, mic, sens, 0.0, 1.0, m)
        except ConfigError:
            continue
        if lat.tail_rounds > 400:
            continue
        d = dv.delta(lat, mic, dv.worst_shifts(lat, 1))
        assert d.delta <= TWO ** -64 and d.delta <= deviation(lat).delta, (k, mic, sens, m)
        done += 1


@pytest.mark.parametrize("epsilon, sensitivity, m, low, high", [
    (8.0, 1.9765625, 7, -70, -69.5),      # the 2^-69.7
    (12.0, 2.998046875, 10, -64, -63),    # past 2^-64 at eps = 12
    (4294.967295, 2.0, 12, -0.01, 0),     # about 1: the noise stopped near 200 steps, s = 8193
])
def test_the_old_fixed_cap_of_13_rounds_violates(epsilon: float, sensitivity: float, m: int,
                                                low: float, high: float) -> None:
    """What the configuration-dependent cap fixed: with R' = 13 the same function finds delta
    above 2^-64 at large epsilon, and the device's cap brings it below."""
    lat = lattice(1, epsilon, sensitivity, m)
    mic = to_micro(epsilon)
    old = dv.delta(dataclasses.replace(lat, tail_rounds=13), mic, dv.worst_shifts(lat, 0))
    assert TWO ** low < old.delta <= TWO ** high
    assert dv.delta(lat, mic, dv.worst_shifts(lat, 0)).delta <= TWO ** -64
