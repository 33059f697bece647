"""The Thumb-2 sampling loop gives the reference's noise, and zeroes the keystream it reads, in every
FPSCR rounding mode (and with flush-to-zero and default-NaN set).

edp_dlap_noisy (firmware/core/src/arch/armv7m/dlap_armv7m.c) keeps a zero in s17 that it stores
over each keystream word it reads and into the DRBG's acc low word. Made as scale2 - scale2 it is
-0.0 (0x80000000) when FPSCR rounds toward minus infinity (RMode 0b10, bits 23:22): the consumed
words stayed in RAM as 0x80000000 and a stray 1 bit entered the bit stream through acc, so samples
left the bit-exact reference (with it, under RMode 0b10: 2 of the 1,000 SAMPLE draws at eps = 10
off, and words 0x80000000 left after every request). The QEMU test image runs in Unicorn with FPSCR set before the
requests (it holds for the whole request, as if the application had set it).

Nothing else in a request may legitimately change with these bits, so every output is compared
whole: the plan's set-up computes in double (software floating point on the Cortex-M4, which
ignores FPSCR) and its float operations multiply by powers of two; the quantisation multiplies x
by scale2 = 2^(m + 1), exact for every normal product, and vcvt.s32.f32 always rounds toward zero;
flush-to-zero can turn a subnormal x (or product) into 0 only where the truncation gives 0 anyway;
default-NaN has no NaN to act on (the inputs are checked finite). SAMPLE (x = 0, scale2 = 0)
covers the k = 1 noise draw by draw, FULL queries at k = 1 and 10 the quantise-and-add path."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ..helpers import require

require("unicorn", "capstone", "elftools")  # edgedp.bench runs the image in Unicorn

from unicorn.arm_const import UC_ARM_REG_FPSCR

from edgedp.bench.trace import Emulator, TraceLink
from edgedp.device.client import Device
from edgedp.device.protocol import Caps, MechConfig, SampleRequest
from edgedp.mech.reference import ReferenceDevice

RMODE_SHIFT = 22       # FPSCR.RMode, bits 23:22 (ARMv7-M ARM, A2.5.3)
FZ, DN = 1 << 24, 1 << 25
MODES = {"nearest": 0, "plus-inf": 1 << RMODE_SHIFT, "minus-inf": 2 << RMODE_SHIFT, "zero": 3 << RMODE_SHIFT,
         "minus-inf-fz-dn": (2 << RMODE_SHIFT) | FZ | DN}


def keystream_residue(emu: Emulator) -> tuple[list[int], int]:
    """Nonzero words of the DRBG's batch before its next unread word (the wiped key words and the
    words read), and acc's bits below its nbits valid ones (drbg.h: both must be zero)."""
    img = emu.image
    drbg = emu.device + img.offset("edp_dev_t", "drbg")
    block, word = drbg + img.offset("edp_drbg_t", "block"), drbg + img.offset("edp_drbg_t", "word")
    used = int(np.frombuffer(emu.uc.mem_read(word, 4), dtype="<u4")[0])
    words = np.frombuffer(emu.uc.mem_read(block, 4 * used), dtype="<u4")
    acc = int(np.frombuffer(emu.uc.mem_read(drbg + img.offset("edp_drbg_t", "acc"), 8), dtype="<u8")[0])
    nbits = int(np.frombuffer(emu.uc.mem_read(drbg + img.offset("edp_drbg_t", "nbits"), 4), dtype="<u4")[0])
    return [int(w) for w in words if w], acc & ((1 << (64 - nbits)) - 1)


@pytest.fixture(scope="module")
def booted(qemu_elf: Path) -> Emulator:
    """One boot for the modes (each test seeds its own stream with TEST_SEED, which empties the
    batch and acc, and sets FPSCR first)."""
    return Emulator(qemu_elf)


@pytest.mark.parametrize("fpscr", MODES.values(), ids=MODES.keys())
def test_noise_is_the_references_in_every_rounding_mode(booted: Emulator, test_key: bytes, fpscr: int) -> None:
    emu = booted
    emu.uc.reg_write(UC_ARM_REG_FPSCR, fpscr)
    assert emu.uc.reg_read(UC_ARM_REG_FPSCR) & (0xF << RMODE_SHIFT) == fpscr  # Unicorn took the bits
    dev = Device(TraceLink(emu))
    seed = bytes(range(90, 122))
    dev.test_seed(test_key, seed)
    ref = ReferenceDevice(seed=seed)
    drawn = 0
    for eps_micro in (10_000_000, 1_000_000, 100_000):
        req = SampleRequest(eps_micro, 2.0, 1, 1000)
        got, want = dev.sample(req).noise, ref.sample(req).noise
        assert (got == want).all(), (eps_micro, int((got != want).sum()))
        assert keystream_residue(emu) == ([], 0), eps_micro
        drawn += len(got)
    cfg = MechConfig(5_000_000)
    dev.configure(test_key, cfg, Caps(daily=10**12))
    ref.configure(cfg)
    rng = np.random.default_rng(fpscr)
    for k in (1,) * 30 + (10,) * 10:
        x = rng.dirichlet(np.ones(k)).astype(np.float32)
        assert dev.query(x, "full").same_answer(ref.query(x, "full")), k
        assert keystream_residue(emu) == ([], 0), k
        drawn += k
    assert drawn == 3000 + 130
    assert emu.uc.reg_read(UC_ARM_REG_FPSCR) & (0xF << RMODE_SHIFT) == fpscr  # still the mode under test
