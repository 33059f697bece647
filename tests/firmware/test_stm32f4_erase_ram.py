"""The stm32f4 production image keeps receiving while a flash-log sector erases (ports/stm32f4/flash.c,
EDP_STM32_RAMFUNC in stm32f4.h; docs/hardware.md): on the STM32F4 a fetch from flash stalls while a
sector of the same bank erases, so the erase's busy-wait, the console's RX interrupt and the vector
table must sit in SRAM.

Under Unicorn, on the real ELF: the image's own start-up code (loaded at the load addresses only, so
the copy of .data with .ramfunc is the firmware's) and ``edp_board_init`` run; then the flash driver's
erase runs against a flash controller whose BSY stays set for a while, and no instruction may be
fetched from flash between the write of STRT and BSY clearing. The vector table VTOR names must be in
SRAM and its console entry must be the SRAM handler, whose code (and the body it tail-calls) runs from
SRAM when entered through that vector."""
from __future__ import annotations

import struct

import pytest

from ..helpers import ROOT, make

ELF = ROOT / "build" / "stm32f4" / "edgedp.elf"
FLASH_BASE, FLASH_SIZE = 0x08000000, 1 << 20
RAM_BASE, RAM_SIZE = 0x20000000, 128 << 10
PERIPH_BASE, PERIPH_SIZE = 0x40000000, 0x10070000   # APB, AHB1, AHB2 (RNG at 0x50060800)
SCS_BASE, SCS_SIZE = 0xE0000000, 0x00100000
FLASH_REGS = 0x40023C00
FLASH_CR, FLASH_SR = FLASH_REGS + 0x10, FLASH_REGS + 0x0C
CR_STRT, CR_LOCK, SR_BSY = 1 << 16, 1 << 31, 1 << 16
ACR_ICEN, ACR_DCEN, ACR_DCRST = 1 << 9, 1 << 10, 1 << 12
VTOR = 0xE000ED08
USART2_VECTOR = 16 + 38
RETURN = 0x00001000
BUSY_POLLS = 50
SCRATCH = RAM_BASE + RAM_SIZE - 0x4000   # below the stack top, above .bss (checked)


def _in_flash(addr: int) -> bool:
    return FLASH_BASE <= addr < FLASH_BASE + FLASH_SIZE


class Board:
    """The image in a Unicorn Cortex-M4: flash holds the load image, SRAM starts empty."""

    def __init__(self, flash_regs_hook: bool) -> None:
        from elftools.elf.elffile import ELFFile
        from unicorn import UC_ARCH_ARM, UC_MODE_MCLASS, UC_MODE_THUMB, Uc
        from unicorn.arm_const import UC_ARM_REG_SP
        self.uc = uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
        uc.mem_map(0, 0x2000)
        uc.mem_map(FLASH_BASE, FLASH_SIZE)
        uc.mem_write(FLASH_BASE, b"\xff" * FLASH_SIZE)
        uc.mem_map(RAM_BASE, RAM_SIZE)
        uc.mem_map(SCS_BASE, SCS_SIZE)
        page = FLASH_REGS & ~0xFFF
        if flash_regs_hook:
            uc.mem_map(PERIPH_BASE, page - PERIPH_BASE)
            uc.mmio_map(page, 0x1000, self._mmio_read, None, self._mmio_write, None)
            uc.mem_map(page + 0x1000, PERIPH_BASE + PERIPH_SIZE - page - 0x1000)
        else:
            uc.mem_map(PERIPH_BASE, PERIPH_SIZE)
        self.regs = {}
        self.busy = 0
        self.erasing = False
        self.strt_seen = False
        self.events: list[tuple[str, int]] = []   # ("acr", value written) and ("read", sector address)
        with open(ELF, "rb") as fh:
            elf = ELFFile(fh)
            for seg in elf.iter_segments():
                if seg["p_type"] == "PT_LOAD" and seg["p_filesz"]:
                    assert _in_flash(seg["p_paddr"]), "every load image sits in flash"
                    uc.mem_write(seg["p_paddr"], seg.data())
            self.sym = {s.name: s["st_value"] for s in elf.get_section_by_name(".symtab").iter_symbols() if s.name}
        uc.reg_write(UC_ARM_REG_SP, struct.unpack("<I", uc.mem_read(FLASH_BASE, 4))[0])

    def _mmio_read(self, uc, offset, size, _user):
        addr = (FLASH_REGS & ~0xFFF) + offset
        if addr == FLASH_SR:
            if self.busy:
                self.busy -= 1
                return SR_BSY
            self.erasing = False
            return 0
        return self.regs.get(addr, 0)

    def _mmio_write(self, uc, offset, size, value, _user):
        addr = (FLASH_REGS & ~0xFFF) + offset
        if addr == FLASH_CR:
            # KEYR is not modelled: the controller reads unlocked; writing CR = LOCK is the relock.
            if value & CR_STRT:
                self.busy, self.erasing, self.strt_seen = BUSY_POLLS, True, True
                value &= ~CR_STRT
        elif addr == FLASH_REGS:
            self.events.append(("acr", value))
        self.regs[addr] = value

    def call(self, name: str, *args: int, count: int = 50_000_000) -> int:
        from unicorn.arm_const import UC_ARM_REG_LR, UC_ARM_REG_R0, UC_ARM_REG_R1, UC_ARM_REG_R2
        for reg, v in zip((UC_ARM_REG_R0, UC_ARM_REG_R1, UC_ARM_REG_R2), args):
            self.uc.reg_write(reg, v)
        self.uc.reg_write(UC_ARM_REG_LR, RETURN | 1)
        addr = self.sym[name] if isinstance(name, str) else name
        self.uc.emu_start(addr | 1, RETURN, count=count)
        from unicorn.arm_const import UC_ARM_REG_PC
        assert self.uc.reg_read(UC_ARM_REG_PC) == RETURN, f"{name} did not return"
        return self.uc.reg_read(UC_ARM_REG_R0)

    def boot(self) -> None:
        """The reset handler up to main: FPU on, .data (with .ramfunc) copied, .bss zeroed."""
        self.uc.emu_start(self.sym["edp_reset_handler"] | 1, self.sym["main"] & ~1, count=10_000_000)

    def word(self, addr: int) -> int:
        return struct.unpack("<I", self.uc.mem_read(addr, 4))[0]


