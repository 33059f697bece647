"""Imported graphs on the emulated board (issue 40): the committed int8 TFLite CNNs deployed, built
for QEMU and run on the Cortex-M4 kernels bit for bit against the reference (about 20 inputs per
model; the posix port runs 1,000: tests/native/test_graph_posix.py), and `edgedp deploy model.tflite`
-> `make` -> `edgedp query --infer` end to end with a replayed answer."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ..helpers import ROOT, TEST_EPOCH, make, require, run_cli

require("tflite")  # the importer

import numpy as np
import pytest

from edgedp.device.client import Device
from edgedp.device.targets.qemu import free_port, qemu_argv
from edgedp.model import cgen, deploy
from edgedp.model.image import InferReference

from .test_qemu_infer import model_target, prepare, raw_mismatches

pytestmark = pytest.mark.hil
MODELS = ROOT / "examples/models"


def images(n: int) -> np.ndarray:
    from edgedp.datasets import digits_split
    rng = np.random.default_rng(42)
    return np.vstack([digits_split(0).X_test[:n - 4], rng.normal(0.5, 2, (4, 64))]).astype(np.float32)


@pytest.mark.parametrize("name", ("digits_cnn_int8", "digits_cnn2_int8"))
def test_graph_raw_output_is_bit_exact_on_the_cortex_m4(name: str, test_key: bytes) -> None:
    out = ROOT / f"build/gen/models/test_{name}.c"
    deploy.deploy(str(MODELS / f"{name}.tflite"), out)
    t = model_target(f"test_{name}")
    try:
        dev = prepare(Device(t.link(), timeout=30, target=t), test_key)
        model = cgen.read(out)
        bad = raw_mismatches(dev, model, images(20))
        assert not bad, f"{len(bad)} of 20 mismatch, first row {bad[0]}"
        info = dev.info().model
        assert info is not None and (info.name, info.kind, info.sha256) == (name, "int8", cgen.digest(model))
    finally:
        t.close()


def test_deploy_tflite_build_and_query_infer_end_to_end(tmp_path: Path) -> None:
    c = ROOT / "build/gen/models/cnncli.c"  # where the Makefile's qemu-model-NAME rule finds it
    r = run_cli("deploy", str(MODELS / "digits_cnn_int8.tflite"), "--out", str(c), env={"PYTHONPATH": str(ROOT / "host")})
    assert r.returncode == 0, r.stderr
    assert "int8 graph" in r.stdout and "bytes of arena" in r.stdout
    make("build/qemu-model-cnncli/edgedp.elf")
    X = images(8)
    np.save(tmp_path / "x.npy", X)
    port = free_port()
    qemu = subprocess.Popen(qemu_argv(ROOT / "build/qemu-model-cnncli/edgedp.elf", 1, port, str(tmp_path / "qmp.sock")),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r = run_cli("query", "--infer", str(tmp_path / "x.npy"), "--target", f"socket://127.0.0.1:{port}",
                    "--epsilon", "1", "--mode", "label", "--key-file", str(ROOT / "tests/keys/test-device.key"),
                    "--json", timeout=300)
    finally:
        qemu.kill()
        qemu.wait()
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert [row["status"] for row in rows] == ["ok"] * len(X)
    ref = InferReference(cgen.read(c))  # the test image's public seed: the answers replay
    assert [row["output"]["label"] for row in rows] == [ref.infer(x, "label").label for x in X]
