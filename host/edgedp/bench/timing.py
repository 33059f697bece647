"""Cortex-M4 instruction timing: cycles per executed instruction.

Source: ARM Cortex-M4 Processor Technical Reference Manual (ARM DDI 0439B, r0p1),
Table 3-1 "Cortex-M4 instruction set summary" (integer core) and Table 7-1
"FPU instruction set" (FPv4-SP). Abbreviations as in the manual:

- P: pipeline refill after a taken branch or a write to PC, 1 to 3 cycles
  ("depending on the alignment and width of the target instruction, and whether
  the processor manages to speculate the address early"); the estimate uses
  ``P = 2`` and the bounds use 1 and 3.
- N: registers in the list of LDM/STM/PUSH/POP/VLDM/VSTM/VPUSH/VPOP.
- Neighbouring load/store single instructions pipeline their address and data
  phases: a load or store directly after another one costs 1 cycle instead of 2
  (TRM §3.3.1, note to Table 3-1).
- Conditional branches not taken: 1 cycle. IT: 1 cycle (the TRM allows folding to
  0 onto a preceding 16-bit instruction; not modelled, so IT is counted at 1).
- SDIV/UDIV: 2 to 12 cycles with early termination; charged 12 (worst case).

Memory assumption (stated, not measured): the table counts assume zero wait states.
On an STM32F4 at 168 MHz the flash needs 5 wait states (RM0090 Table 10, 2.7-3.6 V);
the ART accelerator (prefetch buffer, 64 x 128-bit instruction cache lines, 8 data
lines) hides them for a hot loop that fits its cache, which the DP step's inner loops
do. ``est_cycles`` therefore charges no wait states. ``est_cycles_hi`` is a pessimistic
bound: P = 3 and an extra 5 wait states for every taken branch (an I-cache miss on
every branch target) and every load from flash (literal pools, constant tables).
SRAM data accesses have no wait states.
"""
from __future__ import annotations

from dataclasses import dataclass

P_NOMINAL = 2
P_MIN, P_MAX = 1, 3
FLASH_WAIT_STATES_168MHZ = 5
CORE_HZ = 168_000_000

# Single-cycle data processing (Table 3-1: move, add, subtract, multiply 32-bit,
# saturate, compare, logical, shift, rotate, count leading zeroes, extend, bit field,
# reverse, parallel add/subtract, packing, SIMD-free DSP ops).
_ONE = {
    "mov", "movs", "movw", "movt", "mvn", "mvns", "add", "adds", "addw", "adc", "adcs", "adr",
    "sub", "subs", "subw", "sbc", "sbcs", "rsb", "rsbs", "mul", "muls", "umull", "smull",
    "umlal", "smlal", "smulbb", "smulbt", "smultb", "smultt", "smulwb", "smulwt", "smlabb",
    "smlabt", "smlatb", "smlatt", "smlawb", "smlawt", "smuad", "smusd", "smmul", "smmla",
    "smmls", "umaal", "smlad", "smlsd", "smlald", "smlsld", "ssat", "usat", "ssat16", "usat16",
    "qadd", "qsub", "qdadd", "qdsub", "cmp", "cmn", "and", "ands", "eor", "eors", "orr", "orrs",
    "orn", "orns", "bic", "bics", "tst", "teq", "lsl", "lsls", "lsr", "lsrs", "asr", "asrs",
    "ror", "rors", "rrx", "rrxs", "clz", "rbit", "rev", "rev16", "revsh", "sxtb", "sxth",
    "uxtb", "uxth", "sxtab", "sxtah", "uxtab", "uxtah", "sxtb16", "uxtb16", "bfc", "bfi",
    "sbfx", "ubfx", "neg", "negs", "nop", "it", "ite", "itt", "itee", "itet", "itte", "ittt",
    "iteee", "iteet", "itete", "itett", "ittee", "ittet", "ittte", "itttt", "sel", "usad8",
    "usada8", "pkhbt", "pkhtb", "sadd8", "sadd16", "ssub8", "ssub16", "uadd8", "uadd16",
    "usub8", "usub16", "shadd8", "shadd16", "uhadd8", "uhadd16", "qadd8", "qadd16", "uqadd8",
    "uqadd16", "qsub8", "qsub16", "uqsub8", "uqsub16", "cpsid", "cpsie", "mrs", "msr",
}
_TWO = {"mla", "mls"}
_DIV = {"sdiv", "udiv"}
_LDST_SINGLE = {
    "ldr", "ldrb", "ldrh", "ldrsb", "ldrsh", "ldrt", "ldrbt", "ldrht", "ldrex", "ldrexb",
    "ldrexh", "str", "strb", "strh", "strt", "strex", "strexb", "strexh",
}
_LDST_DOUBLE = {"ldrd", "strd"}
_MULTI = {"ldm", "ldmia", "ldmdb", "stm", "stmia", "stmdb", "push", "pop", "ldmfd", "stmfd"}
_BRANCH = {"b", "bl", "bx", "blx", "cbz", "cbnz", "tbb", "tbh"}
# FPv4-SP, Table 7-1.
_FP_ONE = {
    "vadd", "vsub", "vmul", "vnmul", "vabs", "vneg", "vcmp", "vcmpe", "vcvt", "vcvtr", "vcvtb",
    "vcvtt", "vmov", "vmrs", "vmsr",
}
_FP_THREE = {"vmla", "vmls", "vnmla", "vnmls", "vfma", "vfms", "vfnma", "vfnms"}
_FP_14 = {"vdiv", "vsqrt"}
_FP_LDST = {"vldr", "vstr"}
_FP_MULTI = {"vldm", "vldmia", "vldmdb", "vstm", "vstmia", "vstmdb", "vpush", "vpop"}

