"""Authenticated administration on the native device: STATE, tagged admin answers, and what the
host does when an answer never comes (issue 17 items 1 and 2)."""
from __future__ import annotations

import struct
import time
from collections import Counter

import numpy as np
import pytest

from edgedp import schema as S
from edgedp.device import admin, frames, protocol as P
from edgedp.device.errors import DeviceError, EdgeDPError, NotAuthentic, StateMismatch, StateUnknown
from edgedp.device.protocol import Caps, MechConfig
from edgedp.device.transport import LinkWrapper
from edgedp.mech.lattice import MICRO

from ..helpers import ROOT, TEST_EPOCH

pytestmark = pytest.mark.native


class DroppingLink(LinkWrapper):
    """Passes everything through except admin frames, which it keeps (a withholding MITM)."""

    def __init__(self, link):
        super().__init__(link)
        self.kept: list[bytes] = []

    def write(self, data: bytes) -> None:
        f = frames.decode(data.rstrip(b"\x00")) if data.strip(b"\x00") else None
        if f is not None and f.type in P.ADMIN_TYPES:
            self.kept.append(data)
            return
        self.inner.write(data)


def test_state_is_fresh_tagged_and_draws_a_nonce(posix_device, test_key: bytes) -> None:
    dev = posix_device.start()
    a, b = dev.state(test_key), dev.state(test_key)
    assert a.nonce != b.nonce and a.budget == b.budget == dev.budget()
    with pytest.raises(NotAuthentic):
        dev.state(bytes(32))
    # a STATE answer cannot be replayed: it is tagged over the host's random challenge
    body = dev.request(P.STATE, b"c" * 16)
    assert P.State.parse(body, test_key, b"c" * 16) is not None
    assert P.State.parse(body, test_key, b"d" * 16) is None
    with pytest.raises(DeviceError, match="ERR_LEN"):
        dev.request(P.STATE, b"short")


def test_a_timeout_after_the_signed_frame_is_state_unknown_and_the_frame_dies(posix_device, test_key: bytes) -> None:
    dev = posix_device.start()
    dev.timeout = 1.0
    drop = DroppingLink(dev.link)
    dev.link = drop
    with pytest.raises(StateUnknown, match="did not take effect.*can no longer land") as e:
        admin.run(dev, test_key, P.RESET_BUDGET, lambda b: b"", lambda before, after: None)
    assert e.value.exit_code == 6
    dev.link = drop.inner
    before = dev.state(test_key).budget
    dev.send_raw(drop.kept[0])  # delivered late: its nonce was redrawn by the re-read
    ans = P.AdminAnswer.parse(dev.receive().body)
    assert ans.result == S.ErrorCode.ERR_AUTH and dev.state(test_key).budget == before


def test_accepted_command_is_checked_against_the_state_after(posix_device, test_key: bytes) -> None:
    dev = posix_device.start()
    out = admin.run(dev, test_key, P.CONFIG, lambda b: P.config_payload(MechConfig(), Caps(3 * MICRO)),
                    lambda before, after: None if after.daily_cap == 3 * MICRO else "cap")
    assert out.counter == out.before.auth_counter + 1 == out.after.auth_counter and out.after.daily_cap == 3 * MICRO
    with pytest.raises(StateMismatch, match="not what was signed: cap") as e:
        admin.run(dev, test_key, P.CONFIG, lambda b: P.config_payload(MechConfig(), Caps(4 * MICRO)),
                  lambda before, after: "cap")
    assert e.value.exit_code == 5
    # a refusal tagged by the device is a DeviceError marked authenticated
    with pytest.raises(DeviceError, match="ERR_BAD_VALUE") as r:
        admin.run(dev, test_key, P.CONFIG, lambda b: P.config_payload(MechConfig(sensitivity=-1.0), Caps(MICRO)),
                  lambda before, after: None)
    assert r.value.authenticated


def _v1_record(seq: int, lifetime: int, counter: int) -> bytes:
    """A store record as firmware before the rate limit wrote it (version 1, 84 bytes)."""
    import zlib
    body = struct.pack("<IBBBBIIQQQQQIfffiI", 0x50444445, 1, 0, 84, 0, seq, 20454, 1000 * MICRO, 0, lifetime, lifetime,
                       counter, MICRO, 0.0, 1.0, 2.0, -128, 0)
    return body + struct.pack("<I", zlib.crc32(body))


