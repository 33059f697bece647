"""A later RAM read finds no input and no raw model output of the last answer (issue 17.4).

The logistic-regression test image runs in Unicorn (edgedp.bench.trace); after an INFER and a
QUERY the whole of SRAM is searched for every float32 of the request's inputs and of the model's
raw output (computed bit for bit by edgedp.model.reference). Only the emulator's own receive
buffer (the bytes on the wire, which the peer sent) is left out. Before the fix the model's
scratch held the raw softmax output and the device's input buffer the request."""
from __future__ import annotations

import numpy as np
import pytest

from edgedp.bench.infer import install_model, model_image
from edgedp.bench.trace import RAM_BASE, RAM_SIZE, SCRATCH_SIZE, Emulator, TraceLink
from edgedp.device.client import Device, load_key
from edgedp.device.protocol import Caps, MechConfig
from edgedp.model import cgen, reference

from ..conftest import ROOT


@pytest.fixture(scope="module")
def logreg_emulator() -> Emulator:
    emu = Emulator(model_image("digits_logreg"))
    install_model(emu)
    return emu


def ram(emu: Emulator) -> bytes:
    """SRAM as a debugger would read it, without the emulator's receive buffer."""
    mem = bytearray(emu.uc.mem_read(RAM_BASE, RAM_SIZE))
    off = emu.scratch - RAM_BASE
    mem[off:off + SCRATCH_SIZE] = bytes(SCRATCH_SIZE)
    return bytes(mem)


def found(mem: bytes, values: np.ndarray) -> list[float]:
    return [float(v) for v in values.astype("<f4") if v != 0 and v.tobytes() in mem]


def test_no_input_or_raw_output_stays_in_ram_after_infer_and_query(logreg_emulator: Emulator) -> None:
    dev = Device(TraceLink(logreg_emulator), timeout=60)
    dev.configure(load_key(), MechConfig(), Caps(10**12))
    model = cgen.read(ROOT / "firmware/model/digits_logreg.c")
    rng = np.random.default_rng(17)
    x = rng.random(64, dtype=np.float32) * np.float32(0.99) + np.float32(0.005)
    raw = reference.run(model, x[None, :])[0]
    assert len(set(raw.tolist())) == 10  # distinctive values, none 0
    dev.infer(x, "full")
    mem = ram(logreg_emulator)
    assert not found(mem, x), "the INFER request's inputs stay in RAM"
    assert not found(mem, raw), "the model's raw output stays in RAM"
    q = rng.random(10, dtype=np.float32) * np.float32(0.99) + np.float32(0.005)
    dev.query(q, "label")
    assert not found(ram(logreg_emulator), q), "the QUERY's inputs stay in RAM"
    # the search itself works: the inputs are in RAM while the device still holds them
    dev.local(q)
    assert found(ram(logreg_emulator), q)


def test_int8_model_leaves_no_activation_or_output_in_ram() -> None:
    """The int8 MLP's scratch: its int8 input, hidden activations, widened input and float
    logits/outputs are wiped too (edp_model_wipe_s8)."""
    emu = Emulator(model_image("digits_mlp_int8"))
    install_model(emu)
    dev = Device(TraceLink(emu), timeout=60)
    dev.configure(load_key(), MechConfig(), Caps(10**12))
    model = cgen.read(ROOT / "firmware/model/digits_mlp_int8.c")
    x = np.random.default_rng(18).random(64, dtype=np.float32)
    xq = reference.quantize_input(model.quant, x[None, :])
    hidden = reference.dense8(model.nets[0].layers[0], xq)[0].astype(np.int8).tobytes()
    raw = reference.run(model, x[None, :])[0]
    dev.infer(x, "full")
    mem = ram(emu)
    assert xq[0].astype(np.int8).tobytes() not in mem, "the int8 input stays in RAM"
    assert hidden not in mem, "the hidden activations stay in RAM"
    assert not found(mem, raw), "the raw output stays in RAM"
    assert not found(mem, reference.logits8(model.nets[0], xq)[0]), "the logits stay in RAM"
    dev.infer_local(x)  # the local path keeps them until the next call: the search works
    assert hidden in ram(emu)
