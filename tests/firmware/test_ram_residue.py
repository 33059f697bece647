"""A later RAM read finds no input and no raw model output of the last answer (issue 17.4).

The logistic-regression test image runs in Unicorn (edgedp.bench.trace), its own main and frame
loop reading the request from USART1; after an INFER and a QUERY the whole of SRAM is searched for
every float32 of the request's inputs and of the model's raw output (computed bit for bit by
edgedp.model.reference). Nothing is left out: the frame loop's receive buffer (firmware/app/main.c)
is searched too. Before the fixes the model's scratch held the raw softmax output, the device's
input buffer the request, and main's receive buffer the last 64 bytes of the request on the wire
(a k = 10 QUERY whole)."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from ..helpers import ROOT, require

require("unicorn", "capstone", "elftools")  # edgedp.bench runs the image in Unicorn

from unicorn import UC_HOOK_CODE
from unicorn.arm_const import (UC_ARM_REG_LR, UC_ARM_REG_R0, UC_ARM_REG_R1, UC_ARM_REG_R2, UC_ARM_REG_R3,
                               UC_ARM_REG_R12, UC_ARM_REG_SP)

from edgedp.bench.infer import model_image
from edgedp.bench.trace import RAM_BASE, RAM_SIZE, Emulator, TraceLink
from edgedp.device.client import Device, load_key
from edgedp.device.protocol import Caps, MechConfig
from edgedp.model import cgen, reference


@pytest.fixture(scope="module")
def logreg_emulator() -> Emulator:
    return Emulator(model_image("digits_logreg"), main=True)


def ram(emu: Emulator) -> bytes:
    """SRAM as a debugger would read it: all of it."""
    return bytes(emu.uc.mem_read(RAM_BASE, RAM_SIZE))


def found(mem: bytes, values: np.ndarray) -> list[float]:
    return [float(v) for v in values.astype("<f4") if v != 0 and v.tobytes() in mem]


def test_no_input_or_raw_output_stays_in_ram_after_infer_and_query(logreg_emulator: Emulator) -> None:
    dev = Device(TraceLink(logreg_emulator), timeout=60)
    dev.configure(load_key(), MechConfig(), Caps(10**12))
    model = cgen.read(ROOT / "firmware/model/digits_logreg.c")
    rng = np.random.default_rng(17)
    x = rng.random(64, dtype=np.float32) * np.float32(0.99) + np.float32(0.005)
    raw = reference.run(model, x[None, :])[0]
    assert len(set(raw.tolist())) == 10  # distinctive values, none 0
    dev.infer(x, "full")
    mem = ram(logreg_emulator)
    assert not found(mem, x), "the INFER request's inputs stay in RAM"
    assert not found(mem, raw), "the model's raw output stays in RAM"
    q = rng.random(10, dtype=np.float32) * np.float32(0.99) + np.float32(0.005)
    dev.query(q, "label")
    assert not found(ram(logreg_emulator), q), "the QUERY's inputs stay in RAM"
    # the search itself works: the inputs are in RAM while the device still holds them
    dev.local(q)
    assert found(ram(logreg_emulator), q)


def test_int8_model_leaves_no_activation_or_output_in_ram() -> None:
    """The int8 MLP's scratch: its int8 input, hidden activations, widened input and float
    logits/outputs are wiped too (edp_model_wipe_s8)."""
    emu = Emulator(model_image("digits_mlp_int8"), main=True)
    dev = Device(TraceLink(emu), timeout=60)
    dev.configure(load_key(), MechConfig(), Caps(10**12))
    model = cgen.read(ROOT / "firmware/model/digits_mlp_int8.c")
    x = np.random.default_rng(18).random(64, dtype=np.float32)
    xq = reference.quantize_input(model.quant, x[None, :])
    hidden = reference.dense8(model.nets[0].layers[0], xq)[0].astype(np.int8).tobytes()
    raw = reference.run(model, x[None, :])[0]
    dev.infer(x, "full")
    mem = ram(emu)
    assert xq[0].astype(np.int8).tobytes() not in mem, "the int8 input stays in RAM"
    assert hidden not in mem, "the hidden activations stay in RAM"
    assert not found(mem, raw), "the raw output stays in RAM"
    assert not found(mem, reference.logits8(model.nets[0], xq)[0]), "the logits stay in RAM"
    dev.infer_local(x)  # the local path keeps them until the next call: the search works
    assert hidden in ram(emu)


def test_keystream_that_made_the_noise_is_gone_from_ram(logreg_emulator: Emulator) -> None:
    """The keystream words a QUERY's noise was drawn from would let a later RAM read replay the
    noise and subtract it from the answer: none of them may stay anywhere in SRAM. They are read
    from the generator's buffer before the query (the words it will consume next) and searched
    for after it; the unread rest of the batch is still there (so the search can find words)."""
    emu = logreg_emulator
    img = emu.image
    drbg = emu.device + img.offset("edp_dev_t", "drbg")
    block, word = drbg + img.offset("edp_drbg_t", "block"), drbg + img.offset("edp_drbg_t", "word")
    batch = (word - block) // 4  # words of a batch (the buffer ends where the word index begins)
    dev = Device(TraceLink(emu), timeout=60)
    dev.configure(load_key(), MechConfig(), Caps(10**12))
    rng = np.random.default_rng(5)
    dev.query(rng.random(10, dtype=np.float32), "full")   # the plan, and a batch under way

    def read_words() -> tuple[list[int], int]:
        return (list(np.frombuffer(emu.uc.mem_read(block, 4 * batch), dtype="<u4")),
                int(np.frombuffer(emu.uc.mem_read(word, 4), dtype="<u4")[0]))

    before, w0 = read_words()
    dev.query(rng.random(10, dtype=np.float32), "full")
    after, w1 = read_words()
    assert batch == 96 and w0 < w1 <= batch, (w0, w1)   # this query read words w0..w1 of the same batch
    used = [v for v in before[w0:w1] if v]
    unread = [v for v in before[w1:] if v]
    assert len(used) >= 5 and unread      # k = 10 samples of ~20 bits each
    mem = ram(emu)
    assert [v for v in used if int(v).to_bytes(4, "little") in mem] == [], "consumed keystream stays in RAM"
    assert all(int(v).to_bytes(4, "little") in mem for v in unread)


def test_interrupt_frames_pushed_during_the_noise_are_gone(logreg_emulator: Emulator) -> None:
    """An interrupt (the stm32f4 port's RXNE, SysTick) pushes r0-r3, r12, lr, pc and xPSR of the
    code it interrupts below SP: during the sampler, noise and keystream values. Unicorn takes
    no interrupts, so the test does what exception entry does (an extended frame: the core
    uses the FPU, so r0 lies 104 bytes below the 8-byte-aligned SP) at every instruction of
    edp_dlap_noisy during a QUERY; after the answer none of those words may be left in SRAM
    where they were pushed. Before the ports wiped the dead stack after an answer
    (ports/common/stackwipe.h) almost all of them were."""
    emu = logreg_emulator
    dev = Device(TraceLink(emu), timeout=60)
    dev.configure(load_key(), MechConfig(), Caps(10**12))
    start, end = emu.image.function_range("edp_dlap_noisy")
    pushed: dict[int, int] = {}
    regs = (UC_ARM_REG_R0, UC_ARM_REG_R1, UC_ARM_REG_R2, UC_ARM_REG_R3, UC_ARM_REG_R12, UC_ARM_REG_LR)

    def exception_entry(uc, address, size, user) -> None:
        base = (uc.reg_read(UC_ARM_REG_SP) & ~7) - 104
        words = [uc.reg_read(r) for r in regs] + [address | 1, 0x01000000]
        uc.mem_write(base, struct.pack("<8I", *words))
        pushed.update((base + 4 * i, w) for i, w in enumerate(words) if w)

    hook = emu.uc.hook_add(UC_HOOK_CODE, exception_entry, begin=start & ~1, end=end - 1)
    try:
        dev.query(np.random.default_rng(9).random(10, dtype=np.float32), "full")
    finally:
        emu.uc.hook_del(hook)
    assert len(pushed) >= 16
    mem = ram(emu)
    left = [a for a, w in pushed.items() if mem[a - RAM_BASE:a - RAM_BASE + 4] == struct.pack("<I", w)]
    assert not left, f"{len(left)} of {len(pushed)} words interrupt frames pushed during the noise stay in RAM"