def test_a_store_of_the_old_layout_loads_with_no_rate_limit(posix_device, test_key: bytes) -> None:
    """Version 1 records (no rate limit) load as they ran: spend, counter and caps kept, no limit;
    the next commit writes version 2."""
    rec = _v1_record(5, 7 * MICRO, 3)
    posix_device.store.write_bytes(rec + bytes(128 - len(rec)) + bytes(128))
    dev = posix_device.start()
    st = dev.state(test_key)
    assert dev.info().store == "loaded"
    assert (st.budget.lifetime_spent, st.budget.auth_counter, st.rate) == (7 * MICRO, 3, P.Rate())
    dev.query(np.array([0.2, 0.8], dtype=np.float32), "label")
    posix_device.stop()
    raw = posix_device.store.read_bytes()
    assert raw[128 + 4] == 2 and raw[128 + 6] == 112  # the commit went to the other slot, version 2
    assert posix_device.start().budget().lifetime_spent == 8 * MICRO


def test_rate_limit_refuses_with_the_wait_and_persists(posix_device, test_key: bytes) -> None:
    """A bucket of 2 answers refilled at 30 a minute, on the posix port's frozen clock: the third
    answer is refused with ERR_RATE and a 2 s wait, before any charge; a restart refills nothing
    (the bucket is committed with the spend); 2 s later (SET_TIME) one more answer passes."""
    x = np.array([0.2, 0.8], dtype=np.float32)
    dev = posix_device.start()
    admin.run(dev, test_key, P.RATE, lambda b: P.Rate(2, 30, 0).pack(), lambda b, a: None)
    dev.query(x, "label")
    dev.query(x, "label")
    spent = dev.budget().lifetime_spent
    with pytest.raises(DeviceError, match="ERR_RATE.*retry in 2 s") as e:
        dev.query(x, "label")
    assert e.value.wait == 2 and dev.budget().lifetime_spent == spent
    with pytest.raises(DeviceError, match="ERR_RATE"):
        dev.infer(np.zeros(64, dtype=np.float32), "label")  # refused before the model runs
    assert dev.info().rate == P.Rate(2, 30, 0) and dev.state(test_key).rate == P.Rate(2, 30, 0)
    dev = posix_device.start()
    with pytest.raises(DeviceError, match="ERR_RATE"):
        dev.query(x, "label")
    dev.set_time(test_key, TEST_EPOCH + 2)
    dev.query(x, "label")
    with pytest.raises(DeviceError, match="ERR_RATE"):
        dev.query(x, "label")
    # a tarpit delays the refusal; burst 0 lifts the limit
    admin.run(dev, test_key, P.RATE, lambda b: P.Rate(1, 0, 400).pack(), lambda b, a: None)
    dev.query(x, "label")
    t0 = time.monotonic()
    with pytest.raises(DeviceError, match="does not refill"):
        dev.query(x, "label")
    assert time.monotonic() - t0 >= 0.4
    with pytest.raises(DeviceError, match="ERR_BAD_VALUE"):
        dev.admin(P.RATE, struct.pack("<III", 1, 1, 2001), test_key)
    admin.run(dev, test_key, P.RATE, lambda b: P.Rate().pack(), lambda b, a: None)
    for _ in range(3):
        dev.query(x, "label")


def test_a_recovered_store_takes_a_token_with_the_extra_charge(posix_device, test_key: bytes) -> None:
    """The newest store slot damaged: the device loads the older one, whose bucket still held the
    token of the last answer, and counts that answer again, its ε and its token: a burst of 3 with
    one answer sent leaves 2, not 3, on the posix port's frozen clock."""
    x = np.array([0.2, 0.8], dtype=np.float32)
    dev = posix_device.start()
    admin.run(dev, test_key, P.RATE, lambda b: P.Rate(3, 1, 0).pack(), lambda b, a: None)
    dev.query(x, "label")
    posix_device.stop()
    raw = bytearray(posix_device.store.read_bytes())
    newest = max((0, 128), key=lambda s: struct.unpack_from("<I", raw, s + 8)[0])
    raw[newest + 20] ^= 0xFF
    posix_device.store.write_bytes(bytes(raw))
    dev = posix_device.start()
    assert dev.info().store == "recovered"
    dev.query(x, "label")
    dev.query(x, "label")
    with pytest.raises(DeviceError, match="ERR_RATE"):
        dev.query(x, "label")


def _budget_forbidden(dev) -> None:
    def forged():
        raise AssertionError("read the unauthenticated BUDGET answer where a key is at hand")
    dev.budget = forged


