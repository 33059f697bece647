"""The memory check of `edgedp deploy` (edgedp.model.memory): the core's own footprint it assumes
covers the image built without a model, and a deployed graph's image grows by about what the check
counts for it."""
from __future__ import annotations

import subprocess

from ..helpers import ROOT, make, require

require("tflite")  # the importer

from edgedp.model import deploy, memory, tflite_import


def sizes(elf: str) -> tuple[int, int]:
    """(.text + .data, .data + .bss) of an ELF (arm-none-eabi-size)."""
    out = subprocess.run(["arm-none-eabi-size", str(ROOT / elf)], capture_output=True, text=True, check=True)
    text, data, bss = (int(v) for v in out.stdout.splitlines()[1].split()[:3])
    return text + data, data + bss


def test_core_footprint_covers_the_image_without_a_model() -> None:
    make("build/qemu-model-none/edgedp.elf")
    flash, ram = sizes("build/qemu-model-none/edgedp.elf")
    assert flash <= memory.CORE_FLASH and ram <= memory.CORE_RAM, (flash, ram)


def test_a_graph_image_grows_by_its_counted_footprint() -> None:
    deploy.deploy(str(ROOT / "examples/models/digits_cnn_int8.tflite"), ROOT / "build/gen/models/test_digits_cnn_int8.c")
    make("build/qemu-model-none/edgedp.elf", "build/qemu-model-test_digits_cnn_int8/edgedp.elf")
    f0, r0 = sizes("build/qemu-model-none/edgedp.elf")
    f1, r1 = sizes("build/qemu-model-test_digits_cnn_int8/edgedp.elf")
    fp = memory.footprint(tflite_import.device_model(ROOT / "examples/models/digits_cnn_int8.tflite"))
    assert 0.9 * fp.flash <= f1 - f0 <= 1.1 * fp.flash + 1024, (f1 - f0, fp.flash)  # + the kernels' code
    assert fp.ram <= r1 - r0 + 64 and r1 - r0 <= fp.ram + 64, (r1 - r0, fp.ram)
