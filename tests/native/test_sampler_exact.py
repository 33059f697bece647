"""Sampler exactness natively: >= 10^6 samples per setting against the exact pmf, tails and zero mass."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from edgedp.device.noise import draw_samples
from edgedp.device.protocol import SampleRequest
from edgedp.mech import dlap
from edgedp.mech.lattice import make_lattice

pytestmark = [pytest.mark.native, pytest.mark.slow]
ALPHA = 1e-3


@pytest.mark.parametrize("eps_micro,sensitivity,k", [(1_000_000, 2.0, 10), (100_000, 2.0, 1000), (10_000_000, 2.0, 1),
                                                     (2_000_000, 0.5, 3)])
def test_million_samples_fit_exact_pmf(posix_device, eps_micro: int, sensitivity: float, k: int) -> None:
    dev = posix_device.start()
    n = 1_000_000
    z = draw_samples(dev, SampleRequest(eps_micro, sensitivity, k, n), progress=False)
    lat = make_lattice(k, eps_micro, sensitivity, 0.0, 1.0)
    c = dlap.chi_square(z, lat.inv_t)
    assert c.n == n and c.dof >= 10
    assert c.pvalue > ALPHA, f"chi-square p = {c.pvalue:.2e} at eps_micro={eps_micro}, k={k}"

    r = np.exp(-lat.inv_t)
    p_zero = (1 - r) / (1 + r)
    assert stats.binomtest(int(np.count_nonzero(z == 0)), n, p_zero).pvalue > ALPHA
    # Tail beyond 5t on either side: P(|z| >= a) = 2 r^a / (1 + r).
    a = int(np.ceil(5 * lat.t))
    p_tail = 2 * r ** a / (1 + r)
    assert stats.binomtest(int(np.count_nonzero(np.abs(z) >= a)), n, p_tail).pvalue > ALPHA
    # Symmetry: sign balance among non-zero samples.
    nz = z[z != 0]
    assert stats.binomtest(int(np.count_nonzero(nz > 0)), len(nz), 0.5).pvalue > ALPHA


def test_chi_square_rejects_a_wrong_scale(posix_device) -> None:
    """The test has power: the same device samples fail against a 2% larger scale."""
    dev = posix_device.start()
    z = draw_samples(dev, SampleRequest(1_000_000, 2.0, 10, 1_000_000), progress=False)
    lat = make_lattice(10, 1_000_000, 2.0, 0.0, 1.0)
    assert dlap.chi_square(z, lat.inv_t / 1.02).pvalue < ALPHA
