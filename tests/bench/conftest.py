"""Fixtures of the benchmark tests: the QEMU test image and its Unicorn twin."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def qemu_elf() -> Path:
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc is not installed (make setup)")
    from edgedp.device.targets.qemu import ensure_image
    return ensure_image("qemu")


@pytest.fixture
def emulator(qemu_elf: Path):
    """A freshly booted Unicorn copy of the QEMU test image."""
    from edgedp.bench.trace import Emulator
    return Emulator(qemu_elf)
