"""The native build of the firmware against the NumPy reference, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from edgedp.device.verify import replay
from edgedp.mech.reference import ReferenceDevice

pytestmark = pytest.mark.native


def test_ten_thousand_varied_queries_bit_exact(host_device, test_key: bytes) -> None:
    dev = host_device.start()
    res = replay(dev, test_key, 10_000, seed=7, progress=False)
    assert res.queries == 10_000
    assert res.mismatches == 0, res.first_mismatch
    assert len(res.by_mode) == 8  # every mode exercised


def test_raw_samples_bit_exact(host_device, test_key: bytes) -> None:
    dev = host_device.start()
    seed = bytes(range(7, 39))
    dev.test_seed(test_key, seed)
    ref = ReferenceDevice(seed)
    for eps, sens, k in [(1.0, 2.0, 10), (0.25, 1.0, 100), (10.0, 2.0, 1)]:
        _, _, z = dev.sample(eps, sens, k, 1024)
        _, want = ref.sample(round(eps * 1e6), sens, k, 1024)
        assert (z == want).all()


def test_reference_detects_a_different_stream(host_device, test_key: bytes) -> None:
    """Guard against a vacuous comparison: another seed gives other answers."""
    dev = host_device.start()
    dev.test_seed(test_key, bytes(32))
    ref = ReferenceDevice(bytes([1]) + bytes(31))
    _, _, z = dev.sample(1.0, 2.0, 10, 64)
    assert not (z == ref.sample(1_000_000, 2.0, 10, 64)[1]).all()


def test_simplex_sums_to_one_on_any_range(host_device, test_key: bytes) -> None:
    """SIMPLEX output is a probability vector even when [lo, hi] does not contain [0, 1]."""
    dev = host_device.start()
    for lo, hi in [(0.25, 0.5), (0.0, 30.0), (-2.0, 0.5)]:
        dev.configure(test_key, 1.0, 1e6, None, lo, hi, 2.0)
        for seed in range(5):
            r = dev.query(np.random.default_rng(seed).uniform(lo, hi, 7), "simplex")
            assert (r.lattice >= 0).all() and r.lattice.sum() == 2 ** r.m