COND_SUFFIXES = ("eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs", "vc", "hi", "ls", "ge",
                 "lt", "gt", "le", "al")


@dataclass(frozen=True)
class InsnTiming:
    """Timing class of one static instruction."""

    base: int           # cycles without branch refill, before load/store pipelining
    ldst_single: bool   # pipelines with a neighbouring load/store single
    branch: bool        # may be taken: + P when the next executed address is not the fall-through
    writes_pc: bool     # always refills (pop {pc}, ldr pc, bx, mov pc)
    flash_load: bool    # PC-relative load (literal pool in flash)
    fixed_fallthrough: bool = False  # unconditional branch: always taken


def base_mnemonic(mnemonic: str) -> tuple[str, bool]:
    """Strip width qualifiers (.w/.n), data types (.f32) and condition codes.

    Returns (mnemonic, conditional)."""
    m = mnemonic.lower().split(".")[0]
    if m in _ALL or m.startswith("it"):
        return m, False
    for c in COND_SUFFIXES:
        if m.endswith(c) and m[: -len(c)] in _ALL:
            return m[: -len(c)], c != "al"
    if m.endswith("s") and m[:-1] in _ALL:
        return m[:-1], False
    return m, False


_ALL = (_ONE | _TWO | _DIV | _LDST_SINGLE | _LDST_DOUBLE | _MULTI | _BRANCH | _FP_ONE | _FP_THREE
        | _FP_14 | _FP_LDST | _FP_MULTI | {"svc", "bkpt", "dmb", "dsb", "isb", "wfi", "wfe"})


def classify(mnemonic: str, op_str: str, nregs: int = 0) -> InsnTiming:
    """Timing of one Thumb-2 instruction as printed by capstone (mnemonic, operands).

    nregs: register-list length for multiple loads/stores."""
    m, cond = base_mnemonic(mnemonic)
    ops = op_str.replace(" ", "").lower()
    dest = ops.split(",")[0] if ops else ""
    if m in _BRANCH:
        if m in ("tbb", "tbh"):
            return InsnTiming(2 + 1, False, False, True, False)
        if m in ("cbz", "cbnz"):
            return InsnTiming(1, False, True, False, False)
        uncond = not cond
        if m in ("bx", "blx") and not cond:
            return InsnTiming(1, False, False, True, False)
        return InsnTiming(1, False, True, False, False, fixed_fallthrough=uncond)
    if m in _MULTI:
        writes_pc = m in ("pop", "ldm", "ldmia", "ldmfd") and "pc" in ops
        return InsnTiming(1 + max(nregs, 1), False, False, writes_pc, False)
    if m in _LDST_DOUBLE:
        return InsnTiming(3, False, False, False, "[pc" in ops)
    if m in _LDST_SINGLE:
        writes_pc = m == "ldr" and dest == "pc"
        return InsnTiming(2, not writes_pc, False, writes_pc, "[pc" in ops)
    if m in _FP_MULTI:
        return InsnTiming(1 + max(nregs, 1), False, False, False, False)
    if m in _FP_LDST:
        double = ops.startswith("d")
        return InsnTiming(3 if double else 2, False, False, False, "[pc" in ops)
    if m in _FP_14:
        return InsnTiming(14, False, False, False, False)
    if m in _FP_THREE:
        return InsnTiming(3, False, False, False, False)
    if m in _FP_ONE:
        # VMOV of a double pair between core and FP registers moves two words: 2 cycles.
        if m == "vmov" and ops.count(",") == 2 and ops.startswith(("r", "d")):
            return InsnTiming(2, False, False, False, False)
        return InsnTiming(1, False, False, False, False)
    if m in _TWO:
        return InsnTiming(2, False, False, False, False)
    if m in _DIV:
        return InsnTiming(12, False, False, False, False)
    if m in ("mov", "add") and dest == "pc":
        return InsnTiming(1, False, False, True, False)
    return InsnTiming(1, False, False, False, False)