@pytest.fixture(scope="module")
def elf() -> None:
    make("build/stm32f4/edgedp.elf")


def test_no_flash_fetch_while_the_erase_is_busy(elf) -> None:
    from unicorn import UC_HOOK_CODE, UC_HOOK_MEM_READ
    b = Board(flash_regs_hook=True)
    assert b.sym["_ebss"] + 0x100 <= SCRATCH
    b.boot()
    d, f = SCRATCH, SCRATCH + 0x100
    sector = 0x400   # a short sector: the check after the erase reads it all
    base = 0x080A0000
    # edp_stm32_flash_t: regs, base, first_sector, sector_size, spin_program, spin_erase, before_erase
    b.uc.mem_write(d, struct.pack("<7I", FLASH_REGS, base, 9, sector, 1000, 10_000, 0))
    b.call("edp_stm32_flash_bind", f, d)
    erase = b.word(f + 16)   # edp_flash_t: ctx, sector_size, read, program, erase
    assert erase & ~1 and not _in_flash(erase & ~1), f"the erase callback is in flash: {erase:#x}"
    fetched: list[int] = []
    busy_fetches: list[int] = []

    def on_code(uc, addr, size, _user):
        fetched.append(addr)
        if b.erasing:
            busy_fetches.append(addr)
    b.uc.hook_add(UC_HOOK_CODE, on_code)
    b.uc.hook_add(UC_HOOK_MEM_READ, lambda uc, access, addr, size, value, _u: b.events.append(("read", addr)),
                  begin=base, end=base + sector - 1)
    acr = 5 | ACR_ICEN | ACR_DCEN   # as clock.c leaves it: the data cache on
    b.regs[FLASH_REGS] = acr
    assert b.call(erase, d, 0) == 0
    # The data cache is reset (DCRST while DCEN is clear, then DCEN back) before the sector is read back.
    first_read = next(i for i, e in enumerate(b.events) if e[0] == "read")
    before = [v for kind, v in b.events[:first_read] if kind == "acr"]
    assert any(v & ACR_DCRST and not v & ACR_DCEN for v in before), \
        f"no data cache reset before the read-back: {before}"
    assert before[-1] == acr and b.regs[FLASH_REGS] == acr, "the data cache is re-enabled, DCRST clear"
    assert b.strt_seen and b.busy == 0, "the erase started and waited for BSY to clear"
    assert len(busy_fetches) >= BUSY_POLLS, "instructions ran while BSY was set"
    flash = [a for a in busy_fetches if _in_flash(a)]
    assert not flash, f"{len(flash)} fetches from flash while the erase was busy, first {flash[0]:#x}"
    # The whole erase (unlock to the read-back of the erased sector) is SRAM code.
    assert all(RAM_BASE <= a < RAM_BASE + RAM_SIZE for a in fetched)


def test_the_rx_interrupt_runs_from_sram_through_vtor(elf) -> None:
    from unicorn import UC_HOOK_CODE
    b = Board(flash_regs_hook=False)
    b.boot()
    b.call("edp_board_init")
    vtor = b.word(VTOR)
    assert RAM_BASE <= vtor < RAM_BASE + RAM_SIZE and vtor % 512 == 0, f"VTOR {vtor:#x}"
    assert b.uc.mem_read(vtor, 4 * 98) == b.uc.mem_read(b.sym["edp_vectors"], 4 * 98), "the SRAM table is a copy"
    entry = b.word(vtor + 4 * USART2_VECTOR)
    assert entry & 1 and entry & ~1 == b.sym["USART2_IRQHandler"] & ~1
    assert not _in_flash(entry & ~1), f"the console's vector points into flash: {entry:#x}"
    # A received byte: USART2 SR.RXNE with DR = 0x5A; the handler runs from its vector.
    usart2 = 0x40004400
    b.uc.mem_write(usart2, struct.pack("<II", 1 << 5, 0x5A))
    fetched: list[int] = []
    b.uc.hook_add(UC_HOOK_CODE, lambda uc, addr, size, _u: fetched.append(addr))
    b.call(entry & ~1)
    assert len(fetched) >= 15
    assert not [a for a in fetched if _in_flash(a)], "the RX interrupt fetched from flash"
    rx = b.sym["rx"]
    assert 0x5A in b.uc.mem_read(rx, 64), "the byte reached the ring"


def test_the_link_map_puts_the_erase_wait_and_the_rx_path_in_sram(elf) -> None:
    from elftools.elf.elffile import ELFFile
    with open(ELF, "rb") as fh:
        ef = ELFFile(fh)
        data = ef.get_section_by_name(".data")
        lo, hi = data["sh_addr"], data["sh_addr"] + data["sh_size"]
        syms = {s.name: s for s in ef.get_section_by_name(".symtab").iter_symbols() if s.name}
    assert RAM_BASE <= lo and hi <= RAM_BASE + RAM_SIZE
    for name in ("USART2_IRQHandler", "edp_stm32_uart_irq", "flash_erase", "idle"):
        s = syms[name]
        assert s["st_info"]["type"] == "STT_FUNC" and lo <= s["st_value"] & ~1 < hi, f"{name} is not in SRAM"
