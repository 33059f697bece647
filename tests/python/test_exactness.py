"""The implemented sampler's law against the exact discrete Laplace, computed from its tables.

Exactness, not speed: the realised pmf differs from the ideal one by a factor whose log
varies by less than 2^-38 over the support (so a k-value query is (eps + k 2^-38)-DP against
the ideal analysis), and the tail cap costs at most 2^-66 of delta per coordinate between
neighbours, for every epsilon the device accepts."""
from __future__ import annotations

import pytest

from ..helpers import require

require("mpmath")  # edgedp.mech.exactness

from edgedp.mech.exactness import deviation
from edgedp.mech.lattice import CAP_BITS, ConfigError, Lattice, dlap_tables, make_lattice, to_micro


@pytest.mark.parametrize("epsilon, k", [(0.01, 1000), (0.1, 1000), (1.0, 10), (1.0, 1000), (10.0, 1), (100.0, 1)])
def test_configured_lattices(epsilon: float, k: int) -> None:
    d = deviation(make_lattice(k, to_micro(epsilon), 2.0, 0.0, 1.0))
    assert d.spread < 2 ** -38
    assert d.delta <= 2 ** -66


@pytest.mark.parametrize("inv_t", [1.0, 0.3, 0.124, 2 ** -10 * 1.3, 2 ** -24.9])
def test_extreme_scales(inv_t: float) -> None:
    J = 0
    while (2.0 ** (J + 1)) * inv_t <= 1.0:
        J += 1
    shift = 3.0
    lat = Lattice(k=1, m=0, lo=0, hi=1, inv_t=inv_t, J=J, shift=shift, **dlap_tables(inv_t, J, shift))
    assert lat.take_bits <= 32
    d = deviation(lat)
    assert d.spread < 2 ** -38 and d.delta <= 2 ** -66


@pytest.mark.parametrize("epsilon_micro, sensitivity, m", [
    (8_000_000, 2.0, 7),            # the review's example: t = 31.75, shift 254 = 8 t
    (100_000_000, 2.0, None),
    (1_000_000_000, 2.0, 9),        # eps = 1000, t = 1.025
    (0xFFFFFFFF, 2.0, 12),          # the largest epsilon CONFIG accepts, t = 1.9
    (0xFFFFFFFF, 1.0, 16),          # t = 15.3
])
def test_tail_cap_covers_the_shift_for_large_epsilon(epsilon_micro: int, sensitivity: float, m: int | None) -> None:
    """A neighbour shifted by up to sensitivity/g + k steps must not reach outputs the other
    cannot produce: with a fixed cap of 13 tail rounds this was 2^-69.7 at eps = 8 and about
    1 at eps = 4294 (noise capped near 200 steps, shift 4295 steps)."""
    lat = make_lattice(1, epsilon_micro, sensitivity, 0.0, 1.0, m)
    d = deviation(lat)
    assert d.delta <= 2 ** -66 and d.spread < 2 ** -36  # docs/privacy.md: (ε + k·2^-36, k·2^-66)
    z_max = (lat.tail_rounds + 2) * lat.tail * 2 ** lat.L
    assert z_max > lat.shift and z_max + 2 ** 24 < 2 ** 31


def test_epsilon_whose_cap_overflows_is_refused() -> None:
    """t ~ 2^20 with eps ~ 4294 would need noise beyond 2^32 steps: refused (ERR_BAD_VALUE)."""
    with pytest.raises(ConfigError, match="epsilon too large"):
        make_lattice(1, 0xFFFFFFFF, 2.0 ** 11, 0.0, 1.0, 21)
    assert CAP_BITS == 69
