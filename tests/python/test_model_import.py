"""TFLite import on the host (issue 40): the graph reference's int8 logits equal the LiteRT reference
interpreter's (BUILTIN_REF) on 1,000 inputs per committed model, the C data reads back to the same
model and sha256, and a model with an unsupported operator is refused before anything is written.
The device side: tests/native/test_graph_posix.py (posix), tests/hil/test_qemu_graph.py (QEMU)."""
from __future__ import annotations

from pathlib import Path

from ..helpers import ROOT, one_line_error, require, run_cli

require("tflite", "ai_edge_litert")  # the parser and the reference runtime

import numpy as np
import pytest

from edgedp.model import cgen, deploy, graph_ref, reference, tflite_import
from edgedp.model.graph import quantize_multiplier

MODELS = ROOT / "examples/models"
INT8 = ("digits_cnn_int8", "digits_cnn2_int8")


def inputs(n: int = 1000) -> np.ndarray:
    """The digits test images, then random pixel images and values past the input's range."""
    from edgedp.datasets import digits_split
    rng = np.random.default_rng(41)
    X = digits_split(0).X_test.astype(np.float32)
    return np.vstack([X, rng.uniform(0, 1, (n // 4, 64)), rng.normal(0.5, 2, (n, 64))]).astype(np.float32)[:n]


@pytest.mark.parametrize("name", INT8)
def test_int8_logits_equal_litert_reference_kernels(name: str) -> None:
    path = MODELS / f"{name}.tflite"
    g = tflite_import.load(path)
    X = inputs()
    ours = graph_ref.logits_q(g, graph_ref.quantize_input(g, X))
    theirs = tflite_import.runtime_outputs(path, X)
    assert ours.shape == theirs.shape == (1000, 10)
    bad = np.nonzero((ours != theirs).any(axis=1))[0]
    assert not len(bad), f"{len(bad)} of 1000 rows differ, first {bad[0]}: {ours[bad[0]]} vs {theirs[bad[0]]}"


def test_every_supported_operator_is_in_the_fixtures() -> None:
    kinds = {op.kind for name in INT8 for op in tflite_import.load(MODELS / f"{name}.tflite").ops}
    assert kinds == {"conv", "dwconv", "fc", "avgpool", "maxpool", "mean", "pad", "add"}
    g = tflite_import.load(MODELS / "digits_cnn2_int8.tflite")
    fc = [op for op in g.ops if op.kind == "fc"]
    assert fc and all(op.mult is not None and len(op.mult) == 1 for op in fc)  # per-tensor weights


def test_quantize_input_rounds_halves_away_from_zero() -> None:
    g = tflite_import.load(MODELS / "digits_cnn_int8.tflite")
    t = g.tensors[g.input]
    x = np.array([[np.float32(0.5 * t.scale)] * 64, [np.float32(1.5 * t.scale)] * 64, [-1.0] * 64, [9.0] * 64],
                 np.float32)
    q = graph_ref.quantize_input(g, x)[:, 0]
    want = [round(float(np.float32(v) / np.float32(t.scale)) + 1e-9) + t.zp for v in x[:2, 0]]
    assert list(q[:2]) == want and q[2] == -128 and q[3] == 127


def test_quantize_multiplier_is_tflites() -> None:
    assert quantize_multiplier(0.5) == (1 << 30, 0)
    assert quantize_multiplier(0.0) == (0, 0)
    m, s = quantize_multiplier(0.0003)
    assert 1 << 30 <= m < 1 << 31 and abs(m * 2.0 ** (s - 31) - 0.0003) < 1e-12


def test_deployed_c_reads_back_to_the_same_model(tmp_path: Path) -> None:
    d = deploy.deploy(str(MODELS / "digits_cnn_int8.tflite"), tmp_path / "cnn.c")
    model = cgen.read(tmp_path / "cnn.c")
    assert model.graph is not None and d.sha256 == cgen.digest(model) and d.int8
    assert (model.shape, model.input_range, model.n_classes) == ((8, 8, 1), (0.0, 1.0), 10)
    X = inputs(200)
    direct = tflite_import.device_model(MODELS / "digits_cnn_int8.tflite")
    assert np.array_equal(reference.run(model, X), reference.run(direct, X))
    text = (tmp_path / "cnn.c").read_text()
    tampered = text.replace("{0, 0, -128, 127, 3, 3,", "{0, 0, -127, 127, 3, 3,", 1)  # the first clamp
    assert tampered != text
    (tmp_path / "bad.c").write_text(tampered)
    with pytest.raises(ValueError, match="sha256"):
        cgen.read(tmp_path / "bad.c")


def test_unsupported_operator_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    out = tmp_path / "m.c"
    r = run_cli("deploy", str(MODELS / "unsupported_int8.tflite"), "--out", str(out))
    one_line_error(r, "node 5 (TANH) is not supported; supported: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED")
    assert not out.exists()


def test_float_tflite_and_the_int8_flag_are_refused_with_a_reason(tmp_path: Path) -> None:
    r = run_cli("deploy", str(MODELS / "digits_cnn_int8.tflite"), "--int8", "--out", str(tmp_path / "m.c"))
    one_line_error(r, "--int8 quantises a float model")
    r = run_cli("deploy", str(MODELS / "digits_cnn_f32.tflite"), "--out", str(tmp_path / "m.c"))
    one_line_error(r, "float32 .tflite models are not supported yet")


def test_a_model_that_does_not_fit_is_refused_with_the_numbers(tmp_path: Path) -> None:
    from edgedp.model import memory
    from edgedp.model.graph import Graph, Op, Tensor
    from edgedp.model.spec import DeviceModel
    big = Graph((Tensor((100, 100, 8), 1.0, 0), Tensor((100, 100, 8), 1.0, 0)), (Op("pad", 0, 1, "node 0"),), 0, 1)
    model = DeviceModel("big", "softmax", big.n_outputs, (), 0.0, 1.0, input_range=(0.0, 1.0), graph=big)
    with pytest.raises(ValueError, match=f"needs {model.scratch_bytes} bytes of RAM; the STM32F4 image leaves "
                                         f"{memory.IMAGE_RAM - memory.CORE_RAM - memory.MIN_STACK}"):
        memory.check_fits(model)
    assert memory.check_fits(tflite_import.device_model(MODELS / "digits_cnn_int8.tflite")).fits
