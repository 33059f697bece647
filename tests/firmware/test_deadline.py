"""The release deadline's constants cover the compiled code (firmware/core/src/deadline.c).

The sampler's constants must be at least 1.25 times the longest paths measured on the image
(edgedp.bench.deadline: static sizes of the loop's regions, worst paths with fixed trip counts);
the set-up bound 1.25 times edp_mech_prepare at every L; the model's 1.25 times every bundled
model's inference; the QEMU port's fixed part 1.5 times the longest measured (a reseed in the
window). Whole windows of the production timing image, for every output mode at k = 10 and
k = 1000, the first query after a CONFIG and INFER on every bundled model, must stay within 1/1.25
of their deadline."""
from __future__ import annotations

import re
import struct
import subprocess

import numpy as np
import pytest

from ..helpers import ROOT, make, overflow_model_source, require

require("unicorn", "capstone", "elftools")  # edgedp.bench runs the image in Unicorn

from edgedp.datasets import digits_split
from edgedp.bench.deadline import NONFINITE_CLASSES, WindowProbe, Window, firmware_constants, measure, nonfinite_paths
from edgedp.bench.trace import Emulator
from edgedp.device.protocol import MechConfig


SRC = ROOT / "firmware" / "core" / "src" / "deadline.c"
QEMU_BOARD = ROOT / "firmware" / "ports" / "qemu" / "board.c"
TIMING_ELF = ROOT / "build" / "qemu-timing" / "edgedp.elf"
MARGIN = 1.25        # worst paths from code or fixed trip counts
FIXED_MARGIN = 1.5   # the fixed part, from executions


@pytest.fixture(scope="module")
def worst():
    return measure(ROOT / "build" / "qemu" / "edgedp.elf")


@pytest.fixture(scope="module")
def c():
    return firmware_constants(SRC)


def test_sampler_constants_cover_the_longest_paths(worst, c):
    assert c["EDP_DL_CALL"] >= MARGIN * worst.call()
    assert c["EDP_DL_DRAW"] >= MARGIN * worst.draw()
    assert c["EDP_DL_STORE"] >= MARGIN * worst.store()
    assert c["EDP_DL_ACCEPT"] >= MARGIN * worst.accept()
    assert c["EDP_DL_ACCEPT_CALL"] >= MARGIN * worst.accept_call()
    for nc in range(1, 7):
        fw = c["EDP_DL_EXACT_PER_CHUNK"] * nc + c["EDP_DL_EXACT_PER_CHUNK2"] * nc * nc
        assert fw >= MARGIN * worst.exact(nc), (nc, fw, worst.exact(nc))
    assert c["EDP_DL_HIGH"] >= MARGIN * worst.high()
    assert c["EDP_DL_ROUND"] >= MARGIN * worst.round()
    assert c["EDP_DL_REFILL"] >= MARGIN * worst.refill_path()
    # the measured paths are real: the product grows with the chunks, every limb costs, the
    # fast path is the loop's body (a few dozen instructions)
    assert worst.product[6] > worst.product[1] and worst.less_than[12] > worst.less_than[1] + 11 * 30
    assert 30 <= worst.draw() <= 60 and 10 <= worst.store() <= 30


def test_slow_paths_call_only_what_the_bound_counts():
    """The constants count a slow path's own instructions (its helpers inlined, even in the
    size-optimised cold functions) plus the callees measured on their own: a helper the compiler
    kept out of line would be missed, so the call graph may hold nothing else."""
    from edgedp.bench.deadline import LOOP, SLOW
    from edgedp.bench.footprint import call_graph, linked_symbols
    elf = ROOT / "build" / "qemu" / "edgedp.elf"
    graph = call_graph(elf, linked_symbols(elf))
    measured = {"edp_drbg_next_block", "less_than", "product"}
    allowed = {"edp_dlap_accept_rest": {"accept_exact", "edp_dlap_band"} | measured,
               "edp_dlap_band": set(), "accept_exact": measured, "edp_dlap_high_part": measured,
               LOOP: {"edp_dlap_accept_rest", "edp_dlap_high_part", "edp_drbg_next_block"}}
    assert set(allowed) == set(SLOW) | {LOOP}
    for f, ok in allowed.items():
        assert graph.get(f, set()) <= ok, (f, graph.get(f))
    assert "accept_exact" in graph["edp_dlap_accept_rest"]   # the graph sees calls


