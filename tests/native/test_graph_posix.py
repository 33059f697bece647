"""Imported graphs on the posix port (issue 40): `edgedp deploy` of the committed int8 TFLite CNN
-> the C data -> model_graph.c, bit for bit against the NumPy reference on 1,000 inputs (whose int8
logits tests/python/test_model_import.py holds equal to LiteRT's reference kernels); QEMU runs the
Cortex-M4 build (tests/hil/test_qemu_graph.py)."""
from __future__ import annotations

import zlib
from pathlib import Path

from ..helpers import ROOT, TEST_EPOCH, make, require

require("tflite")  # the importer's parser

import numpy as np
import pytest

from edgedp.device.client import Device
from edgedp.device.transport import ProcessLink
from edgedp.model import cgen, deploy, reference

pytestmark = pytest.mark.native
MODELS = ("digits_cnn_int8", "digits_cnn2_int8")  # between them every supported operator


def graph_inputs(n: int = 1000) -> np.ndarray:
    """n 8x8 images flattened (H, W, C order): the digits test set, then uniform pixels and values
    outside the declared range [0, 1] (clamped by the device first)."""
    from edgedp.datasets import digits_split
    X = digits_split(0).X_test.astype(np.float32)
    rng = np.random.default_rng(40)
    extra = np.vstack([rng.uniform(0, 1, (n // 4, 64)), rng.normal(0.5, 2, (n, 64))]).astype(np.float32)
    return np.vstack([X, extra])[:n]


@pytest.mark.parametrize("name", MODELS)
def test_posix_graph_is_bit_exact_on_1000_inputs(tmp_path: Path, name: str) -> None:
    out = ROOT / f"build/gen/models/test_{name}.c"
    deploy.deploy(str(ROOT / f"examples/models/{name}.tflite"), out)
    make(f"build/posix-model-test_{name}/edgedp")
    link = ProcessLink([str(ROOT / f"build/posix-model-test_{name}/edgedp")],
                       {"EDP_STORE_FILE": str(tmp_path / "store.bin"), "EDP_POSIX_TIME": str(TEST_EPOCH)})
    dev = Device(link, timeout=60)
    try:
        dev.sync(10)
        model = cgen.read(out)
        assert model.graph is not None
        X = graph_inputs()
        raw = reference.run(model, X)
        got = list(dev.infer_local_many(X))
        want = [(int(reference.first_argmax(raw[i:i + 1])[0]), zlib.crc32(raw[i].astype("<f4").tobytes()))
                for i in range(len(X))]
        bad = [i for i in range(len(X)) if got[i] != want[i]]
        assert len(got) == 1000 and not bad, f"{len(bad)} mismatches, first row {bad[:1]}"
        info = dev.info()
        assert info.model is not None and info.model.sha256 == cgen.digest(model)
        assert (info.model.kind, info.model.input_shape, info.model.classes) == ("int8", (8, 8, 1), 10)
    finally:
        link.close()
