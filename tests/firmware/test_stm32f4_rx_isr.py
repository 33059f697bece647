"""The stm32f4 console's RX interrupt on the production image: in the vector table, and short
and straight enough for the cycle bound the release window adds for it
(EDP_STM32_RX_ISR_CYCLES, ports/stm32f4/stm32f4.h; docs/privacy.md §6).

The bound: 12 cycles of exception entry, 10 of exit, 4 per instruction (the port's
EDP_STM32_CYCLES_PER_INSN) on the longest path through the handler and the function it
tail-calls, 16 for each of the two APB1 register reads. With no backward branch and no call the
longest path is found by walking the code once."""
from __future__ import annotations

import re
import struct

import pytest

from edgedp.bench.footprint import linked_symbols

from ..helpers import ROOT, make

HEADER = ROOT / "firmware" / "ports" / "stm32f4" / "stm32f4.h"
ELF = ROOT / "build" / "stm32f4" / "edgedp.elf"
USART2_IRQ = 38


def _longest_path(insns: list) -> int:
    """Instructions on the longest path from the first to a return, for code without calls or
    backward branches (asserted): conditional branches both ways, IT blocks as straight code."""
    from capstone import CS_GRP_JUMP
    at = {insn.address: k for k, insn in enumerate(insns)}
    longest = [0] * (len(insns) + 1)
    for k in range(len(insns) - 1, -1, -1):
        insn = insns[k]
        assert insn.mnemonic not in ("bl", "blx"), f"a call in the interrupt: {insn.mnemonic} {insn.op_str}"
        if insn.mnemonic == "bx" or (insn.mnemonic.startswith("pop") and "pc" in insn.op_str):
            longest[k] = 1
            continue
        target = re.search(r"#(0x[0-9a-f]+)$", insn.op_str)
        nexts = [k + 1]
        if insn.group(CS_GRP_JUMP):
            assert target and int(target.group(1), 16) > insn.address, f"a backward or computed branch: {insn}"
            nexts = [at[int(target.group(1), 16)]] + ([] if insn.mnemonic in ("b", "b.w") else [k + 1])
        longest[k] = 1 + max(longest[j] for j in nexts)
    return longest[0]


def _instructions(data: bytes, base: int, addr: int, size: int) -> list:
    from capstone import CS_ARCH_ARM, CS_MODE_MCLASS, CS_MODE_THUMB, Cs
    cs = Cs(CS_ARCH_ARM, CS_MODE_THUMB | CS_MODE_MCLASS)
    cs.detail = True
    return list(cs.disasm(data[addr - base: addr - base + size], addr))


@pytest.fixture(scope="module")
def image():
    from elftools.elf.elffile import ELFFile
    make("build/stm32f4/edgedp.elf")
    syms = {s.name: s for s in linked_symbols(ELF)}
    with open(ELF, "rb") as fh:
        ef = ELFFile(fh)
        # The handler and its body are .ramfunc code, linked into .data (SRAM, stm32f4.ld).
        code, vectors = ef.get_section_by_name(".data"), ef.get_section_by_name(".isr_vector")
        return syms, code["sh_addr"], code.data(), vectors.data()


def test_the_console_vector_is_the_rx_handler(image) -> None:
    syms, _, _, vectors = image
    entry = struct.unpack_from("<I", vectors, 4 * (16 + USART2_IRQ))[0]
    assert entry & 1 and entry & ~1 == syms["USART2_IRQHandler"].addr
    assert struct.unpack_from("<I", vectors, 4 * (16 + USART2_IRQ + 1))[0] & ~1 == syms["edp_default_handler"].addr


def test_the_rx_interrupt_fits_its_cycle_bound(image) -> None:
    syms, base, data, _ = image
    handler, body = syms["USART2_IRQHandler"], syms["edp_stm32_uart_irq"]
    head = []
    for insn in _instructions(data, base, handler.addr, handler.size):
        head.append(insn)
        if insn.mnemonic in ("b", "b.w"):
            assert int(insn.op_str.lstrip("#"), 16) == body.addr, "the handler tail-calls the ring's interrupt body"
            break
    else:
        pytest.fail("USART2_IRQHandler does not tail-call edp_stm32_uart_irq")
    insns = _instructions(data, base, body.addr, body.size)
    n = len(head) + _longest_path(insns)
    bound = int(re.search(r"#define EDP_STM32_RX_ISR_CYCLES (\d+)u", HEADER.read_text()).group(1))
    cycles = 12 + 10 + 4 * n + 2 * 16
    assert cycles <= bound, f"{n} instructions: {cycles} cycles > EDP_STM32_RX_ISR_CYCLES = {bound}"
    assert n >= 15  # the body was found and disassembled, not a stub


def test_the_port_table_is_const(image) -> None:
    """The port's callback table sits in flash (.rodata): nothing can rewrite it at run time."""
    syms = image[0]
    assert 0x08000000 <= syms["port"].addr < 0x08100000, f"port at {syms['port'].addr:#x}"
