"""What a tick is: SysTick under QEMU -icount, DWT cycles on a real board, host nanoseconds.

QEMU run with ``-icount shift=N`` advances its virtual clock by exactly 2^N ns per executed
guest instruction; only while the guest sleeps (``sleep=on``: the qemu port's WFI between
requests, never inside a measured step) does it follow host time. The netduinoplus2 SysTick counts
the 168 MHz core clock of that virtual time, so with shift = 3 (the ``qemu`` target)

    ticks = instructions x 168e6 Hz x 2^3 ns = 1.344 x instructions,
    instructions = ticks / 1.344.

The conversion is checked against a loop of known length: the DP step of the same ELF,
fed the same frames from the same boot state, executed instruction by instruction in
Unicorn (:mod:`edgedp.bench.trace`), whose count is exact (``tests/hil/test_conversion_hil.py``; a loop of
200,000 instructions read 268,804 ticks under QEMU 7.2). Counts are instructions, not cycles:
QEMU charges every instruction the same time (cycle estimates come from the trace).

Renode (the ``renode`` targets) counts its DWT CYCCNT (and SysTick) in virtual time, which
advances by 1 / PerformanceInMips µs per executed instruction (renode/edgedp-stm32f4.repl:
42 MIPS), so at 168 MHz

    ticks = instructions x 168e6 Hz / 42e6 per s = 4 x instructions:

virtual cycles at a flat 4 cycles per instruction, not the silicon's cycles.

On a real STM32F4 the ticks are DWT CYCCNT core cycles (tick_kind ``dwt``), on the native
posix port nanoseconds of the host clock (``host-ns``): neither converts to instructions.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..device.targets.renode import PERFORMANCE_IN_MIPS

ICOUNT_SHIFT = 3
"""The qemu target's ``-icount shift=3,sleep=on`` (edgedp.device.targets.qemu)."""


def ns_per_instruction(shift: int = ICOUNT_SHIFT) -> float:
    return float(2 ** shift)


def ticks_per_instruction(tick_hz: int, shift: int = ICOUNT_SHIFT) -> float:
    """SysTick ticks per executed instruction under -icount shift (1.344 at 168 MHz, shift 3)."""
    return tick_hz * ns_per_instruction(shift) * 1e-9


@dataclass(frozen=True)
class TickUnit:
    """How to read a device's ``ticks`` (from INFO's tick_kind and tick_hz)."""

    kind: str          # "systick", "dwt" or "host-ns"
    hz: int
    emulated: bool     # ticks are an emulator's virtual time (QEMU -icount, Renode)
    insn_hz: float | None = None
    """Executed instructions per second of that virtual time (QEMU -icount shift=3: 125e6,
    Renode: PerformanceInMips x 1e6); None where ticks do not count instructions."""
    emulator: str = ""  # "qemu" or "renode" when emulated

    @property
    def counts_instructions(self) -> bool:
        return self.insn_hz is not None

    @property
    def ticks_per_instruction(self) -> float | None:
        return self.hz / self.insn_hz if self.insn_hz else None

    def instructions(self, ticks: float) -> float | None:
        """Executed instructions for a tick count (QEMU -icount SysTick, Renode)."""
        if not self.insn_hz:
            return None
        return ticks * self.insn_hz / self.hz

    def counted_instructions(self, ticks: float) -> float:
        """instructions(), where the ticks must count instructions (ValueError if they do not)."""
        n = self.instructions(ticks)
        if n is None:
            raise ValueError(f"these ticks do not count instructions: {self.describe()}")
        return n

    def cycles(self, ticks: float) -> float | None:
        """Core cycles: a real board's DWT (or SysTick on the core clock), or Renode's virtual
        cycles (DWT at the core clock over virtual time: PerformanceInMips, not silicon)."""
        if self.kind == "dwt" or (self.kind == "systick" and (not self.emulated or self.emulator == "renode")):
            return float(ticks)
        return None

    def seconds(self, ticks: float) -> float | None:
        """Wall (or virtual) time of the ticks; QEMU's is virtual time, 8 ns per instruction."""
        return ticks / self.hz if self.hz else None

    def describe(self) -> str:
        if self.emulator == "renode":
            return (f"{'DWT CYCCNT' if self.kind == 'dwt' else 'SysTick'} at {self.hz / 1e6:g} MHz of Renode's "
                    f"virtual time ({PERFORMANCE_IN_MIPS} MIPS): {self.ticks_per_instruction:g} virtual cycles per "
                    "executed instruction, not silicon cycles")
        if self.counts_instructions:
            return (f"SysTick at {self.hz / 1e6:g} MHz under QEMU -icount shift={ICOUNT_SHIFT}: "
                    f"{ticks_per_instruction(self.hz):g} ticks per executed instruction")
        if self.kind == "dwt":
            return f"DWT CYCCNT: core cycles at {self.hz / 1e6:g} MHz"
        if self.kind == "systick":
            return f"SysTick on the {self.hz / 1e6:g} MHz core clock (real time)"
        return "host clock nanoseconds (native build)"


def tick_unit(info, target_name: str) -> TickUnit:
    """The tick unit of a started target (``info`` from Device.info())."""
    hz = int(info.tick_hz)
    if target_name == "qemu" or target_name.startswith("qemu:"):
        insn_hz = 1e9 / ns_per_instruction() if info.tick_kind == "systick" else None
        return TickUnit(info.tick_kind, hz, True, insn_hz, "qemu")
    if target_name == "renode" or target_name.startswith("renode:"):
        return TickUnit(info.tick_kind, hz, True, PERFORMANCE_IN_MIPS * 1e6, "renode")
    return TickUnit(info.tick_kind, hz, False)
