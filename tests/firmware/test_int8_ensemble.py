"""The int8 ensemble on the Thumb-2 kernels (Unicorn): its nets, which have no hidden layer, share
one widening of the quantised input (model_s8.c), and every net's votes and the last net's
logits still match the integer NumPy reference bit for bit."""
from __future__ import annotations

import struct

import numpy as np

from ..helpers import ROOT, require

require("unicorn", "capstone", "elftools")  # edgedp.bench runs the image in Unicorn

from edgedp.bench.infer import model_image
from edgedp.bench.trace import Emulator
from edgedp.datasets import digits_split
from edgedp.model import cgen, reference


def test_int8_ensemble_sharing_the_widened_input_is_bit_exact() -> None:
    name = "digits_ensemble_int8"
    model = cgen.read(ROOT / "firmware" / "model" / f"{name}.c")
    assert len(model.nets) > 1 and all(len(net.layers) == 1 for net in model.nets)
    emu = Emulator(model_image(name))
    m = struct.unpack("<I", emu.uc.mem_read(emu.image.symbol("edp_app_model"), 4))[0]
    X = np.vstack([digits_split(0).X_test[:12], np.random.default_rng(5).normal(0.5, 2, (4, 64))]).astype(np.float32)
    X = np.clip(X, *model.input_range).astype(np.float32)   # what edp_model_clamp leaves
    raw = reference.run(model, X)
    k, last = model.n_classes, model.nets[-1]
    for i, x in enumerate(X):
        emu.uc.mem_write(emu.scratch, x.tobytes())
        out = emu.call("edp_model_run", m, emu.scratch)
        got = np.frombuffer(bytes(emu.uc.mem_read(out, 4 * k)), "<f4")
        assert got.tobytes() == raw[i].astype("<f4").tobytes(), i
        z = np.frombuffer(bytes(emu.uc.mem_read(out + 4 * k, 4 * len(last.classes))), "<f4")
        want = reference.logits8(last, reference.quantize_input(model.quant, x[None, :]))[0]
        assert z.tobytes() == want.astype("<f4").tobytes(), i
