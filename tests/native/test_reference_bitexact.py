"""The native build of the firmware against the NumPy reference, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from edgedp.device.protocol import Caps, MechConfig, SampleRequest
from edgedp.device.verify import replay
from edgedp.mech.reference import ReferenceDevice

pytestmark = pytest.mark.native


@pytest.mark.slow  # 5,000 sanitized round trips
def test_five_thousand_varied_queries_bit_exact(posix_device, test_key: bytes) -> None:
    """Half of the 10,000-query replay; test_reference_bitexact_more.py runs the other half
    (another seed) so that pytest-xdist's --dist loadfile can put the halves on two workers."""
    dev = posix_device.start()
    res = replay(dev, test_key, 5_000, seed=7, progress=False)
    assert res.queries == 5_000
    assert res.mismatches == 0, res.first_mismatch
    assert len(res.by_mode) == 8  # every mode exercised


def test_raw_samples_bit_exact(posix_device, test_key: bytes) -> None:
    dev = posix_device.start()
    seed = bytes(range(7, 39))
    dev.test_seed(test_key, seed)
    ref = ReferenceDevice(seed=seed)
    for eps_micro, sens, k in [(1_000_000, 2.0, 10), (250_000, 1.0, 100), (10_000_000, 2.0, 1)]:
        req = SampleRequest(eps_micro, sens, k, 1024)
        got, want = dev.sample(req), ref.sample(req)
        assert (got.m, got.J) == (want.m, want.J) and (got.noise == want.noise).all()


def test_reference_detects_a_different_stream(posix_device, test_key: bytes) -> None:
    """Guard against a vacuous comparison: another seed gives other answers."""
    dev = posix_device.start()
    dev.test_seed(test_key, bytes(32))
    ref = ReferenceDevice(seed=bytes([1]) + bytes(31))
    req = SampleRequest(1_000_000, 2.0, 10, 64)
    assert not (dev.sample(req).noise == ref.sample(req).noise).all()


def test_simplex_sums_to_one_on_any_range(posix_device, test_key: bytes) -> None:
    """SIMPLEX output is a probability vector even when [lo, hi] does not contain [0, 1]."""
    dev = posix_device.start()
    for lo, hi in [(0.25, 0.5), (0.0, 30.0), (-2.0, 0.5)]:
        dev.configure(test_key, MechConfig(lo=lo, hi=hi), Caps(daily=10**12))
        for seed in range(5):
            r = dev.query(np.random.default_rng(seed).uniform(lo, hi, 7), "simplex")
            assert (r.lattice >= 0).all() and r.lattice.sum() == 2 ** r.m


def test_round_mode_refuses_values_beyond_int32_on_both_sides(posix_device, test_key: bytes) -> None:
    """Range [0, 10000], m = 0: ROUND:6 would put 10^10 on the int32 wire (it wrapped to
    10^10 mod 2^32). Device and reference both refuse it, before charging or drawing noise;
    ROUND:5 (10^9 fits) still answers bit for bit."""
    from edgedp.device.errors import DeviceError, ErrorCode
    from edgedp.mech import modes

    dev = posix_device.start()
    seed = bytes(range(32))
    dev.test_seed(test_key, seed)
    cfg = MechConfig(lo=0.0, hi=10000.0, sensitivity=2.0, m=0)
    dev.configure(test_key, cfg, Caps(daily=10**12))
    ref = ReferenceDevice(cfg, seed)
    x = np.full(3, 10000.0)
    spent = dev.budget().daily_spent
    with pytest.raises(DeviceError) as err:
        dev.query(x, "round:6")
    assert err.value.error == ErrorCode.ERR_BAD_VALUE
    with pytest.raises(ValueError, match="overflow int32"):
        ref.query(x, "round:6")
    assert dev.budget().daily_spent == spent  # refused before the charge
    got, want = dev.query(x, "round:5"), ref.query(x, "round:5")  # same stream: nothing was drawn
    assert np.array_equal(got.lattice, want.lattice)
    assert int(want.lattice.max()) <= modes.INT32_MAX
    # negative end and a coarse lattice (m = -30: values up to 2^24 * 10^6 * 2^30 overflow int64 too)
    coarse = MechConfig(lo=-3e9, hi=1.0, sensitivity=2e9, m=-30)
    dev.configure(test_key, coarse, Caps(daily=10**12))
    with pytest.raises(DeviceError) as err:
        dev.query(np.zeros(2), "round:6")
    assert err.value.error == ErrorCode.ERR_BAD_VALUE
    lat = coarse.lattice(2)
    assert not modes.round_fits(lat, 6) and modes.round_fits(lat, 0)
