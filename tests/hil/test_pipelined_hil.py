"""Pipelined QUERY on the ARM image in QEMU over its TCP console: QEMU's USART model takes a
byte from the socket only once the firmware has read the previous one, so requests sent while
the device computes wait in the socket, none is dropped, and every answer is matched to its
request and bit-exact with the reference."""
from __future__ import annotations

import numpy as np
import pytest

from edgedp.device import protocol as P
from edgedp.device.client import Device
from edgedp.device.protocol import MechConfig
from edgedp.mech.reference import ReferenceDevice

from ..native.test_pipelined_queries import Recording

pytestmark = pytest.mark.hil


def test_pipelined_queries_over_qemu_are_bit_exact_and_in_order(qemu, test_key: bytes) -> None:
    seed = bytes(range(1, 33))
    qemu.test_seed(test_key, seed)
    ref = ReferenceDevice(MechConfig(), seed)
    rng = np.random.default_rng(9)
    rows = [rng.random(int(k), dtype=np.float32) for k in rng.choice([3, 10, 100], 40)]
    rec = Recording(qemu.link)
    assert rec.in_flight == 8
    dev = Device(rec, timeout=qemu.timeout)
    got = list(dev.query_many(rows, "full"))
    assert len(got) == len(rows)
    for x, r in zip(rows, got):
        assert isinstance(r, P.QueryResult) and r.same_answer(ref.query(x, "full"))
    assert rec.got == rec.sent and rec.ahead == 8