def test_setup_bound_covers_every_table_size(worst, c):
    assert len(worst.prepare) == 22                    # L = 0 .. 21
    for L, (_, insns) in worst.prepare.items():
        bound = c["EDP_DL_PREP_BASE"] + c["EDP_DL_PREP_PER_L"] * L
        assert bound >= MARGIN * insns, (L, bound, insns)


def _model_shape(emu: Emulator) -> tuple[int, int, int, int, int]:
    """(nets, classes, multiply-adds, dense outputs, layers) of the image's edp_app_model; an int8 model
    (edp_model_t.s8) counts its inputs as outputs too (their quantisation, as deadline.c does)."""
    img, uc = emu.image, emu.uc

    def rd(addr: int, fmt: str):
        return struct.unpack(fmt, uc.mem_read(addr, struct.calcsize(fmt)))

    m = rd(img.symbol("edp_app_model"), "<I")[0]
    n_classes = rd(m + img.offset("edp_model_t", "n_classes"), "<H")[0]
    n_nets = rd(m + img.offset("edp_model_t", "n_nets"), "<H")[0]
    s8 = rd(m + img.offset("edp_model_t", "s8"), "<I")[0]
    net_t, dense_t = ("edp_net_s8_t", "edp_dense_s8_t") if s8 else ("edp_net_t", "edp_dense_t")
    nets = rd(s8 + img.offset("edp_model_s8_t", "nets") if s8 else m + img.offset("edp_model_t", "nets"), "<I")[0]
    net_size, layer_size = img.offset(net_t, "__size__"), img.offset(dense_t, "__size__")
    macs = layers_total = 0
    units = rd(m + img.offset("edp_model_t", "n_features"), "<H")[0] if s8 else 0
    for i in range(n_nets):
        net = nets + i * net_size
        n_layers = rd(net + img.offset(net_t, "n_layers"), "<H")[0]
        layers = rd(net + img.offset(net_t, "layers"), "<I")[0]
        layers_total += n_layers
        for j in range(n_layers):
            n_in = rd(layers + j * layer_size + img.offset(dense_t, "in"), "<H")[0]
            n_out = rd(layers + j * layer_size + img.offset(dense_t, "out"), "<H")[0]
            macs += n_in * n_out
            units += n_out
    return n_nets, n_classes, macs, units, layers_total


MODELS = ["digits_ensemble", "digits_logreg", "digits_mlp", "digits_ensemble_int8", "digits_logreg_int8",
          "digits_mlp_int8"]


def _old_int8_bound(emu: Emulator, c) -> int:
    """The model part of the bound before the int8 constants: the float32 kernels' per-unit
    constants for an int8 model's multiply-adds and outputs, its inputs counted as outputs;
    with today's charge for the wipe (which it left out) added."""
    n_nets, n_classes, macs, units, _ = _model_shape(emu)
    m = struct.unpack("<I", emu.uc.mem_read(emu.image.symbol("edp_app_model"), 4))[0]
    wipe = 3 * c["EDP_DL_MODEL_ZERO"] + c["EDP_DL_MODEL_WIPE_BYTE"] * emu.call("edp_model_wipe_bytes", m)
    return n_nets * (c["EDP_DL_MODEL_NET"] + c["EDP_DL_MODEL_CLASS"] * n_classes) + \
        units * c["EDP_DL_MODEL_UNIT"] + macs * c["EDP_DL_MODEL_MAC_C"] + wipe  # MAC_C: the 5 it used


def _model_bound(emu: Emulator) -> int:
    """The model's part of an INFER deadline: the image's own edp_deadline_model (computed once
    per model and plan at set-up, so its own loops are the preparing request's, not the
    answer's)."""
    m = struct.unpack("<I", emu.uc.mem_read(emu.image.symbol("edp_app_model"), 4))[0]
    return emu.call("edp_deadline_model", m)


