"""The entropy limit of the DP step (issue 22): what drawing a sample's randomness must cost.

A sample of the discrete Laplace law with scale t lattice steps carries

    H(t) = log2((1 + r) / (1 - r)) + 2 r / (1 - r^2) / t * log2(e) bits,  r = exp(-1/t)

(-sum p log2 p in closed form: P(z) = (1 - r) / (1 + r) r^|z|, E|z| = 2 r / (1 - r^2)). No sampler
can use fewer keystream bits on average, and every bit costs the generator's instructions per bit:
one batch (edp_drbg_next_block: EDP_DRBG_BATCH_BLOCKS, six, ChaCha12 blocks and the key erasure) counted in Unicorn on
the image, over the words it outputs (the batch's words after the next key's). The limit per class adds 4 operations (load the input,
round it, add the noise, store the value):

    limit = H(t) * instructions per bit + 4.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path

from ..mech.types import MechConfig
from .trace import Emulator

OPERATIONS = 4


def sample_entropy_bits(t: float) -> float:
    """Shannon entropy in bits of the discrete Laplace law with scale t."""
    r = math.exp(-1.0 / t)
    return math.log2((1.0 + r) / (1.0 - r)) + 2.0 * r / (1.0 - r * r) / t * math.log2(math.e)


@dataclass(frozen=True)
class DrbgBatch:
    """One keystream batch on an image: its instructions and what it hands out."""

    instructions: int  # one edp_drbg_next_block: the ChaCha12 blocks and the key erasure
    blocks: int        # ChaCha12 blocks per batch
    output_bits: int   # the batch's words after the next key's

    @property
    def per_bit(self) -> float:
        return self.instructions / self.output_bits


def drbg_batch(elf: str | Path) -> DrbgBatch:
    """One keystream batch, counted in Unicorn on this image."""
    emu = Emulator(elf)
    img = emu.image
    drbg = emu.device + img.offset("edp_dev_t", "drbg")
    before, blocks = emu.count, emu.chacha_blocks
    emu.call("edp_drbg_next_block", drbg)
    insns = emu.count - before
    batch = (img.offset("edp_drbg_t", "word") - img.offset("edp_drbg_t", "block")) // 4
    first = struct.unpack("<I", emu.uc.mem_read(drbg + img.offset("edp_drbg_t", "word"), 4))[0]
    return DrbgBatch(insns, emu.chacha_blocks - blocks, 32 * (batch - first))


def limit_per_class(k: int, epsilon: float, per_bit: float, cfg: MechConfig) -> dict:
    """The entropy limit of a (k, epsilon) row of the benchmark, for its configuration."""
    bits = sample_entropy_bits(cfg.lattice(k).t)
    return {"entropy_bits": bits, "entropy_limit_per_class": bits * per_bit + OPERATIONS}
