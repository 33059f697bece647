"""The INFER deadline's graph part (deadline.c EDP_DL_G_*) against edp_model_graph_run on the
Cortex-M4 image (Unicorn): for each committed TFLite CNN, the model's bound is at least 1.25 times
its longest measured run plus wipe (the rule for every model, tests/firmware/test_deadline.py) and at
most 1.5 times (issue 40 item 4)."""
from __future__ import annotations

import struct

from ..helpers import ROOT, make, require

require("unicorn", "capstone", "elftools")  # the image in Unicorn
require("tflite")  # the importer

import numpy as np
import pytest

from edgedp.bench.trace import Emulator
from edgedp.model import deploy


@pytest.mark.parametrize("name", ("digits_cnn_int8", "digits_cnn2_int8"))
def test_graph_deadline_covers_the_run_within_1_5x(name: str) -> None:
    deploy.deploy(str(ROOT / f"examples/models/{name}.tflite"), ROOT / f"build/gen/models/test_{name}.c")
    make(f"build/qemu-model-test_{name}/edgedp.elf")
    emu = Emulator(ROOT / f"build/qemu-model-test_{name}/edgedp.elf")
    m = struct.unpack("<I", emu.uc.mem_read(emu.image.symbol("edp_app_model"), 4))[0]
    rng = np.random.default_rng(3)
    worst = 0
    for k in range(12):  # pixel images, all-dark and all-bright (the clamps' both sides)
        x = rng.uniform(0, 1, 64) if k < 10 else np.full(64, float(k - 10))
        emu.uc.mem_write(emu.scratch, x.astype("<f4").tobytes())
        before = emu.count
        emu.call("edp_model_run", m, emu.scratch)
        emu.call("edp_model_wipe", m)
        worst = max(worst, emu.count - before)
    bound = emu.call("edp_deadline_model", m)
    assert 1.25 * worst <= bound <= 1.5 * worst, (worst, bound, bound / worst)
