"""Fail closed: with entropy, clock or store unusable, no external answer — but PING, INFO,
BUDGET and the local path keep working (native port, faults injected through its environment)."""
from __future__ import annotations

import numpy as np
import pytest

from edgedp.device.errors import DeviceError
from edgedp.device.protocol import Caps, MechConfig, SampleRequest
from edgedp.mech.lattice import MICRO

pytestmark = pytest.mark.native
X = np.array([0.2, 0.5, 0.3])


def assert_closed(dev, code: str) -> None:
    for mode in ("full", "label", "topk:2", "bucket", "round:1", "simplex"):
        with pytest.raises(DeviceError) as e:
            dev.query(X, mode)
        assert e.value.code == code
    assert dev.ping(b"up") == b"up"
    assert dev.info().board == "posix"
    assert dev.budget().daily_spent == 0
    assert dev.local(X).label == 1


def test_entropy_failure_refuses_external_output(posix_device) -> None:
    dev = posix_device.start(EDP_POSIX_ENTROPY="fail")
    assert dev.info().entropy == "failed"
    assert_closed(dev, "ERR_ENTROPY")


def test_untrusted_clock_refuses_external_output(posix_device, test_key: bytes) -> None:
    dev = posix_device.start(EDP_POSIX_TIME="unset")
    assert dev.info().time_ok is False and dev.budget().day is None
    assert_closed(dev, "ERR_TIME")
    dev.set_time(test_key, 1_800_000_000)  # an authenticated clock makes it answer again
    assert dev.query(X, "label").label in (0, 1, 2)


def test_no_device_key_refuses_every_admin_command(posix_device, test_key: bytes) -> None:
    dev = posix_device.start(EDP_POSIX_KEY="none")
    with pytest.raises(DeviceError, match="ERR_AUTH"):
        dev.configure(test_key, MechConfig(5 * MICRO), Caps(daily=10**12))
    assert dev.budget().epsilon_micro == 1_000_000


def test_test_seed_changes_the_stream_only_when_authenticated(posix_device, test_key: bytes) -> None:
    dev = posix_device.start()
    with pytest.raises(DeviceError, match="ERR_AUTH"):
        dev.test_seed(bytes(32), bytes(32))
    req = SampleRequest(MICRO, 2.0, 10, 8)
    a = dev.sample(req).noise
    dev.test_seed(test_key, bytes(range(1, 33)))
    b = dev.sample(req).noise
    dev.test_seed(test_key, bytes(range(1, 33)))
    assert (dev.sample(req).noise == b).all() and not (a == b).all()
