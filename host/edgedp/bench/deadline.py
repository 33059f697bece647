"""Worst paths behind the release deadline's constants (firmware/core/src/deadline.c).

The deadline bounds a window's instructions by draws x (instructions of one draw) + refills x
(instructions of one refill) + the parts fixed by the request (deadline.h). This module measures,
on the compiled image under Unicorn, what those constants must cover:

- ``static``: instructions in a function's code. A pass through code without a backward branch
  executes each at most once, so this bounds one pass of the sampler loop's body
  (edp_dlap_add), of edp_dlap_accept_rest, accept_exact's own code and edp_dlap_high_part's body
  (one tail round; its tie inlined);
- ``product``: the exact acceptance threshold's product for nchunks chunks: its loop trip counts
  depend on nchunks only, so one call measures it exactly;
- ``less_than``: a comparison over n limbs, run with a keystream forced equal to the limbs so that
  it goes through every one (its longest path);
- ``refill``: edp_drbg_next_block (4 ChaCha20 blocks and the key erasure: no data-dependent branch);
- ``prepare``: edp_mech_prepare at a configuration with the most chunks.

``draw_bound(nchunks)`` adds them up: the longest draw, DRBG refills excluded. The test
(tests/firmware/test_deadline.py) checks that deadline.c's constants are at least these figures.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from capstone import CS_ARCH_ARM, CS_MODE_MCLASS, CS_MODE_THUMB, Cs

from .trace import Emulator

SAMPLER_PASS = ("edp_dlap_add", "edp_dlap_accept_rest", "accept_exact", "edp_dlap_high_part")


@dataclass
class WorstPaths:
    static: dict[str, int]
    product: dict[int, int]       # nchunks -> instructions
    less_than: dict[int, int]     # limbs -> instructions (every limb compared)
    refill: int
    prepare: int

    def draw_bound(self, nchunks: int) -> int:
        """Longest draw with nchunks chunks (refills excluded): one pass of each sampler
        function, the product, a comparison over every limb and a one-limb tie."""
        base = sum(self.static[f] for f in SAMPLER_PASS) + self.less_than[1]
        if not nchunks:
            return base
        return base + self.product[nchunks] + self.less_than[2 * nchunks]


def static_size(emu: Emulator, name: str) -> int:
    start, end = emu.image.function_range(name)
    code = bytes(emu.uc.mem_read(start, end - start))
    cs = Cs(CS_ARCH_ARM, CS_MODE_THUMB | CS_MODE_MCLASS)
    return sum(1 for _ in cs.disasm(code, start))


def _counted(emu: Emulator, name: str, *args: int) -> int:
    before = emu.count
    emu.call(name, *args)
    return emu.count - before


def measure(elf: str | Path, max_chunks: int = 6) -> WorstPaths:
    emu = Emulator(elf)
    img = emu.image
    plan, cfg, limbs, rng = emu.scratch, emu.scratch + 0x2000, emu.scratch + 0x2400, emu.scratch + 0x2800
    dlap = plan + img.offset("edp_mech_plan_t", "dlap")
    r_block, r_word = img.offset("edp_drbg_t", "block"), img.offset("edp_drbg_t", "word")
    r_acc, r_nbits = img.offset("edp_drbg_t", "acc"), img.offset("edp_drbg_t", "nbits")
    product, less_than, prepare = {}, {}, 0
    for nc in range(1, max_chunks + 1):
        # epsilon 1, m = 20, k = 1, t ~ 2^(4 nc + 3.5) (2^24.5 for 6 chunks, L = 21).
        sens = 2.0 ** (min(4 * nc + 3.5, 24.5) - 20)
        emu.uc.mem_write(cfg, struct.pack("<Ifffi", 1_000_000, 0.0, 1.0, sens, 20))
        prepare = max(prepare, _counted(emu, "edp_mech_prepare", plan, cfg, 1))
        got = struct.unpack("<I", emu.uc.mem_read(dlap + img.offset("edp_dlap_t", "nchunks"), 4))[0]
        if got != nc:
            raise RuntimeError(f"configuration for {nc} chunks gave {got}")
        L = struct.unpack("<I", emu.uc.mem_read(dlap + img.offset("edp_dlap_t", "L"), 4))[0]
        product[nc] = _counted(emu, "product", dlap, (1 << L) - 1, limbs)
    # A keystream equal to the limbs, top limb first: less_than compares every one.
    n_max = 2 * max_chunks
    words = struct.unpack(f"<{n_max}I", emu.uc.mem_read(limbs, 4 * n_max))
    for n in range(1, n_max + 1):
        emu.uc.mem_write(rng + r_block + 4 * 8, struct.pack(f"<{n}I", *reversed(words[:n])))
        emu.uc.mem_write(rng + r_word, struct.pack("<I", 8))
        emu.uc.mem_write(rng + r_acc, bytes(8))
        emu.uc.mem_write(rng + r_nbits, bytes(4))
        less_than[n] = _counted(emu, "less_than", rng, limbs, n, 0)
    refill = _counted(emu, "edp_drbg_next_block", rng)
    static = {f: static_size(emu, f) for f in SAMPLER_PASS}
    return WorstPaths(static, product, less_than, refill, prepare)


def firmware_constants(source: str | Path) -> dict[str, int]:
    """The DL_* and EDP_DEADLINE_* constants of deadline.c / deadline.h."""
    out = {}
    for line in Path(source).read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "#define" and parts[2].rstrip("u").isdigit():
            out[parts[1]] = int(parts[2].rstrip("u"))
    return out