@pytest.mark.parametrize("model", MODELS)
def test_model_bound_covers_every_bundled_model(model, c):
    """The production image's own bound for the model covers its run on test inputs and the wipe
    of its scratch after the answer."""
    from edgedp.bench.infer import model_image
    emu = Emulator(model_image(model, timing=True))
    m = struct.unpack("<I", emu.uc.mem_read(emu.image.symbol("edp_app_model"), 4))[0]
    bound = _model_bound(emu)
    run = 0
    for x in digits_split(0).X_test[:8].astype(np.float32):
        emu.uc.mem_write(emu.scratch, x.tobytes())
        before = emu.count
        emu.call("edp_model_run", m, emu.scratch)
        run = max(run, emu.count - before)
    scratch = struct.unpack("<I", emu.uc.mem_read(m + emu.image.offset("edp_model_t", "scratch"), 4))[0]
    n_classes = struct.unpack("<H", emu.uc.mem_read(m + emu.image.offset("edp_model_t", "n_classes"), 2))[0]
    assert any(emu.uc.mem_read(scratch, 4 * n_classes))              # the outputs of the last run
    before = emu.count
    emu.call("edp_model_wipe", m)
    wipe = emu.count - before
    assert not any(emu.uc.mem_read(scratch, 4 * n_classes))          # wiped
    macs = _model_shape(emu)[2]
    assert run > (macs if model.endswith("_int8") else 2 * macs)  # the model really ran (VMUL + VADD each)
    check = nonfinite_paths(emu.image.path, (n_classes,)).cost(n_classes)  # its outputs checked (non-finite: replaced)
    assert bound >= MARGIN * (run + check + wipe), (model, bound, run, check, wipe)
    if model.endswith("_int8"):
        # int8 constants: at most 2x the work (the float32 ones gave it 2.6-4x)
        old = _old_int8_bound(emu, c)
        assert bound < old and bound <= 2 * (run + wipe), (model, bound, old, run)


@pytest.mark.parametrize("dsp", [True, False])
def test_int8_constants_cover_the_kernels_longest_paths(dsp, c):
    """Each int8 constant covers its per-unit cost fitted on synthetic nets (the worst of the
    data paths), with the SMLAD kernel of the default ports and with the portable C one."""
    from edgedp.bench.deadline import measure_s8
    from edgedp.bench.infer import model_image
    elf = model_image("digits_mlp_int8") if dsp else ROOT / "build" / "qemu-nodsp-model-digits_mlp_int8" / "edgedp.elf"
    if not dsp:
        subprocess.run(["make", "-s", "-C", str(ROOT), str(elf.relative_to(ROOT))], check=True, capture_output=True)
    p = measure_s8(elf)
    suffix = "_DSP" if dsp else "_C"
    assert c["EDP_DL_S8_WORD" + suffix] >= MARGIN * p.word
    assert c["EDP_DL_S8_MAC8" + suffix] >= MARGIN * p.mac8
    assert c["EDP_DL_S8_MODEL"] >= MARGIN * p.call
    assert c["EDP_DL_S8_INPUT"] >= MARGIN * p.input
    assert c["EDP_DL_S8_LAYER"] >= MARGIN * p.layer
    assert c["EDP_DL_S8_UNIT"] >= MARGIN * max(p.hidden, p.last)
    # a net with its head on 2 classes and its last pair of outputs
    assert c["EDP_DL_MODEL_NET"] + 2 * (c["EDP_DL_MODEL_VOTE"] + c["EDP_DL_S8_UNIT"]) >= MARGIN * p.net
    # the figures are the kernels': 13 instructions per 8 multiply-adds with SMLAD (two rows per
    # pass over the widened input), more in C
    assert (p.mac8 == 13) if dsp else (p.mac8 > 20)


def test_float_constants_cover_the_dense_loops(c):
    """The dense loops (arch/armv7m/model_armv7m.c: four rows per pass, then one at a time) for
    every input length up to 128: a row's multiply-adds and its share of the loop's own work within
    EDP_DL_MODEL_MAC per multiply-add and EDP_DL_MODEL_UNIT per output."""
    from edgedp.bench.infer import model_image
    emu = Emulator(model_image("digits_mlp", timing=True))
    s = emu.scratch
    emu.uc.mem_write(s, bytes(0x3000))
    mac, unit = c["EDP_DL_MODEL_MAC_FPU"], c["EDP_DL_MODEL_UNIT"]
    for n in range(1, 129):
        before = emu.count
        emu.call("edp_model_dense4", s, n, s + 0x400, s + 0x2000, s + 0x2100)
        four = emu.count - before
        before = emu.count
        emu.call("edp_model_dot", s, n, s + 0x400, fargs=(0.0,))
        one = emu.count - before
        assert 4 * (unit + mac * n) >= MARGIN * four and unit + mac * n >= MARGIN * one, (n, four, one)
    assert 2 * n < one < 4 * n and four < 3 * 4 * n    # n = 128: the VLDMIA loops, 2.5 and 3.1 per multiply-add


