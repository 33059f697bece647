"""The dense kernel's ARMv7-M loops (arch/armv7m/model_armv7m.c: four inputs per VLDMIA, the
in % 4 rest in C; four rows per pass, the out % 4 rest one at a time) give the NumPy reference's
bits on shapes the bundled models do not have: in % 4 = 1, 2, 3 and out % 4 = 1, 2, 3, random
weights (a changed summation order shows in the low bits). Built with the image's flags and run
in Unicorn (edgedp.bench.peers' harness); the bundled models are checked the same way in
test_peers.py and on QEMU in tests/hil/test_qemu_infer_raw.py."""
from __future__ import annotations

import numpy as np

from edgedp.bench import peers
from edgedp.model import cgen, reference
from edgedp.model.spec import Dense, DeviceModel, Net


def test_odd_shapes_are_bit_exact() -> None:
    rng = np.random.default_rng(22)
    sizes = [7, 6, 13, 9, 5]          # in % 4 = 3, 2, 1, 1; out % 4 = 2, 1, 1, 1
    layers = tuple(Dense(rng.normal(0, 1, (a, b)).astype(np.float32), rng.normal(0, 1, b).astype(np.float32))
                   for a, b in zip(sizes, sizes[1:]))
    model = DeviceModel("odd", "softmax", 5, (Net(layers, np.arange(5)),), 0.0, 1.0, input_range=(-4.0, 4.0))
    src = peers.peers_dir() / "odd" / "model.c"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(cgen.generate(model))
    h = peers.edgedp_harness("odd", model, src)
    X = rng.normal(0, 2, (40, 7)).astype(np.float32).clip(-4, 4)
    counts, out, _ = peers.measure(h, X, 5)
    ref = reference.run(model, X)
    assert np.array_equal(out.view(np.uint32), ref.view(np.uint32))
    assert min(counts) > sum(a * b for a, b in zip(sizes, sizes[1:]))
