"""The Cortex-M ports wipe only the top EDP_STACK_MAX bytes of SRAM after an answer
(boards/cortexm/stackwipe.h): that holds only while no command takes the stack deeper.

Each test image runs its own main and frame loop in Unicorn (edgedp.bench.trace, main=True) and
gets every command the host sends (PING, INFO, BUDGET, CONFIGURE, SET_TIME, TEST_SEED, QUERY at
the largest k and in every mode, INFER in every mode, the local paths, SAMPLE, NAIVE, CHALLENGE,
STATE, AUDIT_LOG, RESET_BUDGET, an unknown type and a damaged frame); every store into SRAM
below the top 1 KiB is watched, the dead-stack wipe's own stores left out, and the lowest one is
the stack's depth. It must leave EDP_STACK_IRQ_MARGIN for an interrupt's frame below it."""
from __future__ import annotations

import re

import numpy as np
import pytest
from unicorn import UC_HOOK_MEM_WRITE
from unicorn.arm_const import UC_ARM_REG_PC

from edgedp.bench.infer import model_image
from edgedp.bench.trace import RAM_BASE, RAM_SIZE, Emulator, TraceLink
from edgedp.device import protocol as P
from edgedp.device.client import Device, load_key
from edgedp.device.protocol import Caps, MechConfig, SampleRequest

from ..conftest import ROOT, make

HEADER = (ROOT / "firmware/boards/cortexm/stackwipe.h").read_text()
STACK_MAX = int(re.search(r"#define EDP_STACK_MAX (\d+)u", HEADER).group(1))
IRQ_MARGIN = int(re.search(r"#define EDP_STACK_IRQ_MARGIN (\d+)u", HEADER).group(1))
TOP = RAM_BASE + RAM_SIZE
WATCH_FROM = 1024   # stores in the top 1 KiB are not watched (every command goes that deep)
HEAP = 2048        # bytes above _end left to newlib's heap (sbrk), not watched
DEPTHS: dict[str, int] = {}


def _drive(dev: Device, key: bytes, n_features: int, classes: int) -> None:
    rng = np.random.default_rng(11)
    dev.ping(b"\xa5" * 64)
    dev.info()
    dev.budget()
    dev.set_time(key, 1_700_000_000)
    dev.test_seed(key, bytes(range(P.SEED_BYTES)))
    dev.configure(key, MechConfig(), Caps(10**12))
    for mode in ("full", "label"):
        dev.query(rng.random(classes, dtype=np.float32), mode)
        dev.infer(rng.random(n_features, dtype=np.float32), mode)
    dev.query(rng.random(P.MAX_CLASSES, dtype=np.float32), "full")
    dev.local(rng.random(classes, dtype=np.float32))
    dev.infer_local(rng.random(n_features, dtype=np.float32))
    dev.sample(SampleRequest(1_000_000, 2.0, 10, 100))
    dev.naive(rng.random(classes, dtype=np.float32), 1.0)
    dev.state(key)
    dev.audit_log(key)
    dev.reset_budget(key)


def _depth(elf, n_features: int, classes: int) -> int:
    emu = Emulator(elf, main=True)
    wipe_lo, wipe_hi = emu.image.function_range("edp_cortexm_stack_wipe")
    lowest = [TOP]

    def on_write(uc, access, address, size, value, _user) -> None:
        if address < lowest[0] and not wipe_lo <= uc.reg_read(UC_ARM_REG_PC) < wipe_hi:
            lowest[0] = address
    heap_end = emu.image.symbol("_end") + HEAP   # newlib's heap: the test images' rand() state
    emu.uc.hook_add(UC_HOOK_MEM_WRITE, on_write, begin=heap_end, end=TOP - WATCH_FROM - 1)
    _drive(Device(TraceLink(emu), timeout=120), load_key(), n_features, classes)
    return TOP - lowest[0]


@pytest.mark.parametrize("name", ["default", "digits_mlp_int8"])
def test_no_command_takes_the_stack_past_the_wiped_range(name: str) -> None:
    if name == "default":
        make("build/qemu/edgedp.elf")
        elf = ROOT / "build/qemu/edgedp.elf"
    else:
        elf = model_image(name)
    depth = _depth(elf, 64, 10)
    DEPTHS[name] = depth
    print(f"{name}: deepest store {depth} bytes below _estack (EDP_STACK_MAX {STACK_MAX})")
    assert WATCH_FROM < depth, "the watch saw the stack (the test measures something)"
    assert depth + IRQ_MARGIN <= STACK_MAX, \
        f"{name}: the stack reaches {depth} bytes below _estack; EDP_STACK_MAX {STACK_MAX} leaves < {IRQ_MARGIN}"
