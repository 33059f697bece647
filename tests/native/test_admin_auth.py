"""Authenticated administration on the native device: STATE, tagged admin answers, and what the
host does when an answer never comes (issue 17 items 1 and 2)."""
from __future__ import annotations

import pytest

from edgedp import schema as S
from edgedp.device import admin, frames, protocol as P
from edgedp.device.errors import DeviceError, NotAuthentic, StateMismatch, StateUnknown
from edgedp.device.protocol import Caps, MechConfig
from edgedp.mech.lattice import MICRO

pytestmark = pytest.mark.native


class DroppingLink:
    """Passes everything through except admin frames, which it keeps (a withholding MITM)."""

    def __init__(self, link):
        self.link, self.kept = link, []

    def write(self, data: bytes) -> None:
        f = frames.decode(data.rstrip(b"\x00")) if data.strip(b"\x00") else None
        if f is not None and f.type in P.ADMIN_TYPES:
            self.kept.append(data)
            return
        self.link.write(data)

    def read(self, timeout: float) -> bytes:
        return self.link.read(timeout)

    def close(self) -> None:
        self.link.close()


def test_state_is_fresh_tagged_and_draws_a_nonce(host_device, test_key: bytes) -> None:
    dev = host_device.start()
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


def test_a_timeout_after_the_signed_frame_is_state_unknown_and_the_frame_dies(host_device, test_key: bytes) -> None:
    dev = host_device.start()
    dev.timeout = 1.0
    drop = DroppingLink(dev.link)
    dev.link = drop
    with pytest.raises(StateUnknown, match="did not take effect.*can no longer land") as e:
        admin.run(dev, test_key, P.RESET_BUDGET, lambda b: b"", lambda before, after: None)
    assert e.value.exit_code == 6
    dev.link = drop.link
    before = dev.state(test_key).budget
    dev.send_raw(drop.kept[0])  # delivered late: its nonce was redrawn by the re-read
    ans = P.AdminAnswer.parse(dev.receive().body)
    assert ans.result == S.ErrorCode.ERR_AUTH and dev.state(test_key).budget == before


def test_accepted_command_is_checked_against_the_state_after(host_device, test_key: bytes) -> None:
    dev = host_device.start()
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