class CountingLink(LinkWrapper):
    """Passes everything through and counts the request frames by type (STATE answers can be
    corrupted on the way back: a device that does not hold the key checked)."""

    def __init__(self, link, corrupt_state: bool = False):
        super().__init__(link)
        self.sent, self.corrupt_state, self._reader = Counter(), corrupt_state, frames.FrameReader()

    def write(self, data: bytes) -> None:
        self.sent.update(f.type for f in frames.FrameReader().feed(data))
        self.inner.write(data)

    def read(self, timeout: float) -> bytes:
        out = b""
        for f in self._reader.feed(self.inner.read(timeout)):
            body = f.body
            if self.corrupt_state and f.type == P.STATE | P.RESPONSE:
                body = body[:-1] + bytes([body[-1] ^ 1])  # the tag: as if tagged with another key
            out += frames.encode(f.type, f.seq, body, f.version)
        return out


def counted(dev, corrupt_state: bool = False) -> Counter:
    dev.link = CountingLink(dev.link, corrupt_state)
    return dev.link.sent


KEY_FILE = str(ROOT / "tests/keys/test-device.key")


@pytest.mark.parametrize("key_file", [KEY_FILE, None])
def test_query_decides_on_config_from_one_authenticated_state(posix_device, test_key: bytes, key_file) -> None:
    """`query`'s set-up decides whether to sign a CONFIG from the device's configuration: from
    STATE (with --key-file's key, else the test images'), never from BUDGET, so a forged BUDGET
    cannot make it skip the CONFIG. The STATE it decided from gives the CONFIG its nonce: one
    STATE before, one after to check it."""
    from edgedp.cli.query import ensure_config
    dev = posix_device.start()
    _budget_forbidden(dev)
    sent = counted(dev)
    cfg, start = ensure_config(dev, key_file, 2.0, None, None, 10)
    assert cfg.eps_micro == 2 * MICRO and dev.state(test_key).budget.epsilon_micro == 2 * MICRO
    assert start is not None and start.epsilon_micro == 2 * MICRO  # the checked state the stream starts from
    assert (sent[P.STATE], sent[P.CONFIG], sent[P.CHALLENGE], sent[P.BUDGET]) == (2 + 1, 1, 0, 0)  # + the check here
    sent.clear()
    cfg, start = ensure_config(dev, key_file, 2.0, None, (0.0, 1.0), 10)  # already so: nothing signed
    assert start is not None and cfg.eps_micro == 2 * MICRO and (sent[P.STATE], sent[P.CONFIG], sent[P.BUDGET]) == (1, 0, 0)


def test_query_without_key_or_options_reads_budget_only(posix_device) -> None:
    """Nothing to sign or skip: the unauthenticated BUDGET serves the table and the clamping warning."""
    from edgedp.cli.query import ensure_config
    dev = posix_device.start()
    sent = counted(dev)
    cfg, start = ensure_config(dev, None, None, None, None, 10)
    assert cfg.eps_micro == MICRO and start is None  # no authenticated state: the spend cannot be checked
    assert (sent[P.BUDGET], sent[P.STATE], sent[P.CONFIG]) == (1, 0, 0)


@pytest.mark.parametrize("device", ["unprovisioned", "another key"])
def test_query_options_without_key_on_a_production_device_need_the_key(posix_device, device: str) -> None:
    """A device that does not authenticate its state with the test images' key (a production
    image: no key, ERR_AUTH; or its own key, a tag that does not check) gets no CONFIG and no
    query: the one-line NEEDS_KEY refusal (exit 8), whatever BUDGET would have said."""
    from edgedp.cli.query import ensure_config
    from edgedp.cli.exit_codes import ExitCode, for_exception
    dev = posix_device.start(**({"EDP_POSIX_KEY": "none"} if device == "unprovisioned" else {}))
    _budget_forbidden(dev)
    sent = counted(dev, corrupt_state=device == "another key")
    with pytest.raises(EdgeDPError, match="pass --key-file") as e:
        ensure_config(dev, None, 1.0, None, None, 10)  # the device's own ε: still not known to be
    assert e.value.code == "ERR_AUTH" and for_exception(e.value) == ExitCode.REFUSED
    assert sum(sent.values()) == sent[P.STATE] == 1


def test_audit_dp_signs_and_reports_from_the_authenticated_state(posix_device, test_key: bytes) -> None:
    from edgedp.analysis.audit_dp import prepare_device
    dev = posix_device.start()
    _budget_forbidden(dev)
    mech = prepare_device(dev, test_key, 10, 100, 1.5, seed=3)
    assert mech.epsilon == 1.5 and dev.state(test_key).budget.daily_cap >= 150 * MICRO
