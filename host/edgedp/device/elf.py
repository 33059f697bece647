"""Section headers of the firmware images (32-bit little-endian ELF), without a dependency."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

SHF_ALLOC = 0x2


@dataclass(frozen=True)
class Section:
    name: str
    addr: int
    size: int
    alloc: bool  # occupies memory on the target (SHF_ALLOC)


def sections(elf: Path) -> dict[str, Section]:
    """Every named section of ``elf``, by name. ValueError if it is not a 32-bit LE ELF file."""
    data = Path(elf).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 1 or data[5] != 1:
        raise ValueError(f"{elf} is not a 32-bit little-endian ELF file")
    shoff, = struct.unpack_from("<I", data, 0x20)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x2E)

    def header(i: int) -> tuple[int, ...]:
        return struct.unpack_from("<IIIIIIIIII", data, shoff + i * shentsize)

    strtab = header(shstrndx)
    names = data[strtab[4]: strtab[4] + strtab[5]]
    out: dict[str, Section] = {}
    for i in range(1, shnum):
        name_off, _, flags, addr, _, size = header(i)[:6]
        name = names[name_off: names.index(b"\x00", name_off)].decode()
        out[name] = Section(name, addr, size, bool(flags & SHF_ALLOC))
    return out