def test_head_and_wipe_constants_cover_their_paths(c):
    from edgedp.bench.deadline import head_per_class
    from edgedp.bench.infer import model_image
    elf = model_image("digits_mlp_int8")
    per_class = head_per_class(elf)
    assert c["EDP_DL_MODEL_CLASS"] >= MARGIN * per_class["softmax"]
    assert c["EDP_DL_MODEL_VOTE"] >= MARGIN * per_class["votes"]
    assert per_class["softmax"] > 2 * per_class["votes"] > 0
    emu = Emulator(model_image("digits_mlp_int8", timing=True))
    for n in [*range(0, 70, 3), 400, 4000]:
        for align in range(4):
            emu.uc.mem_write(emu.scratch, b"\xaa" * 4100)
            before = emu.count
            emu.call("edp_model_zero", emu.scratch + align, n)
            cost = emu.count - before
            assert c["EDP_DL_MODEL_ZERO"] + c["EDP_DL_MODEL_WIPE_BYTE"] * n >= MARGIN * cost, (n, align, cost)
            assert emu.uc.mem_read(emu.scratch, 4100) == b"\xaa" * align + bytes(n) + b"\xaa" * (4100 - n - align)


@pytest.mark.parametrize("image", ["production", "digits_mlp_int8"])
def test_nonfinite_constants_cover_the_output_check(image, c):
    """answer.c's finite_output on every INFER: the check of the model's outputs and, the last
    one not finite (its longest path), the fixed vector in every class, with its call site,
    within EDP_DL_NONFINITE + EDP_DL_NONFINITE_CLASS per class, for 1 to 32, 100 and 1000 classes."""
    from edgedp.bench.infer import model_image
    p = nonfinite_paths(TIMING_ELF if image == "production" else model_image(image, timing=True))
    for n in NONFINITE_CLASSES:
        assert c["EDP_DL_NONFINITE"] + c["EDP_DL_NONFINITE_CLASS"] * n >= MARGIN * p.cost(n), (n, p.cost(n))
    per_class = (p.run[1000] - p.run[100]) / 900
    assert 10 < per_class < 20 and 2 <= p.site <= 8   # the check (about 11) and the store (3) per class


@pytest.fixture(scope="module")
def probe():
    return WindowProbe(TIMING_ELF, model=True)


def test_qemu_fixed_part_covers_a_window_with_a_reseed(probe, c):
    """A k = 1 QUERY whose charge reseeds: its work outside the noise, less the per-value parts
    the bound counts on their own, is the port's fixed part."""
    fixed = int(re.search(r"\.window_fixed = (\d+)u", QEMU_BOARD.read_text()).group(1))
    probe.configure(MechConfig(1_000_000, 0.0, 1.0, 1.0, None))
    probe.dev.query(np.zeros(1, dtype=np.float32))   # the plan, outside the measurement
    w = Window()
    for i in range(3):
        if i == 0:
            probe.force_reseed()
        probe.run(lambda d: d.query(np.array([0.5], dtype=np.float32)), w)
    measured = w.rest - c["EDP_DL_PER_INPUT"] - c["EDP_DL_PER_CLASS"]
    assert measured > 1000                            # the charge and header really ran
    assert fixed >= FIXED_MARGIN * measured, (fixed, measured)


def test_per_value_constants_cover_the_longest_values(probe, c):
    """All-zero inputs are the request's longest decoding (every float four COBS code bytes) and
    near-zero answers the response's longest encoding: the part outside the noise per value,
    between k = 10 and k = 1000, within the per-input and per-class constants."""
    probe.configure(MechConfig(1_000_000, 0.0, 1.0, 1.0, None))
    rest = {}
    for k in (10, 1000):
        probe.dev.query(np.zeros(k, dtype=np.float32))  # the plan
        w = Window()
        probe.run(lambda d: d.query(np.zeros(k, dtype=np.float32)), w)
        rest[k] = w.rest
    per_value = (rest[1000] - rest[10]) / 990
    assert per_value > 100                                  # the values' own work really ran
    assert c["EDP_DL_PER_INPUT"] + c["EDP_DL_PER_CLASS"] >= MARGIN * per_value, per_value


@pytest.mark.slow
def test_whole_windows_stay_within_their_deadline(probe):
    rng = np.random.default_rng(3)
    for eps_micro in (100_000, 1_000_000, 10_000_000):
        probe.configure(MechConfig(eps_micro, 0.0, 1.0, 1.0, None))
        for k in (10, 1000) if eps_micro == 1_000_000 else (10,):
            for i, mode in enumerate(("full", "topk:32", "label", "bucket", "round:3", "simplex", "full")):
                w = Window()
                if i == 1:
                    probe.force_reseed()
                x = rng.random(k, dtype=np.float32) if i < 6 else np.zeros(k, dtype=np.float32)
                probe.run(lambda d: d.query(x, mode), w)
                # i == 0 is the first query after the CONFIG: it prepared the plan
                assert MARGIN * w.work <= w.deadline, (eps_micro, k, mode, w.as_dict())
    for i, x in enumerate(digits_split(0).X_test[:3].astype(np.float32)):
        w = Window()
        probe.run(lambda d, x=x: d.infer(x, "label"), w)
        assert MARGIN * w.work <= w.deadline, ("infer", i, w.as_dict())


