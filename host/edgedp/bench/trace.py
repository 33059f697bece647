"""Instruction-level trace of the firmware ELF under Unicorn: exact counts, Cortex-M4 cycle estimates.

The same ``build/qemu/edgedp.elf`` that QEMU runs is loaded into a Unicorn Cortex-M
(Thumb) CPU with a memory map taken from the ELF: flash at 0x08000000 (code and the
.data load image), SRAM at 0x20000000 (.data at its run address, .bss zeroed),
USART1 and the System Control Space (SysTick, CPACR) as MMIO callbacks. The board's own
``edp_board_init`` and the core's ``edp_device_init`` boot it exactly as ``main`` does;
frames go through ``edp_device_rx`` (COBS, CRC, dispatcher, budget commit, response) so
the trace covers the whole QUERY path, and a :class:`TraceLink` lets the ordinary
:class:`edgedp.device.client.Device` talk to it. With ``main=True`` the image's own ``main``
runs instead (board init, banner, frame loop), and received bytes reach it through USART1's
RXNE and data register, as under QEMU (the board's WFI while it waits is a NOP here): what the
frame loop leaves in RAM is then the
firmware's (its receive buffer and stack frame included); instruction counts outside the
``port->ticks`` marks are then not exact (a suspended block is counted again on resuming).

The DP step is what the QUERY response's ``ticks`` measure: the instructions between the
two SysTick reads made through ``port->ticks`` around quantize/noise/output. Unicorn
counts them exactly (per translated block, with the partial block up to the reading
instruction); :mod:`edgedp.bench.timing` weights each executed instruction with the
Cortex-M4 TRM timing (ARM DDI 0439B Table 3-1), resolving taken/not-taken branches from
the next executed address. Each instruction is attributed to its source file through the
DWARF line table, so inlined code (``edp_drbg_bits``, ``edp_drbg_word``) lands in the
module it comes from.
"""
from __future__ import annotations

import bisect
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from capstone import CS_ARCH_ARM, CS_MODE_MCLASS, CS_MODE_THUMB, Cs
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection
from unicorn import UC_ARCH_ARM, UC_HOOK_BLOCK, UC_HOOK_CODE, UC_MODE_MCLASS, UC_MODE_THUMB, Uc, UcError
from unicorn.arm_const import (UC_ARM_REG_LR, UC_ARM_REG_PC, UC_ARM_REG_R0, UC_ARM_REG_R1, UC_ARM_REG_R2,
                               UC_ARM_REG_R3, UC_ARM_REG_S0, UC_ARM_REG_SP)

from . import timing

FLASH_BASE, FLASH_SIZE = 0x08000000, 1 << 20
RAM_BASE, RAM_SIZE = 0x20000000, 128 << 10
USART1_BASE = 0x40011000
TIM2_BASE = 0x40000000
TIM_CNT = 0x24
NS_PER_INSN = 8            # QEMU -icount shift=3; QEMU clocks the STM32 timers at 1 GHz
SCS_BASE = 0xE000E000
SYST_CVR = 0x018
RETURN_ADDR = 0x00001000   # a mapped page holding nothing: emulation stops when PC gets here
SCRATCH_SIZE = 16 << 10
SYSTICK_RELOAD = 0x00FFFFFF
TICKS_PER_INSN = 1.344     # what QEMU -icount shift=3 gives a 168 MHz SysTick (see icount.py)
DRBG_KEY_WORDS = 8         # drbg.h EDP_DRBG_KEY_WORDS: a batch's words that become the next key

CATEGORIES = {
    "drbg.c": "drbg", "drbg.h": "drbg", "drbg_armv7m.c": "drbg", "drbg_portable.c": "drbg",
    "dlap.c": "sampler", "dlap.h": "sampler", "dlap_armv7m.c": "sampler", "dlap_portable.c": "sampler",
    "mech.c": "mechanism", "mech.h": "mechanism",
    "systick.c": "timer", "board.c": "timer",
    "naive.c": "naive",
}


def category_of(source: str | None, function: str) -> str:
    if function == "edp_chacha_block":
        return "chacha"
    if source in CATEGORIES:
        return CATEGORIES[source]
    if source is None:
        return "libc/libm"
    return "framing"


