"""The implemented sampler's law against the exact discrete Laplace, computed from its tables.

Exactness, not speed: the realised pmf differs from the ideal one by a factor whose log
varies by less than 2^-38 over the support (so a k-value query is (eps + k 2^-38)-DP against
the ideal analysis), and the tail cap leaves a probability below 2^-80 per coordinate."""
from __future__ import annotations

import pytest

from edgedp.bench.exactness import deviation
from edgedp.mech.lattice import Lattice, dlap_tables, make_lattice


@pytest.mark.parametrize("epsilon, k", [(0.01, 1000), (0.1, 1000), (1.0, 10), (1.0, 1000), (10.0, 1), (100.0, 1)])
def test_configured_lattices(epsilon: float, k: int) -> None:
    d = deviation(make_lattice(k, round(epsilon * 1e6), 2.0, 0.0, 1.0))
    assert d.spread < 2 ** -38
    assert d.delta < 2 ** -80


@pytest.mark.parametrize("inv_t", [1.0, 0.3, 0.124, 2 ** -10 * 1.3, 2 ** -24.9])
def test_extreme_scales(inv_t: float) -> None:
    J = 0
    while (2.0 ** (J + 1)) * inv_t <= 1.0:
        J += 1
    lat = Lattice(k=1, m=0, lo=0, hi=1, inv_t=inv_t, J=J, **dlap_tables(inv_t, J))
    assert lat.take_bits <= 32
    d = deviation(lat)
    assert d.spread < 2 ** -38 and d.delta < 2 ** -80
