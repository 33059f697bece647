"""Does a model fit the board: its flash (parameters, operator descriptors) and RAM (buffers, a
graph's arena) beside the core's own, against the production image's memory map
(firmware/ports/stm32f4/stm32f4.ld; the QEMU test image's is larger). `edgedp deploy` refuses a
model that does not fit, with the numbers (docs/model.md, "Memory")."""
from __future__ import annotations

from dataclasses import dataclass

from .spec import DeviceModel

IMAGE_FLASH = 640 * 1024
"""stm32f4.ld's FLASH region: the program and the model's constant data."""
IMAGE_RAM = 128 * 1024
"""stm32f4.ld's RAM region (the CCM is not used)."""
MIN_STACK = 8 * 1024
"""stm32f4.ld's _min_stack: RAM the link keeps free for the stack."""
CORE_FLASH = 56 * 1024
"""The image without a model (build/qemu-model-none: 48.6 KiB of .text + .data), rounded up;
tests/firmware/test_model_memory.py holds it above the build."""
CORE_RAM = 32 * 1024
"""Its .data + .bss (29.9 KiB: the device state, frame buffers, the store), rounded up."""


@dataclass(frozen=True)
class Footprint:
    flash: int        # the model's bytes in flash
    ram: int          # its bytes in RAM (scratch floats, int8 activations, a graph's arena)
    flash_free: int   # what the image leaves for a model
    ram_free: int

    @property
    def fits(self) -> bool:
        return self.flash <= self.flash_free and self.ram <= self.ram_free


def footprint(model: DeviceModel) -> Footprint:
    return Footprint(model.flash_bytes, model.scratch_bytes, IMAGE_FLASH - CORE_FLASH,
                     IMAGE_RAM - CORE_RAM - MIN_STACK)


def check_fits(model: DeviceModel) -> Footprint:
    """The model's footprint, or ValueError naming what does not fit and by how much."""
    f = footprint(model)
    if f.flash > f.flash_free:
        raise ValueError(f"model {model.name!r} needs {f.flash} bytes of flash; the STM32F4 image leaves "
                         f"{f.flash_free} ({IMAGE_FLASH} less {CORE_FLASH} for the core)")
    if f.ram > f.ram_free:
        raise ValueError(f"model {model.name!r} needs {f.ram} bytes of RAM; the STM32F4 image leaves {f.ram_free} "
                         f"({IMAGE_RAM} less {CORE_RAM} for the core and {MIN_STACK} of stack)")
    return f