class TraceError(RuntimeError):
    """The emulated firmware faulted or the ELF lacks something the trace needs."""


@dataclass
class Insn:
    address: int
    size: int
    mnemonic: str
    op_str: str
    timing: timing.InsnTiming
    category: str
    function: str


@dataclass
class Block:
    """One translated block, pre-summed."""

    address: int
    insns: list[Insn]
    fallthrough: int
    count: int
    cycles: int           # nominal, without branch refill of the last instruction
    cycles_hi: int        # pessimistic, without the last instruction's refill
    first_ldst: bool
    last_ldst: bool
    per_category: Counter


@dataclass
class StepTrace:
    """One DP step (or any measured region) as executed."""

    instructions: int = 0
    cycles: float = 0.0
    cycles_lo: float = 0.0
    cycles_hi: float = 0.0
    categories: Counter = field(default_factory=Counter)
    functions: Counter = field(default_factory=Counter)
    chacha_blocks: int = 0
    keystream_bits: int | None = None  # keystream bits the region consumed (None if it reseeded)

    @property
    def us_168mhz(self) -> float:
        return self.cycles / (timing.CORE_HZ / 1e6)


_IMAGES: dict[str, tuple[tuple[int, int], "Image"]] = {}
"""Image.load's image of each resolved path, with the (size, modification time in ns) it was read at."""


