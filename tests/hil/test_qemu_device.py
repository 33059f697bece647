"""Hardware-in-loop: the test image in QEMU over a real TCP serial link (one QEMU per session)."""
from __future__ import annotations


import numpy as np
import pytest

from edgedp.device import frames, protocol as P
from edgedp.device.errors import DeviceError, ErrorCode
from edgedp.device.protocol import Caps, MechConfig
from edgedp.device.verify import replay
from edgedp.mech.lattice import MICRO

from ..native.test_protocol_robustness import CASES

pytestmark = pytest.mark.hil
X = np.array([0.05, 0.7, 0.25])


def test_info_describes_the_test_image(qemu) -> None:
    i = qemu.info()
    assert (i.board, i.build, i.entropy, i.max_classes) == ("qemu-netduinoplus2", "test", "ok", 1024)
    assert (i.tick_kind, i.tick_hz) == ("systick", 168_000_000)


def test_thousand_queries_bit_exact(qemu, test_key: bytes) -> None:
    res = replay(qemu, test_key, 1000, seed=11, progress=False)
    assert res.queries == 1000
    assert res.mismatches == 0, res.first_mismatch


def test_budget_exhaustion_refuses_external_but_not_local(qemu, test_key: bytes) -> None:
    qemu.configure(test_key, MechConfig(MICRO // 2), Caps(daily=2 * MICRO))
    for i in range(4):
        r = qemu.query(X, "label")
        assert r.remaining_micro == 2_000_000 - (i + 1) * 500_000
    with pytest.raises(DeviceError) as e:
        qemu.query(X, "label")
    assert e.value.code == "ERR_BUDGET"
    label = qemu.local(X).label
    assert label == 1
    assert qemu.budget().daily_spent == 2_000_000


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_frames_get_errors_and_the_device_goes_on(qemu, name: str) -> None:
    wire, seq, code = CASES[name]
    qemu.send_raw(wire)
    f = qemu.receive()
    assert f.type == P.ERROR and f.seq == seq
    assert ErrorCode(f.body[0]).name == code
    assert qemu.ping(b"next") == b"next"


def test_random_garbage_then_valid_request(qemu) -> None:
    rng = np.random.default_rng(5)
    qemu.send_raw(rng.bytes(5000))
    qemu.sync()
    assert qemu.query(X, "full").k == 3


def test_query_carries_ticks_and_remaining(qemu) -> None:
    r = qemu.query(np.full(10, 0.1), "full")
    assert r.ticks > 0
    assert r.remaining_micro == qemu.budget().remaining


def test_seq_is_echoed(qemu) -> None:
    qemu.send_raw(frames.encode(P.PING, 0xBEEF, b"s"))
    f = qemu.receive()
    assert (f.seq, f.body) == (0xBEEF, b"s")
