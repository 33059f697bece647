"""The Cortex-M ports wipe only the top EDP_STACK_MAX bytes of SRAM after an answer
(ports/common/stackwipe.h): that holds only while no command takes the stack deeper.

Each test image runs its own main and frame loop in Unicorn (edgedp.bench.trace, main=True) and
gets every command the host sends (PING, INFO, BUDGET, CONFIGURE, SET_TIME, TEST_SEED, QUERY at
k = 10 and the largest k in every mode, INFER in every mode, the local paths, SAMPLE (a large
scale too), NAIVE, CHALLENGE, STATE, AUDIT_LOG, RATE, RESET_BUDGET, an unknown type, a damaged
frame and a forged authenticated command, the last three each followed by a PING that must be
answered); every store into SRAM below the top 1 KiB of the stack (from `_estack`) is watched, the
dead-stack wipe's own stores left out, and SP is read at every basic block's entry and every
watched store (not at every instruction: a block that lowers SP and raises it again with no
store in between is missed); the lowest store and the lowest SP are the stack's depth. Each
must leave EDP_STACK_IRQ_MARGIN for an interrupt's frame below it."""
from __future__ import annotations

import re
import zlib

import numpy as np
import pytest
from cobs import cobs

from ..helpers import ROOT, make, require

require("unicorn", "capstone", "elftools")  # edgedp.bench runs the image in Unicorn

from unicorn import UC_HOOK_BLOCK, UC_HOOK_MEM_WRITE
from unicorn.arm_const import UC_ARM_REG_PC, UC_ARM_REG_SP

from edgedp.bench.infer import model_image
from edgedp.bench.trace import Emulator, TraceLink
from edgedp.device import frames
from edgedp.device import protocol as P
from edgedp.device.client import Device, load_key
from edgedp.device.protocol import Caps, MechConfig, Rate, SampleRequest
from edgedp.mech.lattice import MAX_CLASSES
from edgedp.mech.modes import Mode
from edgedp.schema import MAX_TOPK


HEADER = (ROOT / "firmware/ports/common/stackwipe.h").read_text()
STACK_MAX = int(re.search(r"#define EDP_STACK_MAX (\d+)u", HEADER).group(1))
IRQ_MARGIN = int(re.search(r"#define EDP_STACK_IRQ_MARGIN (\d+)u", HEADER).group(1))
WATCH_FROM = 1024   # stores in the top 1 KiB are not watched (every command goes that deep)
HEAP = 2048        # bytes above _end left to newlib's heap (sbrk), not watched
DEPTHS: dict[str, tuple[int, int]] = {}
MODES = ("full", "label", "bucket", "round:2", "simplex")


def _unanswered(dev: Device, wire: bytes) -> None:
    """Send a frame the device may leave unanswered, then a PING it must answer (stale
    answers to the first frame, if any, are skipped by seq)."""
    dev.send_raw(wire)
    assert dev.ping(b"after") == b"after"


def _drive(dev: Device, key: bytes, n_features: int, classes: int) -> None:
    rng = np.random.default_rng(11)
    dev.ping(b"\xa5" * 64)
    dev.info()
    dev.budget()
    dev.set_time(key, 1_700_000_000)
    dev.test_seed(key, bytes(range(P.SEED_BYTES)))
    dev.configure(key, MechConfig(), Caps(10**12))
    dev.admin(P.RATE, Rate().pack(), key)
    for k in (classes, MAX_CLASSES):
        for mode in (*MODES, f"topk:{min(MAX_TOPK, k)}"):
            dev.query(rng.random(k, dtype=np.float32), Mode.parse(mode))
    for mode in (*MODES, "topk:3"):
        dev.infer(rng.random(n_features, dtype=np.float32), Mode.parse(mode))
    dev.local(rng.random(classes, dtype=np.float32))
    dev.infer_local(rng.random(n_features, dtype=np.float32))
    dev.sample(SampleRequest(1_000_000, 2.0, 10, 100))
    dev.sample(SampleRequest(1, 1.0, 10, 100, m=0))   # t = 1.1e7 lattice steps: J near EDP_DLAP_MAX_J
    dev.naive(rng.random(classes, dtype=np.float32), 1.0)
    dev.state(key)
    dev.audit_log(key)
    _unanswered(dev, frames.encode(0x7E, dev.next_seq(), b"\x01\x02"))
    raw = frames.HEADER.pack(frames.VERSION, P.PING, dev.next_seq()) + b"crc"
    _unanswered(dev, cobs.encode(raw + frames.CRC.pack(zlib.crc32(raw) ^ 1)) + b"\x00")   # bad CRC
    ch = dev.challenge(key)                           # a live nonce, the frame tagged with the wrong key
    _unanswered(dev, dev.admin_frame(P.RESET_BUDGET, b"", bytes(len(key)), ch.counter + 1, ch.nonce)[1])
    dev.reset_budget(key)


def _depth(elf, n_features: int, classes: int) -> tuple[int, int]:
    """(deepest store, lowest SP) in bytes below ``_estack``."""
    emu = Emulator(elf, main=True)
    top = emu.image.symbol("_estack")
    wipe_lo, wipe_hi = emu.image.function_range("edp_cortexm_stack_wipe")
    lowest, lowest_sp = [top], [top]

    def on_write(uc, access, address, size, value, _user) -> None:
        if wipe_lo <= uc.reg_read(UC_ARM_REG_PC) < wipe_hi:
            return
        lowest[0] = min(lowest[0], address)
        lowest_sp[0] = min(lowest_sp[0], uc.reg_read(UC_ARM_REG_SP))

    def on_block(uc, address, size, _user) -> None:
        sp = uc.reg_read(UC_ARM_REG_SP)
        if sp < lowest_sp[0] and not wipe_lo <= address < wipe_hi:
            lowest_sp[0] = sp
    heap_end = emu.image.symbol("_end") + HEAP   # newlib's heap: the test images' rand() state
    emu.uc.hook_add(UC_HOOK_MEM_WRITE, on_write, begin=heap_end, end=top - WATCH_FROM - 1)
    emu.uc.hook_add(UC_HOOK_BLOCK, on_block)
    _drive(Device(TraceLink(emu), timeout=120), load_key(), n_features, classes)
    return top - lowest[0], top - lowest_sp[0]


@pytest.mark.parametrize("name", ["default", "digits_mlp_int8"])
def test_no_command_takes_the_stack_past_the_wiped_range(name: str) -> None:
    if name == "default":
        make("build/qemu/edgedp.elf")
        elf = ROOT / "build/qemu/edgedp.elf"
    else:
        elf = model_image(name)
    depth, sp_depth = _depth(elf, 64, 10)
    DEPTHS[name] = depth, sp_depth
    print(f"{name}: deepest store {depth} bytes, lowest SP {sp_depth} bytes below _estack "
          f"(EDP_STACK_MAX {STACK_MAX})")
    assert WATCH_FROM < depth, "the watch saw the stack (the test measures something)"
    for what, d in (("a store", depth), ("SP", sp_depth)):
        assert d + IRQ_MARGIN <= STACK_MAX, \
            f"{name}: {what} reaches {d} bytes below _estack; EDP_STACK_MAX {STACK_MAX} leaves < {IRQ_MARGIN}"
