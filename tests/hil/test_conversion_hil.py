"""QEMU -icount ticks against a loop of known length, and the naive baseline's sanity.

A freshly booted QEMU and a freshly booted Unicorn copy of the same ELF get the same frames;
Unicorn counts every instruction of the measured DP step (and of the NAIVE loop) exactly, so
QUERY/NAIVE ticks / 1.344 must equal those counts up to the SysTick's rounding (< 1), plus
the SysTick wrap handler QEMU runs when the 24-bit counter wraps inside the window (5
instructions, about once per 12.5 M instructions; Unicorn takes no interrupts). Checks the
conversion, not the speed."""
from __future__ import annotations

import numpy as np
import pytest

from ..helpers import require

require("unicorn", "capstone", "elftools")  # edgedp.bench's icount and trace modules

from edgedp.bench import icount
from edgedp.bench.trace import TraceLink
from edgedp.device.client import Device, connect
from edgedp.device.protocol import Caps, MechConfig
from edgedp.device.targets import start_target

pytestmark = pytest.mark.hil
TOLERANCE = 1 + 5  # SysTick rounding + one SysTick_Handler (wraps++) inside the window


@pytest.fixture
def twins(qemu_elf, emulator):
    t = start_target("qemu")
    try:
        dev = connect(t, timeout=60.0, sync_timeout=20.0)
        yield dev, Device(TraceLink(emulator)), emulator, icount.tick_unit(dev.info(), t.name)
    finally:
        t.close()


def test_ticks_convert_to_traced_instructions(twins, test_key: bytes) -> None:
    dev, twin, emu, unit = twins
    assert unit.counts_instructions
    for d in (dev, twin):
        d.configure(test_key, MechConfig(), Caps(daily=10**12))
    emu.steps()
    seen = []
    for k in (1, 10, 10, 100, 333):
        x = np.linspace(0, 1, k, dtype=np.float32)
        got, want = dev.query(x), twin.query(x)
        (step,) = emu.steps()
        assert np.array_equal(got.lattice, want.lattice)  # same state: same stream, same path
        assert abs(unit.instructions(got.ticks) - step.instructions) <= TOLERANCE, (k, got.ticks, step.instructions)
        seen.append(step.instructions)
    assert len(set(seen)) > 3  # genuinely different loop lengths were checked
    for k in (10, 100):
        x = np.full(k, 0.5, dtype=np.float32)
        t = dev.naive(x, 0.2).ticks
        twin.naive(x, 0.2)
        (step,) = emu.steps()
        assert abs(unit.instructions(t) - step.instructions) <= TOLERANCE


def test_naive_baseline_is_sane(twins) -> None:
    dev, _, _, unit = twins
    x = np.full(1000, 0.5, dtype=np.float32)
    naive = dev.naive(x, 0.05)
    t1000, y = naive.ticks, naive.outputs  # b = 0.05: the 4b noise clamp and [0, 1] never bind at 0.5
    assert y.shape == (1000,) and np.all((y >= 0) & (y <= 1))
    assert abs(float(np.mean(np.abs(y - 0.5))) - 0.05) < 0.01  # E|Laplace(b)| = b
    assert abs(float(np.mean(y)) - 0.5) < 0.01
    t10 = dev.naive(x[:10], 0.05).ticks
    per_class_1000 = unit.instructions(t1000) / 1000
    per_class_10 = unit.instructions(t10) / 10
    assert 30 < per_class_1000 < 1000  # a rand() + logf per class: tens to hundreds of instructions
    assert per_class_10 == pytest.approx(per_class_1000, rel=0.25)  # linear in k