class Image:
    """Symbols, load segments, DWARF line table and struct layouts of a firmware ELF."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        with open(self.path, "rb") as fh:
            elf = ELFFile(fh)
            self.segments = [(seg["p_vaddr"], seg["p_paddr"], seg.data(), seg["p_memsz"])
                             for seg in elf.iter_segments() if seg["p_type"] == "PT_LOAD"]
            self.symbols: dict[str, tuple[int, int, str]] = {}
            funcs = []
            symtab = elf.get_section_by_name(".symtab")
            if not isinstance(symtab, SymbolTableSection):
                raise TraceError(f"{self.path} has no symbol table (stripped?)")
            for s in symtab.iter_symbols():
                kind = s["st_info"]["type"]
                if s.name and kind in ("STT_FUNC", "STT_OBJECT", "STT_NOTYPE"):
                    self.symbols.setdefault(s.name, (s["st_value"], s["st_size"], kind))
                    if kind == "STT_FUNC":
                        funcs.append((s["st_value"] & ~1, s["st_size"], s.name))
            funcs.sort()
            self._func_starts = [f[0] for f in funcs]
            self._funcs = funcs
            self._lines: list[tuple[int, str | None]] = []  # (address, source file; None ends a sequence)
            self._structs: dict[str, dict[str, int]] = {}
            if elf.has_dwarf_info():
                self._read_dwarf(elf.get_dwarf_info())
        self._line_addrs = [a for a, _ in self._lines]

    def _read_dwarf(self, dwarf) -> None:
        rows: list[tuple[int, str | None]] = []
        for cu in dwarf.iter_CUs():
            lp = dwarf.line_program_for_CU(cu)
            if lp is None:
                continue
            files = lp["file_entry"]
            ver5 = lp.header["version"] >= 5
            for entry in lp.get_entries():
                st = entry.state
                if st is None:
                    continue
                idx = st.file if ver5 else st.file - 1
                name = files[idx].name.decode() if 0 <= idx < len(files) else None
                rows.append((st.address, None if st.end_sequence else name))
            for die in cu.iter_DIEs():
                if die.tag != "DW_TAG_typedef" or "DW_AT_name" not in die.attributes:
                    continue
                name = die.attributes["DW_AT_name"].value.decode()
                if name in self._structs:
                    continue
                target = die.get_DIE_from_attribute("DW_AT_type") if "DW_AT_type" in die.attributes else None
                if target is None or target.tag != "DW_TAG_structure_type":
                    continue
                members = {}
                for m in target.iter_children():
                    if m.tag == "DW_TAG_member" and "DW_AT_data_member_location" in m.attributes:
                        members[m.attributes["DW_AT_name"].value.decode()] = \
                            m.attributes["DW_AT_data_member_location"].value
                if "DW_AT_byte_size" in target.attributes:
                    members["__size__"] = target.attributes["DW_AT_byte_size"].value
                self._structs[name] = members
        rows.sort(key=lambda r: r[0])
        self._lines = rows

    @classmethod
    def load(cls, path: str | Path) -> "Image":
        """The Image of path, read once per file version (path, size, modification time): reading
        the DWARF takes seconds with pyelftools, and the tests boot the same images hundreds of
        times. An Image is never changed after it is read."""
        p = Path(path).resolve()
        st = p.stat()
        version = (st.st_size, st.st_mtime_ns)
        seen = _IMAGES.get(str(p))
        if seen is not None and seen[0] == version:
            return seen[1]
        img = cls(p)
        _IMAGES[str(p)] = (version, img)  # (a rebuilt file's older Image is dropped)
        return img

    def symbol(self, name: str) -> int:
        try:
            return self.symbols[name][0]
        except KeyError:
            raise TraceError(f"{self.path}: no symbol {name!r}") from None

    def offset(self, struct_name: str, member: str) -> int:
        try:
            return self._structs[struct_name][member]
        except KeyError:
            raise TraceError(f"{self.path}: no DWARF layout for {struct_name}.{member} (build with -g)") from None

    def function_at(self, addr: int) -> str:
        i = bisect.bisect_right(self._func_starts, addr) - 1
        if i >= 0:
            start, size, name = self._funcs[i]
            if start <= addr < start + max(size, 2):
                return name
        return "?"

    def function_range(self, name: str) -> tuple[int, int]:
        addr, size, _ = self.symbols[name]
        return addr & ~1, (addr & ~1) + size

    def source_at(self, addr: int) -> str | None:
        i = bisect.bisect_right(self._line_addrs, addr) - 1
        if i < 0:
            return None
        name = self._lines[i][1]
        return name.rsplit("/", 1)[-1] if name else None


class Emulator:
    """The firmware image booted in Unicorn; feed it wire bytes, read its UART output."""

    def __init__(self, elf: str | Path, main: bool = False):
        self.image = img = Image.load(elf)
        self.uc = uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
        self.cs = Cs(CS_ARCH_ARM, CS_MODE_THUMB | CS_MODE_MCLASS)
        self.cs.detail = True
        uc.mem_map(FLASH_BASE, FLASH_SIZE)
        uc.mem_map(RAM_BASE, RAM_SIZE)
        uc.mem_map(RETURN_ADDR & ~0xFFF, 0x1000)
        for vaddr, paddr, data, memsz in img.segments:
            uc.mem_write(paddr, data)     # load image (flash copy of .data included)
            if vaddr != paddr:
                uc.mem_write(vaddr, data)  # what the startup code copies to SRAM
        self._wfi_as_nop(img)
        uc.mmio_map(USART1_BASE, 0x1000, self._usart_read, None, self._usart_write, None)
        uc.mmio_map(SCS_BASE, 0x1000, self._scs_read, None, self._scs_write, None)
        uc.mmio_map(TIM2_BASE, 0x1000, self._tim_read, None, self._tim_write, None)
        self._scs = bytearray(0x1000)
        self.uart_out = bytearray()
        self.uart_times: list[int] = []  # instruction index of every USART1 data-register write
        self.hits: dict[int, list[int]] = {}  # instruction index of every entry of a watched address
        self.count = 0                 # instructions executed so far (whole blocks)
        self._blocks: dict[tuple[int, int], Block] = {}
        self._cur: Block | None = None
        self._cur_base = 0             # self.count before the current block
        self._prev: Block | None = None
        self._cycles = 0.0
        self._cycles_lo = 0.0
        self._cycles_hi = 0.0
        self._cat: Counter[tuple[str, str]] = Counter()
        self._chacha = 0
        self._chacha_entry = img.function_range("edp_chacha_block")[0]
        self._seeds = 0  # edp_drbg_seed calls: the keystream position restarts at each
        self._seed_entry = img.function_range("edp_drbg_seed")[0]
        self.ticks_reads: list[int] = []  # instruction index of each SysTick read via port->ticks
        self._tick_pending = False
        self.marks: list[tuple[int, float, float, float, Counter, int, int, int]] = []
        uc.hook_add(UC_HOOK_BLOCK, self._on_block)
        end = _end_of_bss(img)
        self.scratch = (end + 0xFF) & ~0xFF
        self.stack_top = RAM_BASE + RAM_SIZE
        if self.scratch + SCRATCH_SIZE > self.stack_top - 0x2000:
            raise TraceError("no room for the scratch buffer below the stack")
        self.device = img.symbol("device")
        port_name = next((n for n in img.symbols if n == "port" or n.startswith("port.")), None)
        if port_name is None:
            raise TraceError("no static port struct in the image (main.c)")
        self.port = img.symbol(port_name)
        self._drbg = self.device + img.offset("edp_dev_t", "drbg")
        self._drbg_batch_words = (img.offset("edp_drbg_t", "word") - img.offset("edp_drbg_t", "block")) // 4
        self._rx = bytearray()           # bytes received on USART1, not yet read (main=True)
        self._main_pc: int | None = None  # where main's frame loop waits for input (main=True)
        self._got = False                # the board's current read took a byte (main=True)
        self._idle = False               # a read found nothing waiting and took nothing (main=True)
        if main:
            self._boot_main()
        else:
            self._boot()

    def _wfi_as_nop(self, img: Image) -> None:
        """The board's wait for input (WFI in edp_board_uart_read, ports/qemu) returns at once, as
        a spurious wake would: this model has no interrupts, and Unicorn would stop at a WFI. The
        read then finds no byte and main's frame loop comes back for input, where _boot_main's
        hook stops. Only that function is scanned (a literal pool elsewhere may hold 0xBF30)."""
        if "edp_board_uart_read" not in img.symbols:
            return
        start, end = img.function_range("edp_board_uart_read")
        code = bytes(self.uc.mem_read(start, end - start))
        for insn in self.cs.disasm(code, start):
            if insn.mnemonic == "wfi":
                self.uc.mem_write(insn.address, b"\x00\xbf")  # NOP (T1)

    # ---- memory-mapped peripherals ------------------------------------------------
    def _usart_read(self, uc, offset, size, data) -> int:
        if offset == 0x00:  # SR: TXE | TC, and RXNE while received bytes wait (main=True only)
            if not self._rx and not self._got:
                self._idle = True
            return 0xC0 | (0x20 if self._rx else 0)
        if offset == 0x04 and self._rx:
            self._got = True
            return self._rx.pop(0)
        return 0

    def _usart_write(self, uc, offset, size, value, data) -> None:
        if offset == 0x04:
            self.uart_out.append(value & 0xFF)
            self.uart_times.append(self._exact_count())

    def _tim_read(self, uc, offset, size, data) -> int:
        """TIM2's counter as QEMU -icount shift=3 shows it: 8 ns per executed instruction."""
        return (self._exact_count() * NS_PER_INSN) & 0xFFFFFFFF if offset == TIM_CNT else 0

    def _tim_write(self, uc, offset, size, value, data) -> None:
        pass

    def _scs_read(self, uc, offset, size, data) -> int:
        if offset == SYST_CVR:
            n = self._exact_count()
            if self._tick_pending:
                self.ticks_reads.append(n)
                self._mark(n)
                self._tick_pending = False
            return SYSTICK_RELOAD - (int(n * TICKS_PER_INSN) & SYSTICK_RELOAD)
        return int.from_bytes(self._scs[offset:offset + size], "little")

    def _scs_write(self, uc, offset, size, value, data) -> None:
        self._scs[offset:offset + size] = value.to_bytes(size, "little")

    # ---- counting ---------------------------------------------------------------------
    def _decode_block(self, address: int, size: int) -> Block:
        code = bytes(self.uc.mem_read(address, size))
        insns = []
        for ins in self.cs.disasm(code, address):
            nregs = 0
            if ins.mnemonic.split(".")[0] in ("push", "pop", "ldm", "stm", "ldmia", "stmia", "stmdb",
                                             "ldmdb", "vpush", "vpop", "vldmia", "vstmia", "vldmdb",
                                             "vstmdb", "vldm", "vstm"):
                nregs = max(len(ins.operands) - (0 if ins.mnemonic.startswith(("push", "pop", "vpush", "vpop"))
                                                 else 1), 1)
            t = timing.classify(ins.mnemonic, ins.op_str, nregs)
            fn = self.image.function_at(ins.address)
            insns.append(Insn(ins.address, ins.size, ins.mnemonic, ins.op_str, t,
                              category_of(self.image.source_at(ins.address), fn), fn))
        if not insns or sum(i.size for i in insns) != size:
            raise TraceError(f"cannot decode the block at 0x{address:08x}")
        cyc = hi = 0
        prev_ldst = False
        cats: Counter[tuple[str, str]] = Counter()
        for i, ins in enumerate(insns):
            c = ins.timing.base
            if ins.timing.ldst_single and prev_ldst:
                c -= 1
            h = c
            if ins.timing.writes_pc:
                c += timing.P_NOMINAL
                h += timing.P_MAX + timing.FLASH_WAIT_STATES_168MHZ
            if ins.timing.flash_load:
                h += timing.FLASH_WAIT_STATES_168MHZ
            prev_ldst = ins.timing.ldst_single
            cyc += c
            hi += h
            cats[(ins.category, ins.function)] += 1
        last = insns[-1]
        return Block(address, insns, last.address + last.size, len(insns), cyc, hi,
                     insns[0].timing.ldst_single, last.timing.ldst_single, cats)

    def _on_block(self, uc, address, size, user) -> None:
        key = (address, size)
        blk = self._blocks.get(key)
        if blk is None:
            blk = self._blocks[key] = self._decode_block(address, size)
        prev = self._prev
        cyc, lo, hi = blk.cycles, blk.cycles, blk.cycles_hi
        lo -= sum(timing.P_NOMINAL - timing.P_MIN for i in blk.insns if i.timing.writes_pc)
        if prev is not None:
            last = prev.insns[-1].timing
            if last.branch and (last.fixed_fallthrough or address != prev.fallthrough):
                cyc += timing.P_NOMINAL
                lo += timing.P_MIN
                hi += timing.P_MAX + timing.FLASH_WAIT_STATES_168MHZ
            if prev.last_ldst and blk.first_ldst:
                cyc -= 1
                lo -= 1
                hi -= 1
        self._cycles += cyc
        self._cycles_lo += lo
        self._cycles_hi += hi
        self._cat.update(blk.per_category)
        if address == self._chacha_entry:
            self._chacha += 1
        elif address == self._seed_entry:
            self._seeds += 1
        self._cur_base = self.count
        self.count += blk.count
        self._cur = blk
        self._prev = blk

    def _exact_count(self) -> int:
        """Instructions executed up to and including the one now accessing memory."""
        return self._exact_count_at(self.uc.reg_read(UC_ARM_REG_PC) & ~1)

    def _exact_count_at(self, pc: int) -> int:
        """Instructions executed up to and including the one at pc in the current block."""
        blk = self._cur
        if blk is not None:
            for i, ins in enumerate(blk.insns):
                if ins.address == pc:
                    return self._cur_base + i + 1
        return self.count

    def _mark(self, n: int) -> None:
        """Snapshot at a port->ticks read: exact instruction index, cycle sums, (category,
        function) counts and ChaCha12 blocks (the last three at block granularity), and the
        keystream position."""
        self.marks.append((n, self._cycles, self._cycles_lo, self._cycles_hi, Counter(self._cat), self._chacha,
                           self.keystream_position(), self._seeds))

    @property
    def chacha_blocks(self) -> int:
        """ChaCha12 blocks computed since the boot."""
        return self._chacha

    def keystream_position(self) -> int:
        """Keystream bits the DRBG has handed out since its last seed (drbg.h): every batch
        generated (the block counter over the blocks per batch) outputs its words after the
        next key's, less the words not yet read and the bits still buffered in acc. Exact at
        the port->ticks reads, where no sampling loop holds bits in registers."""
        img, base = self.image, self._drbg
        counter, = struct.unpack("<I", self.uc.mem_read(base + img.offset("edp_drbg_t", "state") + 48, 4))
        word, = struct.unpack("<I", self.uc.mem_read(base + img.offset("edp_drbg_t", "word"), 4))
        nbits, = struct.unpack("<I", self.uc.mem_read(base + img.offset("edp_drbg_t", "nbits"), 4))
        words = self._drbg_batch_words
        batches = counter // (words // 16)
        return 32 * (batches * (words - DRBG_KEY_WORDS) - (words - word)) - nbits

    def _on_ticks_entry(self, uc, address, size, user) -> None:
        self._tick_pending = True

    def watch(self, name: str) -> list[int]:
        """Record the instruction index at every entry of function `name` (returns the list)."""
        addr = self.image.symbol(name) & ~1
        hits = self.hits.setdefault(addr, [])

        def hook(uc, address, size, user) -> None:
            hits.append(self._exact_count_at(address))

        self.uc.hook_add(UC_HOOK_CODE, hook, begin=addr, end=addr)
        return hits

    # ---- calls --------------------------------------------------------------------------
    def call(self, name_or_addr: str | int, *args: int, fargs: tuple[float, ...] = (),
             limit: int = 200_000_000) -> int:
        """Call a function with integer args (r0-r3, the rest on the stack) and float args s0..
        (hard-float ABI); returns r0."""
        if self._main_pc is not None:
            raise TraceError("main runs this image: a call would overwrite its stack")
        addr = self.image.symbol(name_or_addr) if isinstance(name_or_addr, str) else name_or_addr
        uc = self.uc
        for reg, v in zip((UC_ARM_REG_R0, UC_ARM_REG_R1, UC_ARM_REG_R2, UC_ARM_REG_R3), args):
            uc.reg_write(reg, v & 0xFFFFFFFF)
        for i, f in enumerate(fargs):
            uc.reg_write(UC_ARM_REG_S0 + i, struct.unpack("<I", struct.pack("<f", f))[0])
        rest = [v & 0xFFFFFFFF for v in args[4:]]
        sp = self.stack_top - 8 * ((len(rest) + 1) // 2)      # 8-byte aligned
        uc.mem_write(sp, struct.pack(f"<{len(rest)}I", *rest))
        uc.reg_write(UC_ARM_REG_SP, sp)
        uc.reg_write(UC_ARM_REG_LR, RETURN_ADDR | 1)
        self._prev = None
        try:
            uc.emu_start(addr | 1, RETURN_ADDR, count=limit)
        except UcError as exc:
            pc = uc.reg_read(UC_ARM_REG_PC)
            raise TraceError(f"emulation fault {exc} at 0x{pc:08x} ({self.image.function_at(pc)})") from None
        if uc.reg_read(UC_ARM_REG_PC) & ~1 != RETURN_ADDR:
            raise TraceError(f"{name_or_addr} did not return within {limit} instructions")
        return uc.reg_read(UC_ARM_REG_R0)

    def _boot(self) -> None:
        self.call("edp_board_init", self.port)
        ticks_fn = struct.unpack("<I", self.uc.mem_read(self.port + self.image.offset("edp_port_t", "ticks"), 4))[0]
        self.uc.hook_add(UC_HOOK_CODE, self._on_ticks_entry, begin=ticks_fn & ~1, end=ticks_fn & ~1)
        self.call("edp_device_init", self.device, self.port)
        if "edp_naive_laplace" in self.image.symbols:   # test builds
            naive_off = self.image.offset("edp_dev_t", "naive")
            self.uc.mem_write(self.device + naive_off, struct.pack("<I", self.image.symbol("edp_naive_laplace")))

    def _boot_main(self) -> None:
        """Run main until its frame loop asks the board for input again after a read that found
        none (so whatever the board does between answers, e.g. its dead-stack wipe, has run)."""
        reader = self.image.symbol("edp_board_uart_read") & ~1

        def wait_for_input(uc, address, size, user) -> None:
            if not self._rx and self._idle:
                uc.emu_stop()  # before the instruction: resuming here reads the new bytes
            else:
                self._idle = self._got = False

        self.uc.hook_add(UC_HOOK_CODE, wait_for_input, begin=reader, end=reader)
        if "edp_qemu_host_entropy" in self.image.symbols:  # what QEMU's generic loader writes at a start
            self.uc.mem_write(self.image.symbol("edp_qemu_host_entropy"), bytes(range(0xA0, 0xC0)))
        initial_sp, = struct.unpack("<I", self.uc.mem_read(FLASH_BASE, 4))  # the vector table's, as at reset
        self._run(self.image.symbol("main"), initial_sp)
        ticks_fn = struct.unpack("<I", self.uc.mem_read(self.port + self.image.offset("edp_port_t", "ticks"), 4))[0]
        self.uc.hook_add(UC_HOOK_CODE, self._on_ticks_entry, begin=ticks_fn & ~1, end=ticks_fn & ~1)
        self.uart_out.clear()  # the banner

    def _run(self, addr: int, sp: int | None = None, limit: int = 200_000_000) -> None:
        """Run main (main=True) from addr until its frame loop waits for input again."""
        if sp is not None:
            self.uc.reg_write(UC_ARM_REG_SP, sp)
        self._prev = None
        try:
            self.uc.emu_start(addr | 1, RETURN_ADDR, count=limit)
        except UcError as exc:
            pc = self.uc.reg_read(UC_ARM_REG_PC)
            raise TraceError(f"emulation fault {exc} at 0x{pc:08x} ({self.image.function_at(pc)})") from None
        pc = self.uc.reg_read(UC_ARM_REG_PC) & ~1
        if pc != self.image.symbol("edp_board_uart_read") & ~1 or self._rx:
            raise TraceError(f"main did not come back for input within {limit} instructions")
        self._main_pc = pc

    def install_model(self) -> None:
        """What main() does after edp_device_init: edp_device_set_model(&device, edp_app_model)
        (the model field of the device's state, edp_dev_t)."""
        ptr = self.uc.mem_read(self.image.symbol("edp_app_model"), 4)
        self.uc.mem_write(self.device + self.image.offset("edp_dev_t", "model"), bytes(ptr))

    def write(self, data: bytes) -> None:
        """Feed received bytes to edp_device_rx (in scratch-sized pieces), or with main=True to
        USART1, running main's frame loop until it has read them all and waits for more."""
        if self._main_pc is not None:
            if data:
                self._rx += data
                self._run(self._main_pc)
            return
        for i in range(0, len(data), SCRATCH_SIZE):
            piece = data[i:i + SCRATCH_SIZE]
            self.uc.mem_write(self.scratch, piece)
            self.call("edp_device_rx", self.device, self.scratch, len(piece))

    def read_uart(self) -> bytes:
        out = bytes(self.uart_out)
        self.uart_out.clear()
        return out

    def steps(self) -> list[StepTrace]:
        """The measured regions (pairs of port->ticks reads) since the last call, then forget them."""
        out = []
        marks = self.marks
        for a, b in zip(marks[0::2], marks[1::2]):
            cats = b[4] - a[4]
            t = StepTrace(instructions=b[0] - a[0], cycles=b[1] - a[1], cycles_lo=b[2] - a[2],
                          cycles_hi=b[3] - a[3], chacha_blocks=b[5] - a[5],
                          keystream_bits=b[6] - a[6] if b[7] == a[7] else None)
            for (cat, fn), n in cats.items():
                t.categories[cat] += n
                t.functions[fn] += n
            out.append(t)
        self.marks = marks[len(out) * 2:]
        return out


def _end_of_bss(img: Image) -> int:
    end = RAM_BASE
    for vaddr, _paddr, _data, memsz in img.segments:
        if RAM_BASE <= vaddr < RAM_BASE + RAM_SIZE:
            end = max(end, vaddr + memsz)
    for name in ("_end", "end", "_ebss"):
        if name in img.symbols:
            end = max(end, img.symbols[name][0])
    return end


class TraceLink:
    """A :class:`edgedp.device.transport.Link` onto an :class:`Emulator`: ``Device(TraceLink(emu))``."""

    def __init__(self, emu: Emulator):
        self.emu = emu
        self._pending = bytearray()

    def write(self, data: bytes) -> None:
        self.emu.write(data)
        self._pending += self.emu.read_uart()

    def read(self, timeout: float) -> bytes:
        out = bytes(self._pending)
        self._pending.clear()
        return out

    def close(self) -> None:
        pass
