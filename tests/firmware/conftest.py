"""Fixtures of the tests that run the ARM images instruction by instruction: a Unicorn copy."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def emulator(qemu_elf: Path):
    """A freshly booted Unicorn copy of the QEMU test image."""
    from edgedp.bench.trace import Emulator
    return Emulator(qemu_elf)
