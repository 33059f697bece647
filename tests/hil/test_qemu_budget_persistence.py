"""Issue 3 on the emulated MCU: resets, clock tricks, and unauthenticated or replayed admin commands."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from edgedp.device import frames, protocol as P
from edgedp.device.client import Device
from edgedp.device.errors import DeviceError

from ..conftest import DAY

pytestmark = pytest.mark.hil
X = np.array([0.3, 0.3, 0.4])


def exhaust(dev: Device, key: bytes, cap: float = 3.0) -> None:
    dev.configure(key, 1.0, daily_cap=cap)
    for _ in range(int(cap)):
        dev.query(X, "label")
    with pytest.raises(DeviceError, match="ERR_BUDGET"):
        dev.query(X, "label")


def reboot(dev: Device) -> Device:
    dev.target.reset()  # QMP system_reset: the MCU restarts, .noinit RAM survives
    fresh = Device(dev.link, timeout=20, target=dev.target)
    fresh.sync()
    return fresh


def test_reset_does_not_restore_budget(qemu, test_key: bytes) -> None:
    exhaust(qemu, test_key)
    lifetime = qemu.budget().lifetime_spent
    dev = reboot(qemu)
    b = dev.budget()
    assert b.store == "loaded"
    assert b.daily_spent == 3_000_000 and b.lifetime_spent == lifetime
    with pytest.raises(DeviceError, match="ERR_BUDGET"):
        dev.query(X, "label")


def test_clock_back_resets_nothing_and_forward_resets_only_the_day(qemu, test_key: bytes) -> None:
    exhaust(qemu, test_key)
    lifetime = qemu.budget().lifetime_spent
    day = qemu.budget().day
    qemu.set_time(test_key, qemu.epoch - DAY)
    b = qemu.budget()
    assert b.daily_spent == 3_000_000 and b.recorded_day == day
    with pytest.raises(DeviceError, match="ERR_BUDGET"):
        qemu.query(X, "label")
    qemu.set_time(test_key, qemu.epoch + DAY + 60)
    b = qemu.budget()
    assert b.day == day + 1 and b.daily_spent == 0 and b.lifetime_spent == lifetime
    qemu.query(X, "label")
    assert qemu.budget().lifetime_spent == lifetime + 1_000_000


def test_lifetime_cap_is_enforced_across_days(qemu, test_key: bytes) -> None:
    spent = qemu.budget().lifetime_spent
    qemu.configure(test_key, 1.0, daily_cap=100.0, lifetime_cap=spent / 1e6 + 2.0)
    qemu.query(X)
    qemu.query(X)
    with pytest.raises(DeviceError, match="ERR_BUDGET"):
        qemu.query(X)
    qemu.set_time(test_key, qemu.epoch + 5 * DAY)
    with pytest.raises(DeviceError, match="ERR_BUDGET"):
        qemu.query(X)


def test_forged_admin_commands_are_refused_and_change_nothing(qemu, test_key: bytes) -> None:
    exhaust(qemu, test_key)
    before = qemu.budget()
    wrong = bytes(32)
    for type_, payload in [(P.RESET_BUDGET, b""), (P.CONFIG, P.config_payload(1.0, 1e6, None, 0, 1, 2)),
                           (P.SET_TIME, struct.pack("<Q", qemu.epoch + 9 * DAY)), (P.TEST_SEED, bytes(32))]:
        with pytest.raises(DeviceError, match="ERR_AUTH"):
            qemu.admin(type_, payload, wrong)
    # A valid tag over one command does not authorise another type.
    body = P.admin_body(P.CONFIG, before.auth_counter + 1, b"", test_key)
    qemu.send_raw(frames.encode(P.RESET_BUDGET, 77, body))
    f = qemu.receive()
    assert f.type == P.ERROR and f.body[0] == 9
    assert qemu.budget() == before


def test_replayed_admin_command_is_refused(qemu, test_key: bytes) -> None:
    exhaust(qemu, test_key)
    seq, wire = qemu.admin_frame(P.RESET_BUDGET, b"", test_key)
    qemu.send_raw(wire)  # the genuine command, captured by an attacker on the wire
    assert qemu.receive().type == P.RESET_BUDGET | P.RESPONSE
    for _ in range(3):
        qemu.query(X, "label")
    before = qemu.budget()
    qemu.send_raw(wire)  # replayed
    f = qemu.receive()
    assert f.type == P.ERROR and f.body[0] == 10  # ERR_REPLAY
    assert qemu.budget() == before
    # Replays across a reset are refused too: the counter is in the store.
    dev = reboot(qemu)
    dev.send_raw(wire)
    assert dev.receive().body[0] == 10
    # An older counter with a valid tag is a replay as well.
    with pytest.raises(DeviceError, match="ERR_REPLAY"):
        dev.admin(P.RESET_BUDGET, b"", test_key, counter=1)
