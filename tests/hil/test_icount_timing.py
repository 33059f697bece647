"""The tick -> instruction conversion and the Cortex-M4 timing table (no emulator)."""
from __future__ import annotations

import pytest

from edgedp.bench import icount, timing
from edgedp.device.protocol import Info, Rate


def info(kind: str, hz: int = 168_000_000) -> Info:
    return Info("test", "loaded", True, True, kind, 1024, hz, Rate(), 0, "ok", "ok", None, "0.1.0", "qemu-netduinoplus2")


def test_systick_under_icount_counts_instructions() -> None:
    assert icount.ticks_per_instruction(168_000_000) == pytest.approx(1.344)
    unit = icount.tick_unit(info("systick"), "qemu")
    assert unit.counts_instructions
    # A loop of 200,000 instructions read 268,804 ticks under QEMU 7.2 -icount shift=3.
    assert unit.instructions(268_804) == pytest.approx(200_000, abs=4)
    assert unit.cycles(268_804) is None


def test_dwt_and_host_ticks_are_not_instructions() -> None:
    dwt = icount.tick_unit(info("dwt"), "/dev/ttyACM0")
    assert dwt.instructions(1000) is None and dwt.cycles(1000) == 1000
    host = icount.tick_unit(info("host-ns", 1_000_000_000), "host")
    assert host.instructions(1000) is None and host.seconds(1000) == pytest.approx(1e-6)


@pytest.mark.parametrize("mnemonic, ops, cycles", [
    ("add.w", "r0, r0, r1, ror #25", 1),
    ("eors", "r1, r2", 1),
    ("clz", "r0, r1", 1),
    ("umull", "r0, r1, r2, r3", 1),
    ("mla", "r0, r1, r2, r3", 2),
    ("udiv", "r0, r1, r2", 12),
    ("ldr", "r0, [r1, #4]", 2),
    ("ldrd", "r0, r1, [r2]", 3),
    ("push", "{r4, r5, r6, lr}", 5),
    ("vdiv.f32", "s0, s1, s2", 14),
    ("vmla.f32", "s0, s1, s2", 3),
    ("vcvt.s32.f32", "s0, s0", 1),
])
def test_timing_table(mnemonic: str, ops: str, cycles: int) -> None:
    nregs = 4 if mnemonic == "push" else 0
    assert timing.classify(mnemonic, ops, nregs).base == cycles


def test_branches_and_pc_writes() -> None:
    assert timing.classify("bne", "#0x8000000").branch
    assert timing.classify("b.w", "#0x8000000").fixed_fallthrough
    assert timing.classify("pop", "{r4, pc}", 2).writes_pc
    assert timing.classify("bx", "lr").writes_pc
    assert timing.classify("ldr", "r0, [pc, #8]").flash_load
