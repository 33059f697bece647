"""Issues 3 and 9 on the emulated MCU: resets, clock tricks, unauthenticated or replayed admin commands,
store loss with the flash high-water log."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from ..helpers import DAY, TEST_EPOCH, require

require("elftools")  # the image's sections

from elftools.elf.elffile import ELFFile

from edgedp import schema as S
from edgedp.device import frames, protocol as P
from edgedp.device.client import Device
from edgedp.device.errors import DeviceError, ErrorCode
from edgedp.device.protocol import Caps, MechConfig
from edgedp.device.targets.qemu import QemuTarget, ensure_image
from edgedp.mech.lattice import MICRO, to_micro


pytestmark = pytest.mark.hil
X = np.array([0.3, 0.3, 0.4])


def exhaust(dev: Device, key: bytes, cap: float = 3.0) -> None:
    dev.configure(key, MechConfig(), Caps(daily=to_micro(cap)))
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
    qemu.configure(test_key, MechConfig(), Caps(daily=100 * MICRO, lifetime=spent + 2 * MICRO))
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
    for type_, payload in [(P.RESET_BUDGET, b""), (P.CONFIG, P.config_payload(MechConfig(), Caps(daily=10**12))),
                           (P.SET_TIME, struct.pack("<Q", qemu.epoch + 9 * DAY)), (P.TEST_SEED, bytes(32))]:
        with pytest.raises(DeviceError, match="ERR_AUTH"):
            qemu.admin(type_, payload, wrong)
    # A valid tag over one command does not authorise another type.
    ch = qemu.challenge(test_key)
    body = P.admin_body(P.CONFIG, ch.nonce, ch.counter + 1, b"", test_key)
    qemu.send_raw(frames.encode(P.RESET_BUDGET, 77, body))
    f = qemu.receive()
    assert refused_auth(f)
    assert qemu.budget() == before


def refused_auth(f: frames.Frame) -> bool:
    """The device's tagged admin answer with result ERR_AUTH (the frame changed nothing)."""
    return (f.type & ~P.RESPONSE) in P.ADMIN_TYPES and bool(f.type & P.RESPONSE) and \
        P.AdminAnswer.parse(f.body).result == ErrorCode.ERR_AUTH


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
    assert refused_auth(f)  # ERR_AUTH: signed for a nonce already used
    assert qemu.budget() == before
    # Replays across a reset are refused too: a new nonce at every boot.
    dev = reboot(qemu)
    dev.send_raw(wire)
    assert dev.receive().body[0] == 9
    # An older counter with a valid tag is a replay as well.
    with pytest.raises(DeviceError, match="ERR_REPLAY"):
        dev.admin(P.RESET_BUDGET, b"", test_key, counter=1)


def test_captured_config_is_refused_by_a_fresh_device(qemu, test_key: bytes) -> None:
    """Issue 9.1: capture the CONFIG that `edgedp admin config` sends (Device.configure's frame),
    then boot a fresh device (a new QEMU process: store and RAM flash model lost, as a dead
    VBAT would lose the store) and replay the captured bytes: refused."""
    payload = P.config_payload(MechConfig(eps_micro=4 * MICRO), Caps(daily=10**6 * MICRO))
    seq, wire = qemu.admin_frame(P.CONFIG, payload, test_key)
    qemu.send_raw(wire)
    assert qemu.receive().type == P.CONFIG | P.RESPONSE
    fresh = QemuTarget.from_spec("qemu")
    try:
        dev = Device(fresh.link(), timeout=20, target=fresh)
        dev.sync()
        before = dev.budget()
        assert before.store == "fresh" and before.lifetime_spent == 0
        dev.send_raw(wire)
        f = dev.receive()
        assert refused_auth(f), "the replayed CONFIG was accepted"  # ERR_AUTH
        assert dev.budget() == before
        # The genuine operator path still works on the fresh device.
        dev.configure(test_key, MechConfig(eps_micro=4 * MICRO), Caps(daily=10**6 * MICRO))
        assert dev.budget().epsilon_micro == 4_000_000
    finally:
        fresh.close()


def test_warm_reset_draws_a_new_nonce_and_keeps_spend(qemu, test_key: bytes) -> None:
    for _ in range(3):
        qemu.query(X, "label")
    before = qemu.budget()
    ch = qemu.challenge(test_key)
    dev = reboot(qemu)
    assert dev.budget().lifetime_spent >= before.lifetime_spent
    assert dev.challenge(test_key).nonce != ch.nonce  # new nonce after every boot


def store_address(elf) -> tuple[int, int]:
    """Address and size of the qemu port's .noinit store (static `store` in ports/qemu/board.c)."""
    with open(elf, "rb") as f:
        sym = ELFFile(f).get_section_by_name(".symtab").get_symbol_by_name("store")[0]
        return sym["st_value"], sym["st_size"]


def test_store_lost_at_every_reset_keeps_spend_and_counter_from_flash(test_key: bytes) -> None:
    """A board with VBAT tied to VDD: every power cycle loses the store. Emulated with QEMU's
    generic loader zeroing the .noinit store at every reset, while the RAM model of the flash
    log (also .noinit) survives: spend and counter come back from the flash mark, never 0, and
    the rate limit from its rate record, with an empty bucket."""
    elf = ensure_image("qemu")
    addr, size = store_address(elf)
    assert size == S.STORE_SIZE  # the record slots and the audit ring, lost together
    wipe = [a for i in range(0, size, 8) for a in ("-device", f"loader,addr={addr + i:#x},data=0,data-len=8")]
    t = QemuTarget(elf, 1, "qemu-store-lost", extra_args=wipe)
    try:
        dev = Device(t.link(), timeout=20, target=t)
        dev.sync()
        dev.configure(test_key, MechConfig(), Caps(daily=1000 * MICRO))
        for _ in range(30):  # two reservation records (edgedp/options.h, EDP_FLOG_RESERVE)
            dev.query(X, "label")
        limit = P.Rate(2, 1, 0)  # a full bucket of 2 after the RATE, one answer a minute
        dev.admin(P.RATE, limit.pack(), test_key)
        before = dev.budget()
        assert before.lifetime_spent == 30_000_000
        seq, wire = dev.admin_frame(P.RESET_BUDGET, b"", test_key)
        t.reset()
        dev = Device(t.link(), timeout=20, target=t)
        dev.sync()
        after = dev.budget()
        assert dev.info().store == "fresh", "the store was not lost: the test emulates nothing"
        assert after.lifetime_spent >= before.lifetime_spent, "store loss gave back lifetime budget"
        assert after.daily_spent >= before.daily_spent
        assert after.auth_counter >= before.auth_counter
        dev.send_raw(wire)  # signed before the power cycle, never sent
        assert dev.receive().body[0] == 9
        # the reserved spend comes back: at most a reservation's worth (16 answers) more
        assert after.lifetime_spent <= before.lifetime_spent + 16_000_000
        assert dev.info().rate == limit, "the store loss lifted the rate limit"
        with pytest.raises(DeviceError, match="ERR_RATE"):  # the bucket is empty, not full
            dev.query(X, "label")
        dev.set_time(test_key, TEST_EPOCH + 2 * DAY)  # the authenticated clock refills it
        dev.query(X, "label")
        assert dev.budget().lifetime_spent == after.lifetime_spent + 1_000_000
    finally:
        t.close()