def test_a_non_finite_infer_stays_within_its_deadline(tmp_path, c):
    """A model whose logits overflow to Inf on clamped inputs (the softmax gives NaN): the INFER
    window, which replaces the output by the fixed vector, on its production timing image, the
    first after a CONFIG and one whose charge reseeds, within 1/1.25 of its deadline; the
    deadline's model part charges finite_output (the check and the fixed vector) for its 10
    classes."""
    from unicorn import UC_HOOK_CODE
    from unicorn.arm_const import UC_ARM_REG_R0, UC_ARM_REG_R1
    overflow_model_source(tmp_path)
    make("build/qemu-timing-model-overflow/edgedp.elf")
    probe = WindowProbe(ROOT / "build/qemu-timing-model-overflow/edgedp.elf", model=True)
    emu = probe.emu
    outputs = []

    def seen(uc, address, size, user) -> None:  # finite_output(m, y): the model's raw output y
        n = struct.unpack("<H", uc.mem_read(uc.reg_read(UC_ARM_REG_R0) + emu.image.offset("edp_model_t", "n_classes"), 2))[0]
        outputs.append(np.frombuffer(bytes(uc.mem_read(uc.reg_read(UC_ARM_REG_R1), 4 * n)), np.float32))
    entry = emu.image.symbol("finite_output") & ~1
    emu.uc.hook_add(UC_HOOK_CODE, seen, begin=entry, end=entry)
    probe.configure(MechConfig(1_000_000, 0.0, 1.0, 1.0, None))
    x = np.zeros(64, np.float32)
    x[:2] = 5.0                                          # clamped to 1: 3e38 + 3e38 = Inf
    first, warm = Window(), Window()
    probe.run(lambda d: d.infer(x, "full"), first)
    probe.force_reseed()
    probe.run(lambda d: d.infer(x, "full"), warm)
    assert len(outputs) == 2 and not np.isfinite(outputs[0]).any() and not np.isfinite(outputs[1]).any()
    for w in (first, warm):
        assert MARGIN * w.work <= w.deadline, w.as_dict()
    # the model part, term by term: the float32 net and softmax head, the output check, the wipe
    n_nets, n_classes, macs, units, _ = _model_shape(emu)
    m = struct.unpack("<I", emu.uc.mem_read(emu.image.symbol("edp_app_model"), 4))[0]
    assert (n_nets, n_classes, macs, emu.uc.mem_read(m + emu.image.offset("edp_model_t", "head"), 1)) == \
        (1, 10, 640, b"\x00")                        # softmax
    assert _model_bound(emu) == (c["EDP_DL_MODEL_NET"] + c["EDP_DL_MODEL_CLASS"] * n_classes +
                                 c["EDP_DL_MODEL_UNIT"] * units + c["EDP_DL_MODEL_MAC_FPU"] * macs +
                                 c["EDP_DL_NONFINITE"] + c["EDP_DL_NONFINITE_CLASS"] * n_classes +
                                 c["EDP_DL_MODEL_ZERO"] + c["EDP_DL_MODEL_WIPE_BYTE"] * emu.call("edp_model_wipe_bytes", m))


@pytest.mark.slow
@pytest.mark.parametrize("model", ["digits_logreg", "digits_mlp", "digits_ensemble_int8", "digits_logreg_int8",
                                   "digits_mlp_int8"])
def test_infer_windows_of_the_other_models_stay_within_their_deadline(model, c):
    from edgedp.bench.deadline import infer_windows
    from edgedp.bench.infer import model_image
    elf = model_image(model, timing=True)
    res = infer_windows(elf, digits_split(0).X_test[:3].astype(np.float32))
    for phase in ("first", "warm"):
        assert MARGIN * res[phase]["work"] <= res[phase]["deadline"], (model, phase, res)
    if model.endswith("_int8"):
        # below the deadline the float32 constants gave the int8 model
        emu = Emulator(elf)
        old = res["warm"]["deadline"] - _model_bound(emu) + _old_int8_bound(emu, c)
        assert res["warm"]["deadline"] < old, (model, res, old)
