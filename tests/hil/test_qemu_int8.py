"""int8 models on the emulated board (issue 22 item 4): the QEMU test image built with the
bundled int8 digits MLP (build/qemu-model-digits_mlp_int8) against the integer NumPy
reference, bit for bit; and `edgedp deploy --int8` -> build -> `edgedp query --infer` end to end."""
from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

from ..helpers import ROOT, make, require, run_cli

require("sklearn", "joblib")  # the digits split and the models

import joblib
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from edgedp.datasets import digits_split
from edgedp.device.client import Device
from edgedp.device.targets.qemu import free_port, qemu_argv, qmp
from edgedp.model import cgen
from edgedp.model.image import InferReference

from .test_qemu_infer import MODES, model_target, prepare, raw_mismatches

pytestmark = pytest.mark.hil
SPLIT = digits_split(0)
INT8 = ROOT / "firmware/model/digits_mlp_int8.c"


@pytest.fixture(scope="module")
def int8_paused(test_key: bytes) -> Iterator[Device]:
    """The int8 MLP's image, prepared, then paused (``int8_dev`` runs it for the tests that use it:
    see conftest's qemu_target; the end-to-end test below trains, builds and boots another image
    meanwhile)."""
    t = model_target("digits_mlp_int8")
    try:
        dev = prepare(Device(t.link(), timeout=20, target=t), test_key)
        qmp(t.qmp_path, "stop")
        yield dev
    finally:
        t.close()


@pytest.fixture
def int8_dev(int8_paused: Device) -> Iterator[Device]:
    qmp(int8_paused.target.qmp_path, "cont")
    yield int8_paused
    qmp(int8_paused.target.qmp_path, "stop")


def inputs() -> np.ndarray:
    """200 test images and 40 random vectors far outside the pixel range (saturating inputs)."""
    return np.vstack([SPLIT.X_test[:200], np.random.default_rng(5).normal(0, 4, (40, 64))]).astype(np.float32)


def test_int8_raw_output_is_bit_exact(int8_dev: Device) -> None:
    model = cgen.read(INT8)
    assert model.int8
    bad = raw_mismatches(int8_dev, model, inputs())
    assert not bad, f"{len(bad)} mismatches, first row {bad[0]}"


def test_int8_infer_release_is_bit_exact_and_charged(int8_dev: Device, test_key: bytes) -> None:
    model = cgen.read(INT8)
    seed = bytes(range(50, 82))
    int8_dev.test_seed(test_key, seed)
    ref = InferReference(model, seed)
    spent0 = int8_dev.budget().lifetime_spent
    X = inputs()[::4]
    for i, x in enumerate(X):
        mode = MODES[i % len(MODES)]
        r, _ = int8_dev.infer(x, mode)
        assert r.same_answer(ref.infer(x, mode)), (i, mode)
    assert int8_dev.budget().lifetime_spent - spent0 == len(X) * 1_000_000


def edgedp(*args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, env={"PYTHONPATH": str(ROOT / "host")}, timeout=600)


def test_deploy_int8_build_and_query_infer_end_to_end(tmp_path: Path, test_key: bytes) -> None:
    m = LogisticRegression(C=10.0, max_iter=2000).fit(SPLIT.X_pool, SPLIT.y_pool)
    joblib.dump(m, tmp_path / "lr8cli.joblib")
    np.save(tmp_path / "calib.npy", SPLIT.X_pool)
    models = ROOT / "build/gen/models"  # where the Makefile's qemu-model-NAME rule finds deployed models
    r = edgedp("deploy", str(tmp_path / "lr8cli.joblib"), "--int8", "--calibration", str(tmp_path / "calib.npy"),
               "--input-range", "0", "1", "--out", str(models / "lr8cli.c"))
    assert r.returncode == 0, r.stderr
    assert "int8 parameters" in r.stdout
    make("build/qemu-model-lr8cli/edgedp.elf")
    model = cgen.read(models / "lr8cli.c")
    X = SPLIT.X_test[:12].astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    port = free_port()
    qemu = subprocess.Popen(qemu_argv(ROOT / "build/qemu-model-lr8cli/edgedp.elf", 1, port,
                                      str(tmp_path / "qmp.sock")), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r = edgedp("query", "--infer", str(tmp_path / "x.npy"), "--target", f"socket://127.0.0.1:{port}",
                   "--epsilon", "1", "--mode", "label", "--key-file", str(ROOT / "tests/keys/test-device.key"),
                   "--json")
    finally:
        qemu.kill()
        qemu.wait()
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert [row["status"] for row in rows] == ["ok"] * len(X)
    ref = InferReference(model)  # the test image's public seed: the answers replay
    want = [ref.infer(x, "label").label for x in X]
    assert [row["output"]["label"] for row in rows] == want
