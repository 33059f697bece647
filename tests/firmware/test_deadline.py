"""The release deadline's constants cover the compiled code (firmware/core/src/deadline.c).

The per-draw and per-refill constants must be at least twice the longest paths measured on the
image (edgedp.bench.deadline); whole windows of the production timing image, for every output
mode at k = 10 and k = 1000 and for INFER, must use at most half their deadline."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from edgedp.bench.deadline import firmware_constants, measure
from edgedp.bench.infer import install_model
from edgedp.bench.trace import Emulator, TraceLink
from edgedp.device.client import Device, load_key
from edgedp.device.protocol import Caps, MechConfig

from ..conftest import ROOT

SRC = ROOT / "firmware" / "core" / "src" / "deadline.c"
HDR = ROOT / "firmware" / "core" / "include" / "edgedp" / "deadline.h"
TIMING_ELF = ROOT / "build" / "qemu-timing" / "edgedp.elf"


@pytest.fixture(scope="module")
def worst():
    return measure(ROOT / "build" / "qemu" / "edgedp.elf")


def test_draw_and_refill_constants_are_twice_the_longest_paths(worst):
    c = firmware_constants(SRC) | firmware_constants(HDR)
    for nc in range(7):
        fw = c["DL_DRAW_BASE"] + c["DL_DRAW_PER_CHUNK"] * nc + c["DL_DRAW_PER_CHUNK2"] * nc * nc
        assert fw >= 2 * worst.draw_bound(nc), (nc, fw, worst.draw_bound(nc))
    assert c["DL_REFILL"] >= 2 * worst.refill
    assert c["EDP_DEADLINE_PREPARE"] >= 2 * worst.prepare
    # the measured paths are real: the product grows with the chunks, every limb costs
    assert worst.product[6] > worst.product[1] and worst.less_than[12] > worst.less_than[1] + 11 * 30


@pytest.mark.slow
def test_whole_windows_use_at_most_half_their_deadline():
    emu = Emulator(TIMING_ELF)
    install_model(emu)
    opens, closes = emu.watch("window_open"), emu.watch("window_close")
    insns_at = emu.device + emu.image.offset("edp_device_t", "window_insns")
    dev = Device(TraceLink(emu), timeout=60)
    rng = np.random.default_rng(3)
    for eps_micro in (100_000, 1_000_000, 10_000_000):
        dev.configure(load_key(), MechConfig(eps_micro, 0.0, 1.0, 1.0, None), Caps(10**13, 10**14))
        for k in (10, 1000) if eps_micro == 1_000_000 else (10,):
            for mode in ("full", "topk:32", "label", "bucket", "round:3", "simplex"):
                dev.query(rng.random(k, dtype=np.float32), mode)
                used = closes[-1] - opens[-1]
                bound = struct.unpack("<I", emu.uc.mem_read(insns_at, 4))[0]
                assert 2 * used <= bound, (eps_micro, k, mode, used, bound)
    images = rng.random((3, 64), dtype=np.float32)
    for x in images:
        dev.infer(x, "label")
        used = closes[-1] - opens[-1]
        bound = struct.unpack("<I", emu.uc.mem_read(insns_at, 4))[0]
        assert 2 * used <= bound, ("infer", used, bound)
