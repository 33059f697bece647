"""int8 layers with an odd number of outputs (model_s8.c: two rows per pass over the input, an odd
last row in a pass of its own). No bundled model has one; user models can. A 13 -> 7 -> 5 int8 net
(in % 4 = 1, both layers odd) built with the image's flags and run in Unicorn (edgedp.bench.peers'
harness), with the SMLAD kernel and with the portable C: outputs and logits bit for bit against the
integer NumPy reference, each layer's multiply-adds executed once (the odd row used to run as a
pair, its dot product twice), and the release deadline's model part (deadline.c, which charges an
odd last output as a pair) still covers the run and the wipe with its margin."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from ..helpers import ROOT, require

require("unicorn", "capstone", "elftools")  # edgedp.bench runs the image in Unicorn

from unicorn import UC_HOOK_BLOCK

from edgedp.bench import peers
from edgedp.model import cgen, quantize, reference
from edgedp.model.spec import Dense, DeviceModel, Net, row4


SIZES = (13, 7, 5)
MARGIN = 1.25   # as tests/firmware/test_deadline.py
HARNESS = """\
#include <stdint.h>
#include "deadline.h"
#include "edgedp/model.h"
extern const edp_model_t *const edp_app_model;
float peer_x[{n}];
/* everything the test calls, reachable from the entry */
uint32_t peer_run(uint32_t op, const float *x)
{{
    if (op == 0) return (uint32_t)edp_model_run(edp_app_model, x);
    if (op == 1) edp_model_wipe(edp_app_model);
    return edp_deadline_model(edp_app_model);
}}
"""


@pytest.fixture(scope="module")
def model() -> DeviceModel:
    rng = np.random.default_rng(23)
    layers = tuple(Dense(rng.normal(0, 1, (a, b)).astype(np.float32), rng.normal(0, 0.5, b).astype(np.float32))
                   for a, b in zip(SIZES, SIZES[1:]))
    flt = DeviceModel("odd8", "softmax", SIZES[-1], (Net(layers, np.arange(SIZES[-1])),), 0.0, 1.0,
                      input_range=(-4.0, 4.0))
    return quantize.quantize(flt, rng.normal(0, 1.5, (300, SIZES[0])))


def _harness(model: DeviceModel, dsp: bool) -> peers.Runner:
    name = "odd8" if dsp else "odd8-nodsp"
    src = peers.peers_dir() / name / "model.c"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(cgen.generate(model))
    core = ROOT / "firmware" / "core"
    elf = peers._build(name, HARNESS.format(n=model.n_features),
                       [core / "src" / f for f in (*peers.EDGEDP_FILES, "deadline.c")] + [src],
                       [core / "include", core / "src"], () if dsp else ("-U__ARM_FEATURE_DSP",))
    return peers.Runner(elf)


@pytest.mark.parametrize("dsp", [True, False])
def test_odd_int8_layers_are_bit_exact_and_run_each_row_once(model: DeviceModel, dsp: bool) -> None:
    assert all(l.w.shape[1] % 2 for l in model.nets[0].layers)
    r = _harness(model, dsp)
    smlad, seen = [0], {}

    def count(uc, address, size, _user) -> None:
        if (address, size) not in seen:
            seen[address, size] = sum(i.mnemonic == "smlad" for i in r.cs.disasm(bytes(uc.mem_read(address, size)), address))
        smlad[0] += seen[address, size]

    r.uc.hook_add(UC_HOOK_BLOCK, count)
    rng = np.random.default_rng(5)
    X = np.clip(rng.normal(0, 2.5, (24, SIZES[0])), -4, 4).astype(np.float32)   # clamps on both sides
    raw = reference.run(model, X)
    logits = reference.logits8(model.nets[0], reference.quantize_input(model.quant, X))
    m = struct.unpack("<I", bytes(r.uc.mem_read(r.image.symbol("edp_app_model"), 4)))[0]
    k, runs = model.n_classes, []
    for i, x in enumerate(X):
        xa = r.write_floats("peer_x", x)
        smlad[0] = 0
        n, out = r.call("edp_model_run", m, xa)
        runs.append(n)
        assert r.read_floats(out, k).tobytes() == raw[i].astype("<f4").tobytes(), i
        assert r.read_floats(out + 4 * k, k).tobytes() == logits[i].astype("<f4").tobytes(), i
        if dsp:  # two multiply-adds per SMLAD: each layer's out x row4(in) exactly (an odd row once)
            want = sum(l.w.shape[1] * row4(l.w.shape[0]) for l in model.nets[0].layers) // 2
            assert smlad[0] == want, (i, smlad[0], want)
    wipe, _ = r.call("edp_model_wipe", m)
    _, bound = r.call("edp_deadline_model", m)
    assert bound >= MARGIN * (max(runs) + wipe), (bound, max(runs), wipe)
